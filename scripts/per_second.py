"""One bench cell in this process, timed as a user waits: robust ESS per second.

``python scripts/per_second.py TARGET SAMPLER [SEED]`` runs the bench's ``SAMPLER``
(`adaptmc_lab.bench.samplers.SAMPLERS`, the bench's sizes: 4 chains, 500 warm-up, 1000
draws) on ``TARGET`` once, with JAX's persistent compile cache on
(`adaptmc.compile_cache.use_compile_cache`: ``$ADAPTMC_COMPILE_CACHE``), and prints one JSON
line: seconds from the call to the summary (draws, then the robust min ESS: min over
parameters of bulk-ESS x, bulk-ESS x^2, tail-ESS x), seconds since the process started
(imports included), the sampler's compile seconds, gradients and robust ESS per second.
Run it in a fresh process per cell, once with empty cache folders (cold) and once more
(warm): ``docs/notes/compile.md`` has the loop. In float64, as ``adaptmc sample`` runs
by default and the bench scores (before 2026-11-28 it ran in JAX's default float32, and a
Stan program then went through the host callback instead of the FFI). ``TARGET`` is any bench target
(`adaptmc_lab.targets.get_target`): a built-in, or ``stan-<posterior>`` for a posteriordb
Stan program through adaptmc's Stan library (its build cached per machine, not timed here).
"""

from __future__ import annotations

import json
import sys
import time

START = time.perf_counter()


def main(target_name: str, sampler: str, seed: int = 1) -> dict:
    import arviz  # noqa: F401  (a user's script has it; adaptmc imports it at the first write)
    import jax

    from adaptmc.compile_cache import use_compile_cache
    from adaptmc.diagnostics import robust_ess
    from adaptmc_lab.bench.config import BenchConfig
    from adaptmc_lab.bench.samplers import SAMPLERS
    from adaptmc_lab.targets import get_target

    jax.config.update("jax_enable_x64", True)  # as `adaptmc sample` and the bench run
    use_compile_cache()
    target = get_target(target_name)
    tick = time.perf_counter()
    out = SAMPLERS[sampler](target, seed, BenchConfig())
    ess = float(robust_ess(out.positions).min())
    call_s = time.perf_counter() - tick
    return {"target": target_name, "sampler": sampler, "seed": seed,
            "call_s": round(call_s, 2), "process_s": round(time.perf_counter() - START, 2),
            "compile_s": round(float(out.compile_s), 2), "ess": round(ess, 1),
            "ess_per_s": round(ess / call_s, 1),
            "grads": int(out.warmup_grads + out.sampling_grads),
            **{f"programs_{k}": v for k, v in (out.programs or {}).items()}}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], *map(int, sys.argv[3:]))), flush=True)
