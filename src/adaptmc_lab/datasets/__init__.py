"""Data sets only the lab's reproductions use; their files ship in ``adaptmc_lab/data``."""

from pathlib import Path

LAB_DATA = Path(__file__).resolve().parents[1] / "data"
