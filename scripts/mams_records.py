"""The ``--mams on`` run record of bench cells, without their sampling: for each target and
seed index, the bench row ``adaptmc-mams``'s warm-up and MAMS tuning (same seed, starts,
warm-up and draws as the bench's cell, so the same step, trajectory length, ``r1`` and
``k``), stopped before its first kept draw; prints the record's ``sampler`` as JSON.

    PYTHONPATH=src python scripts/mams_records.py stan-garch-garch11,stan-arK-arK 0,1
"""

from __future__ import annotations

import json
import sys

import jax

from adaptmc.api import run_plan
from adaptmc.recipes import build, mams_sampling
from adaptmc_lab.bench.config import BenchConfig, cell_seed
from adaptmc_lab.targets import get_target


class Tuned(Exception):
    """Raised with the record once MAMS is tuned: the run stops there."""


def record_of(name: str, seed_index: int) -> dict:
    target, config = get_target(name), BenchConfig()
    seed = cell_seed(name, seed_index)
    original = mams_sampling.mams_prepared

    def prepared(*args, **kwargs):
        raise Tuned(original(*args, **kwargs).record["sampler"])

    mams_sampling.mams_prepared = prepared
    try:
        plan = build("adaptive-hmc", target, seed=seed, warmup_steps=config.num_warmup,
                     draws=config.num_samples, mams="on")
        run_plan(target, plan, chains=config.num_chains, seed=seed,
                 init_jitter=config.init_jitter, progress=False)
    except Tuned as tuned:
        return tuned.args[0]
    finally:
        mams_sampling.mams_prepared = original
    raise RuntimeError("the run finished without tuning MAMS")


def main(names: str, seeds: str) -> None:
    jax.config.update("jax_enable_x64", True)  # as the bench's cells
    for name in names.split(","):
        for seed_index in (int(s) for s in seeds.split(",")):
            print(json.dumps({"target": name, "seed": seed_index,
                              **record_of(name, seed_index)}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
