"""The bench's sizes, its cells and their seeds, and the default and quick matrices.

A cell is ``(target, sampler, seed index)``. Its seed is a hash of ``(target, seed index)``
(`cell_seed`), so every sampler in a row starts from the same initial positions and a cell
computes the same numbers whether it runs serially, on a local cluster or on a remote one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


@dataclass(frozen=True)
class BenchConfig:
    """Sizes shared by every cell.

    num_chains
        Chains per cell.
    num_warmup, num_samples
        Draws per chain of warm-up and of sampling for the HMC-family samplers (NUTS and
        adaptmc's HMC); gadMALA makes ``mala_thin`` times as many (cheaper) steps.
    grid_leapfrog
        Leapfrog steps the grid tuner tries after dual averaging.
    tuning_budget
        Gradient evaluations per chain per super-transition of the bandit tuners.
    """

    num_chains: int = 4
    num_warmup: int = 500
    num_samples: int = 1000
    grid_leapfrog: tuple[int, ...] = (2, 4, 8, 16, 32, 64)
    tuning_budget: int = 512
    num_tuning: int = 24
    mala_thin: int = 10
    init_jitter: float = 0.5


class SamplerOutput(NamedTuple):
    """``positions: (chains, draws, dim)`` flat sampling draws; ``warmup_grads`` and
    ``sampling_grads`` over all chains (initial gradients count as warm-up); ``wall_s``
    excludes ``compile_s``; ``divergences`` during sampling; ``params`` the tuned setting."""

    positions: np.ndarray
    warmup_grads: int
    sampling_grads: int
    wall_s: float
    compile_s: float
    divergences: int
    params: dict


class Cell(NamedTuple):
    target: str
    sampler: str
    seed_index: int

    @property
    def key(self) -> str:
        """A file-safe identifier, also the Dask task key."""
        return f"{self.target}__{self.sampler}__s{self.seed_index}"


def cell_seed(target: str, seed_index: int) -> int:
    """The seed of every cell in row ``(target, seed_index)``: the first 31 bits of
    SHA-256 of ``"target/seed_index"`` (no dependence on process, order or hash seed)."""
    digest = hashlib.sha256(f"{target}/{seed_index}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def make_cells(targets: list[str], samplers: list[str], num_seeds: int) -> list[Cell]:
    """The matrix in row-major order: target, then sampler, then seed."""
    return [Cell(t, s, i) for t in targets for s in samplers for i in range(num_seeds)]


def initial_positions(target, seed: int, num_chains: int, jitter: float) -> np.ndarray:
    """``(num_chains, dim)``: the target's start plus ``U(-jitter, jitter)``, from ``seed``."""
    rng = np.random.default_rng(seed)
    start = np.asarray(target.initial_position, dtype=float)
    return start + rng.uniform(-jitter, jitter, size=(num_chains, start.shape[0]))


DEFAULT_SAMPLERS = ("adaptmc-hmc-da", "adaptmc-hmc-grid", "adaptmc-hmc-gpucb",
                    "adaptmc-hmc-parametric", "adaptmc-hmc-hedge", "adaptmc-hmc-sir",
                    "adaptmc-gadmala", "blackjax-nuts")

POSTERIORDB_TARGETS = tuple(
    f"pdb-{name}" for name in (
        "eight_schools-eight_schools_noncentered", "arK-arK", "diamonds-diamonds",
        "gp_pois_regr-gp_pois_regr", "low_dim_gauss_mix-low_dim_gauss_mix", "garch-garch11",
        "kidiq-kidscore_momiq", "nes1972-nes",
    )
)
DEFAULT_TARGETS = (*POSTERIORDB_TARGETS, "std-normal-10d", "gauss-2d-v2", "funnel-10d",
                   "logistic-german", "bnn-robot-arm")
QUICK_TARGETS = ("pdb-eight_schools-eight_schools_noncentered", "pdb-kidiq-kidscore_momiq",
                 "std-normal-10d")
QUICK_SAMPLERS = ("adaptmc-hmc-da", "blackjax-nuts")
QUICK_CONFIG = BenchConfig(num_chains=4, num_warmup=200, num_samples=300,
                           grid_leapfrog=(4, 16), num_tuning=6, mala_thin=4)
