"""The cost of one Stan gradient: called directly, through adaptmc's FFI, through a host
callback; and the build time of a Stan program.

Per posterior (default: eight schools, arK, earnings), at 4 points (4 chains) near the
target's initial point:

- ``direct``: the C interface in its own C++ loop (one ctypes call over ``4 x reps`` rows),
- ``ffi``: what a sampler runs, ``jit(scan(vmap(value_and_grad)))`` over ``reps`` steps,
  each step moving the 4 points by 1e-9 tanh(gradient) (so nothing is hoisted
  out of the loop), the model called through XLA's FFI,
- ``callback``: the same program with the former ``jax.pure_callback`` path,

- ``ctypes_batch``: the C interface called from Python once per batch of 4 (what the
  former BENCHMARKS table called "Stan direct"),

each the best of ``--repeats`` timings, in CPU microseconds per gradient (per point; wall in
``*_wall_us``). The FFI's counter is checked against the gradients the program evaluates.

    PYTHONPATH=src python scripts/stan_gradient_cost.py --out docs/notes/stan_ffi.jsonl
    ADAPTMC_CACHE=/tmp/fresh PYTHONPATH=src python scripts/stan_gradient_cost.py \
        --build arK-arK earnings-earn_height    # build seconds: first ever, then a new one
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from adaptmc.datasets.posteriordb import default_posteriordb_dir  # noqa: E402
from adaptmc.targets.stan import stan_target  # noqa: E402
from adaptmc.targets.stan.ffi import evaluations  # noqa: E402
from adaptmc.targets.stan.target import callback_logdensity  # noqa: E402

POSTERIORS = ("eight_schools-eight_schools_noncentered", "arK-arK", "earnings-earn_height")
CHAINS = 4


def best_seconds(function, repeats: int) -> tuple[float, float]:
    """The least wall seconds and the least CPU seconds of this process (every thread) of
    ``repeats`` calls of ``function``, after one warm call. On a loaded machine the CPU
    seconds are the measure: the wall clock also counts the time other processes run."""
    jax.block_until_ready(function())
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        jax.block_until_ready(function())
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return min(wall), min(cpu)


def sampler_loop(logdensity, reps: int):
    """``points: (chains, dim) -> points`` after ``reps`` gradient steps of 1e-9."""
    grad = jax.vmap(jax.value_and_grad(logdensity))

    def step(points, _):
        value, g = grad(points)
        return points + 1e-9 * jnp.tanh(g) + 0.0 * value[:, None], None

    return jax.jit(lambda points: jax.lax.scan(step, points, None, length=reps)[0])


def costs(name: str, reps: int, repeats: int) -> dict:
    """Microseconds per gradient (CPU, and wall as ``*_wall_us``) of the ways to call
    Stan, at ``CHAINS`` points for ``reps`` steps."""
    folder = default_posteriordb_dir() / name
    target = stan_target(folder / "model.stan", folder / "data.json.zip",
                         generated_quantities=False)
    model = target.info["stan_model"]
    rng = np.random.default_rng(0)
    points = np.asarray(target.initial_position) + rng.uniform(-0.5, 0.5, (CHAINS, target.dim))
    rows = np.ascontiguousarray(np.tile(points, (reps, 1)))
    ffi_loop, callback_loop = (sampler_loop(f, reps) for f in
                               (target.logdensity, callback_logdensity(model)))
    start = jnp.asarray(points)
    before = evaluations(model)["gradients"]
    timed = {"direct": best_seconds(lambda: model.log_density_gradient(rows)[0], repeats),
             "ctypes_batch": best_seconds(
                 lambda: [model.log_density_gradient(points) for _ in range(reps)], repeats),
             "ffi": best_seconds(lambda: ffi_loop(start), repeats),
             "callback": best_seconds(lambda: callback_loop(start), repeats)}
    counted = evaluations(model)["gradients"] - before
    assert counted == CHAINS * reps * (repeats + 1), counted  # the FFI loop's, all counted
    row = {"posterior": name, "dim": target.dim, "reps": reps, "chains": CHAINS}
    for way, (wall, cpu) in timed.items():
        row[f"{way}_us"] = cpu / (CHAINS * reps) * 1e6
        row[f"{way}_wall_us"] = wall / (CHAINS * reps) * 1e6
    row["ffi_over_direct"] = row["ffi_us"] / row["direct_us"]
    row["callback_over_direct"] = row["callback_us"] / row["direct_us"]
    return row


def build_seconds(name: str) -> dict:
    """Wall and CPU seconds (this process and the compilers) of building ``name``'s
    program (`build_model`; nothing if cached)."""
    import resource

    from adaptmc.targets.stan.build import build_model

    def cpu():
        own, children = (resource.getrusage(who) for who in
                         (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    start, start_cpu = time.perf_counter(), cpu()
    build_model(default_posteriordb_dir() / name / "model.stan")
    return {"posterior": name, "build_wall_s": time.perf_counter() - start,
            "build_cpu_s": cpu() - start_cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("posteriors", nargs="*", default=list(POSTERIORS))
    parser.add_argument("--reps", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--build", action="store_true",
                        help="only build the posteriors' programs, printing wall and CPU s")
    args = parser.parse_args()
    if args.build:
        for name in args.posteriors:
            print(json.dumps(build_seconds(name)), flush=True)
        return
    for name in args.posteriors:
        row = costs(name, args.reps, args.repeats)
        print(json.dumps(row), flush=True)
        if args.out is not None:
            with open(args.out, "a") as out:
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
