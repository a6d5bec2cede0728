"""Flips per second of the intra-cluster move (`adaptmc.kernels.discrete.saw`) at several
walk lengths: 4 chains vmapped, one super-transition of 20,000 flips per chain from uniform
states of ``S_n``, ``gamma = 0.3``, float64, after a compiling warm-up call.

Usage: ``python scripts/saw_speed.py ferromagnet-2d`` (or ``spin-glass-3d``, ``rbm``)
"""

from __future__ import annotations

import sys
import time

import jax
import jax.numpy as jnp

from adaptmc.kernels.discrete import saw
from adaptmc_lab.experiments import ising as ex
from adaptmc_lab.models import ising

jax.config.update("jax_enable_x64", True)


def main(name: str) -> None:
    target = ising.MODELS[name](seed=0)
    starts = jnp.asarray(ising.random_states(target.info["graph"], 4, 1))
    states = jax.vmap(lambda x: saw.init(x, target))(starts)
    segment = ex.Segment(target, saw, 20_000 // 2 + 1)
    for length in (1, 5, 20, 90):
        params = ex.saw_params(length, 0.3)
        segment(jax.random.key(0), states, params, 2_000)
        tick = time.perf_counter()
        _, _, flips, accept = segment(jax.random.key(1), states, params, 20_000)
        wall = time.perf_counter() - tick
        print(f"{name} L={length:3d} {flips.sum() / wall:9.0f} flips/s  acceptance {accept:.4f}")


if __name__ == "__main__":
    main(sys.argv[1])
