"""Cost per gradient of fixed-length HMC under a diagonal, a low-rank-plus-diagonal and a
dense metric (issue 12): the same kernel, target, step size and trajectory length, only the
metric differs, so the difference is the metric's ``O(dim)``, ``O(dim k)`` or ``O(dim^2)``
work per leapfrog step next to one gradient.

The target is a diagonal Gaussian (its gradient costs ``O(dim)``, so the metric's own cost
shows), and, for comparison, a dense one (gradient ``O(dim^2)``). Every run is ``jit`` of a
``lax.scan`` of `adaptmc.kernels.hmc` steps vmapped over chains, float64, compiled first and
timed as the median of repeats taken in turn (metric after metric within each repeat); the
figure is microseconds per gradient evaluation (per chain).

    PYTHONPATH=src python scripts/metric_cost.py [--dim 500] [--ranks 5 20 50]
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from adaptmc.adaptation.low_rank import LowRankInverseMass, low_rank_dense  # noqa: E402
from adaptmc.kernels import HMCParams, hmc  # noqa: E402
from adaptmc.targets import gaussian  # noqa: E402


def runner(target, params, chains: int, steps: int):
    def one_chain(key, position):
        state = hmc.init(position, target)

        def body(state, key):
            state, info = hmc.step(key, state, target, params)
            return state, info.acceptance_rate

        return jax.lax.scan(body, state, jax.random.split(key, steps))[1]

    fn = jax.jit(jax.vmap(one_chain))
    keys = jax.random.split(jax.random.key(0), chains)
    starts = jnp.zeros((chains, target.dim))
    compiled = fn.lower(keys, starts).compile()
    return lambda: compiled(keys, starts).block_until_ready()


def interleaved_medians(calls: dict, repeats: int) -> dict:
    """Median seconds of each call, timed in turn within every repeat, so that the load of a
    shared machine falls on every metric alike."""
    for call in calls.values():
        call()
    times = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            tick = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - tick)
    return {name: float(np.median(t)) for name, t in times.items()}


def metrics(dim: int, ranks, rng) -> dict:
    diag = np.exp(rng.uniform(-1, 1, dim))
    out = {"diag": jnp.asarray(diag)}
    for k in ranks:
        vectors = np.linalg.qr(rng.normal(size=(dim, k)))[0]
        low = LowRankInverseMass(diag, vectors, np.exp(rng.uniform(-2, 2, k)))
        out[f"low-rank k={k}"] = jax.tree.map(jnp.asarray, low)
    out["dense"] = jnp.asarray(low_rank_dense(low))  # the last low-rank matrix, in full
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dim", type=int, default=500)
    parser.add_argument("--ranks", type=int, nargs="+", default=[5, 20, 50])
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--leapfrog", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    dim = args.dim
    cov = np.exp(rng.uniform(-1, 1, dim))
    a = rng.normal(size=(dim, dim)) / np.sqrt(dim)
    targets = {"diagonal Gaussian (gradient O(d))": gaussian(np.zeros(dim), cov),
               "dense Gaussian (gradient O(d^2))": gaussian(np.zeros(dim), a @ a.T
                                                           + np.eye(dim))}
    grads = args.chains * args.steps * args.leapfrog
    print(f"load: {os.getloadavg()}; devices: {jax.devices()}; dim {dim}, {args.chains} "
          f"chains x {args.steps} steps x L={args.leapfrog}")
    for label, target in targets.items():
        calls = {name: runner(target, HMCParams(step_size=1e-3, num_leapfrog=args.leapfrog,
                                                inverse_mass=inverse_mass),
                              args.chains, args.steps)
                 for name, inverse_mass in metrics(dim, args.ranks, rng).items()}
        medians = interleaved_medians(calls, args.repeats)
        for name, seconds in medians.items():
            ratio = seconds / medians["diag"]
            print(f"{label:36s} {name:16s} {1e6 * seconds / grads:9.3f} us/grad  "
                  f"{ratio:6.2f}x diag")
    print(f"load at the end: {os.getloadavg()}")

if __name__ == "__main__":
    main()
