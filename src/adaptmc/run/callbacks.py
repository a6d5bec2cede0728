"""The progress bar the super-transitions stage shows, the kernel's tunables by their
labels."""

from __future__ import annotations

import math

import numpy as np


class ProgressBar:
    """A tqdm bar over super-transitions; called after each one with
    ``(params, summary, reward, total)`` (``total``: the run's length now), it shows
    acceptance, every tunable's value by its label,
    the reward and divergences."""

    def __init__(self, total: int, initial: int, tunables=()):
        from tqdm.auto import tqdm

        self.tunables = tuple(tunables)
        self.bar = tqdm(total=total, initial=initial, unit="st", desc="super-transitions",
                        dynamic_ncols=True)

    def __call__(self, params, summary: dict, reward: float, total: int | None = None) -> None:
        if total is not None and total != self.bar.total:  # a tuner stopped adapting early
            self.bar.total = total
        self.bar.update(1)
        self.bar.set_postfix(postfix(params, summary, reward, self.tunables), refresh=False)

    def close(self) -> None:
        self.bar.close()


def postfix(params, summary: dict, reward: float, tunables=()) -> dict:
    """The progress bar's postfix: ``acc``, each tunable's ``label``, ``reward``, ``div``."""
    out = {"acc": f"{summary['acceptance_rate']:.2f}"}
    for tunable in tunables:
        value = getattr(params, tunable.name)
        out[tunable.label] = (int(value) if tunable.integer
                              else f"{float(np.mean(value)):.3g}")
    if not math.isnan(reward):
        out["reward"] = f"{reward:.3g}"
    if summary["divergences"]:
        out["div"] = summary["divergences"]
    return out
