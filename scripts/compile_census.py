"""Every XLA compilation of one call of the README's recipe, with its seconds.

Wraps ``jax._src.compiler.backend_compile_and_load`` (the one place JAX hands a module to
XLA) and runs the bench's adaptive-hmc cell once per target (4 chains, the bench's sizes,
seed 1, no compile cache), printing the count, the total seconds of XLA compilation, and
the largest programs by name. Tracing and lowering are not included (the run's own
``compile_s`` holds them for the two main programs, not for the small ones).

Usage: ``python scripts/compile_census.py std-normal-10d logistic-german``
"""

from __future__ import annotations

import sys
import time

import jax._src.compiler as jax_compiler

from adaptmc.targets import get_target
from adaptmc_lab.bench.config import BenchConfig
from adaptmc_lab.bench.samplers import recipe_sampler

SHOWN = 6


def census(target_name: str) -> tuple[list[tuple[float, str]], float, float]:
    """``([(seconds, program name)], call-to-draws seconds, the run's compile_s)`` of one
    adaptive-hmc cell."""
    log = []
    original = jax_compiler.backend_compile_and_load

    def timed(backend, module, *args, **kwargs):
        tick = time.perf_counter()
        out = original(backend, module, *args, **kwargs)
        log.append((time.perf_counter() - tick,
                    str(module.operation.attributes["sym_name"]).strip('"')))
        return out

    jax_compiler.backend_compile_and_load = timed
    try:
        output = recipe_sampler("adaptmc-adaptive-hmc")(get_target(target_name), 1,
                                                        BenchConfig())
    finally:
        jax_compiler.backend_compile_and_load = original
    return sorted(log, reverse=True), output.wall_s + output.compile_s, output.compile_s


def main(targets: list[str]) -> None:
    print("| target | XLA compilations | XLA compile s | run's compile_s | call to draws s "
          "| largest (s) |")
    print("|---|---|---|---|---|---|")
    for name in targets:
        log, wall, compile_s = census(name)
        largest = ", ".join(f"{program} {seconds:.2f}" for seconds, program in log[:SHOWN])
        print(f"| {name} | {len(log)} | {sum(s for s, _ in log):.2f} | {compile_s:.2f} "
              f"| {wall:.2f} "
              f"| {largest} |")


if __name__ == "__main__":
    main(sys.argv[1:] or ["std-normal-10d"])
