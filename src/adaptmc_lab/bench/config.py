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
        NUTS's warm-up transitions and draws per chain; adaptmc's adaptive-hmc warms up for
        as many NUTS transitions and samples about as many draws' worth of gradients
        (`adaptmc_lab.bench.samplers.recipe_options`); the other recipes keep their defaults.
    init_jitter
        Starts are the target's initial position plus ``U(-init_jitter, init_jitter)``
        (a chain's retried as Stan does where not finite, `bench_starts`).
    """

    num_chains: int = 4
    num_warmup: int = 500
    num_samples: int = 1000
    init_jitter: float = 0.5


class SamplerOutput(NamedTuple):
    """``positions: (chains, draws, dim)`` flat sampling draws; ``warmup_grads`` and
    ``sampling_grads`` over all chains (initial gradients count as warm-up); ``wall_s``
    excludes ``compile_s``; ``divergences`` during sampling; ``params`` the tuned setting;
    ``host_s`` the seconds the tuner and the objective spent on the host (0 for NUTS);
    ``programs`` adaptmc's compile census, ``{"compiled": n, "loaded": m}`` (None for the
    peers), which depends on what the compile cache held."""

    positions: np.ndarray
    warmup_grads: int
    sampling_grads: int
    wall_s: float
    compile_s: float
    divergences: int
    params: dict
    host_s: float = 0.0
    programs: dict | None = None


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
    """``(num_chains, dim)``: the starts `adaptmc.run.run` draws for ``seed`` (`bench_starts`),
    so a bench row starts where ``adaptmc sample --seed`` does."""
    return np.asarray(bench_starts(target, seed, num_chains, jitter).positions)


def bench_starts(target, seed: int, num_chains: int, jitter: float):
    """The starts every sampler of a row gets, those `adaptmc.run.run` makes for ``seed``
    (`adaptmc.run.loop.default_starts`: the target's start plus ``U(-jitter, jitter)``, a
    chain's retried as Stan does where its log density or gradient is not finite), with
    the points evaluated and each chain's retries."""
    from adaptmc.run import run_keys
    from adaptmc.run.loop import default_starts

    return default_starts(target, num_chains, run_keys(seed, "init"), jitter)


DEFAULT_SAMPLERS = ("adaptmc-adaptive-hmc", "adaptmc-gadmala", "blackjax-nuts")

POSTERIORDB_TARGETS = tuple(
    f"pdb-{name}" for name in (
        "eight_schools-eight_schools_noncentered", "arK-arK", "diamonds-diamonds",
        "gp_pois_regr-gp_pois_regr", "low_dim_gauss_mix-low_dim_gauss_mix", "garch-garch11",
        "kidiq-kidscore_momiq", "nes1972-nes", "earnings-earn_height",
        "gp_pois_regr-gp_regr", "hudson_lynx_hare-lotka_volterra",
    )
)
DEFAULT_TARGETS = (*POSTERIORDB_TARGETS, "std-normal-10d", "gauss-2d-v2", "neal-100d",
                   "funnel-10d", "logistic-german", "bnn-robot-arm")
QUICK_TARGETS = ("pdb-eight_schools-eight_schools_noncentered", "pdb-kidiq-kidscore_momiq",
                 "std-normal-10d")
QUICK_SAMPLERS = ("adaptmc-adaptive-hmc", "blackjax-nuts")
QUICK_CONFIG = BenchConfig(num_chains=4, num_warmup=200, num_samples=300)


def broad_targets() -> tuple[str, ...]:
    """The broad bench: every posteriordb posterior from its Stan program, ``stan-<name>``:
    the 22 the library ships (published reference draws) and the 26 the lab ships
    (`adaptmc_lab.datasets.posteriordb_extra`, references from two samplers that agree where
    they did)."""
    from adaptmc.datasets.posteriordb import default_posteriordb_dir
    from adaptmc_lab.datasets.posteriordb_extra import extra_posteriors

    shipped = sorted(p.name for p in default_posteriordb_dir().iterdir()
                     if (p / "model.stan").is_file())
    return tuple(f"stan-{name}" for name in (*shipped, *extra_posteriors()))


TARGET_SETS = {"broad": broad_targets}
"""Names ``--targets`` expands (`expand_targets`) into lists of targets."""


def expand_targets(names: list[str]) -> list[str]:
    """``names`` with every name of `TARGET_SETS` replaced by its targets."""
    return [t for name in names
            for t in (TARGET_SETS[name]() if name in TARGET_SETS else (name,))]

