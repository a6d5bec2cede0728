"""Wall time per gradient of one MAMS step (n = 1) against one HMC leapfrog step (L = 1) on
pdb-diamonds-diamonds, dense and diagonal metrics, 4 chains x 5000 steps, min of 5 repeats
(docs/notes/mams.md).

    PYTHONPATH=src python scripts/mams_speed.py
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

from adaptmc.kernels import HMCParams, MAMSParams, hmc, mams
from adaptmc_lab.targets import get_target


def runner(target, kernel, params, num_steps: int):
    """``(keys, starts) -> gradients``: ``num_steps`` steps per chain (the positions feed
    the output, so nothing is compiled away)."""
    def chain(key, x):
        def body(state, k):
            state, info = kernel.step(k, state, target, params)
            return state, info.num_grads

        end, grads = jax.lax.scan(body, kernel.init(x, target), jax.random.split(key, num_steps))
        return grads.sum() + 0 * end.position.sum().astype(jnp.int32)

    return jax.jit(jax.vmap(chain))


def main() -> None:
    jax.config.update("jax_enable_x64", True)
    target = get_target("pdb-diamonds-diamonds")
    cov = jnp.eye(target.dim) * 0.01 + 0.001
    cases = {
        "mams n1 dense": (mams, MAMSParams(0.05, 1, inverse_mass=cov)),
        "hmc L1 dense": (hmc, HMCParams(0.01, 1, inverse_mass=cov)),
        "mams n1 diag": (mams, MAMSParams(0.05, 1, inverse_mass=jnp.diag(cov))),
        "hmc L1 diag": (hmc, HMCParams(0.01, 1, inverse_mass=jnp.diag(cov))),
    }
    programs = {name: runner(target, *case, 5000) for name, case in cases.items()}
    keys = jax.random.split(jax.random.key(0), 4)
    starts = jnp.tile(target.initial_position, (4, 1))
    for program in programs.values():
        program(keys, starts).block_until_ready()
    times = {name: [] for name in programs}
    for _ in range(5):  # interleaved, so load changes hit every case alike
        for name, program in programs.items():
            tick = time.perf_counter()
            grads = program(keys, starts).block_until_ready()
            times[name].append((time.perf_counter() - tick) / float(grads.sum()) * 1e6)
    for name, values in times.items():
        print(f"{name}: {min(values):.1f} us per gradient (min of 5; "
              f"{', '.join(f'{v:.1f}' for v in values)})")


if __name__ == "__main__":
    main()
