"""Cost of one MSD iteration on the robot-arm network (issue 16): where the wall time goes.

Zlochin & Baram's robot-arm network (`adaptmc_lab.models.metric_models.robot_arm_bnn_target`,
seed 0, ``2 -> 8 tanh -> 2``, beta 400, alpha 1, Gauss-Newton metric) from the starts of
`adaptmc reproduce manifold` (`adam_starts`). Two parts:

- ``--micro``: the compiled pieces on one chain (medians of repeats): a log-density
  gradient, ``G``, `metric_terms` (``G`` with its Cholesky factor, inverse and log-det
  pullback), ``G`` with one pullback (a momentum iteration without the Gauss-Newton
  quadratic force), one position iteration (``G``, Cholesky, solve), the Gauss-Newton
  quadratic force by forward-over-reverse (``beta d/dq |J(q) v|^2 / 2``), one generalised
  leapfrog step;
- chains: ``--iterations`` MSD iterations (persistence cos(theta) = 0.95, M-H, exact H,
  fixed points <= ``--max-iterations`` at ``--tolerance``) for each Anderson ``--memory``
  and step size, with ``--chains`` chains vmapped (as `reproduce manifold` runs them), one
  chain alone, and the chains one after another (``lax.map``): ms per iteration, gradient-
  equivalents per iteration (mean over chains, and the mean over iterations of the maximum
  over chains, which is what a vmapped while-loop runs), divergences, acceptance,
  mean |dH|; HMC30 (eps 0.0002) vmapped for reference. Wall and CPU (process) times are
  the minimum of three runs: the machine is shared and loaded.

    PYTHONPATH=src python scripts/msd_profile.py [--micro] [--memory 0 3] [--eps 0.01 0.02]
"""

from __future__ import annotations

import argparse
import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from adaptmc.kernels import HMCParams, MSDParams, hmc, msd_kernel  # noqa: E402
from adaptmc.kernels.integrators import (  # noqa: E402
    IntegratorState,
    _materialised,
    generalized_leapfrog,
    metric_terms,
)
from adaptmc_lab.experiments.manifold import adam_starts  # noqa: E402
from adaptmc_lab.models.metric_models import robot_arm_bnn_target  # noqa: E402

PERSISTENCE = math.acos(0.95)
REPEATS = 3  # chain runs timed per setting: the minimum wall and CPU time are reported


def _median_ms(fn, *args, repeats=30):
    """Median wall ms and median CPU (process) ms of ``repeats`` calls: on the shared,
    loaded machine the CPU time is the steadier figure."""
    jax.block_until_ready(fn(*args))
    walls, cpus = [], []
    for _ in range(repeats):
        tick, cpu = time.perf_counter(), time.process_time()
        jax.block_until_ready(fn(*args))
        walls.append(time.perf_counter() - tick)
        cpus.append(time.process_time() - cpu)
    wall, cpu = 1e3 * float(np.median(walls)), 1e3 * float(np.median(cpus))
    return f"{wall:8.3f} ms wall {cpu:8.3f} ms cpu"


def micro(target, q, memory):
    metric = target.info["metric"]
    key = jax.random.key(0)
    v = jax.random.normal(key, q.shape)
    cot = jnp.outer(v, v)
    rows = {
        "log-density gradient": (jax.jit(target.logdensity_and_grad), q),
        "G": (jax.jit(metric.matrix), q),
        "metric_terms (G, Cholesky, inverse, log-det pullback)": (jax.jit(
            lambda x: [a for a in metric_terms(metric, x) if a is not None and not callable(a)]),
            q),
        "G + vjp pullback (no Cholesky)": (jax.jit(
            lambda x, c: jax.vjp(metric.matrix, x)[1](c)[0]), q, cot),
        "position iteration (G, Cholesky, solve)": (jax.jit(
            lambda x, p: jax.scipy.linalg.cho_solve(
                (jnp.linalg.cholesky(_materialised(metric.matrix(x))), True), p)), q, v),
    }
    quadratic = getattr(metric, "quadratic_gradient", None)  # absent before wave four
    if quadratic is not None:
        rows["Gauss-Newton quadratic force (jvp + vjp)"] = (jax.jit(quadratic), q, v)
    for name, (fn, *args) in rows.items():
        print(f"  {name:52s} {_median_ms(fn, *args)}", flush=True)
    p = metric_terms(metric, q).chol @ v
    for mem in memory:
        def step(x, mom, mem=mem):
            logdensity, grad = target.logdensity_and_grad(x)
            state = IntegratorState(x, mom, logdensity, grad)
            options = {"memory": mem} if mem else {}
            end, _, info = generalized_leapfrog(
                state, 0.01, target.logdensity_and_grad, metric, metric_terms(metric, x),
                max_iterations=100, tolerance=1e-6, **options)
            return end.position, info.num_grads

        fn = jax.jit(step)
        grads = float(fn(q, p)[1])
        print(f"  {'one GL step (with start terms) eps 0.01, mem ' + str(mem):52s} "
              f"{_median_ms(fn, q, p)} ({grads:.0f} grad-eq)", flush=True)


def chains_fn(kernel, target, num_iterations, layout):
    def chain(key, start, params):
        def body(state, k):
            state, info = kernel.step(k, state, target, params)
            return state, (info.num_grads, info.energy_error, info.accepted,
                           info.is_divergent)

        return jax.lax.scan(body, kernel.init(start, target),
                            jax.random.split(key, num_iterations))[1]

    if layout == "map":
        return jax.jit(lambda keys, starts, params: jax.lax.map(
            lambda ks: chain(ks[0], ks[1], params), (keys, starts)))
    return jax.jit(jax.vmap(chain, in_axes=(0, 0, None)))


def run_chains(kernel, target, keys, starts, params, num_iterations, layout, cache=None):
    cache = {} if cache is None else cache
    if layout not in cache:
        fn = chains_fn(kernel, target, num_iterations, layout)
        cache[layout] = fn.lower(keys, starts, params).compile()
    compiled = cache[layout]
    walls, cpus = [], []
    for _ in range(REPEATS):
        tick, cpu = time.perf_counter(), time.process_time()
        out = jax.block_until_ready(compiled(keys, starts, params))
        walls.append(time.perf_counter() - tick)
        cpus.append(time.process_time() - cpu)
    grads, energy, accepted, divergent = (np.asarray(a) for a in out)
    finite = np.where(np.isfinite(energy), np.abs(energy), np.nan)
    return {"ms_per_iteration": 1e3 * min(walls) / num_iterations,
            "cpu_ms_per_iteration": 1e3 * min(cpus) / num_iterations,
            "grad_eq": float(grads.mean()), "grad_eq_max_over_chains":
            float(grads.max(axis=0).mean()), "divergent": float(divergent.mean()),
            "accepted": float(accepted.mean()), "abs_dH": float(np.nanmean(finite))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--micro", action="store_true")
    parser.add_argument("--memory", type=int, nargs="+", default=[0, 3])
    parser.add_argument("--eps", type=float, nargs="+", default=[0.01, 0.02])
    parser.add_argument("--chains", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--max-iterations", type=int, default=100)
    parser.add_argument("--tolerance", type=float, default=1e-6)
    parser.add_argument("--layouts", nargs="+", default=["vmap", "single", "map"])
    parser.add_argument("--hmc", action="store_true", help="HMC30 vmapped for reference")
    args = parser.parse_args()
    print(f"load: {os.getloadavg()}", flush=True)
    target = robot_arm_bnn_target(0)
    starts = adam_starts(target, args.chains, 0)
    keys = jax.random.split(jax.random.key(2), args.chains)
    if args.micro:
        print("micro-benchmarks (one chain, medians):")
        micro(target, starts[0], args.memory)
    if args.hmc:
        params = HMCParams(step_size=0.0002, num_leapfrog=30, refresh_angle=PERSISTENCE)
        row = run_chains(hmc, target, keys, starts, params, args.iterations, "vmap")
        print(f"HMC30 vmapped x{args.chains}: {row}", flush=True)
    for memory in args.memory:
        options = {"memory": memory} if memory else {}  # runs on the pre-wave-four code too
        kernel = msd_kernel(target.info["metric"], **options)
        cache = {}
        for eps in args.eps:
            params = MSDParams(step_size=eps, refresh_angle=PERSISTENCE,
                               max_iterations=args.max_iterations, tolerance=args.tolerance)
            for layout in args.layouts:
                sub = (keys[:1], starts[:1]) if layout == "single" else (keys, starts)
                row = run_chains(kernel, target, *sub, params, args.iterations, layout, cache)
                print(f"MSD memory {memory} eps {eps} {layout}: "
                      + ", ".join(f"{k} {v:.3g}" for k, v in row.items()), flush=True)
    print(f"load: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
