"""Compile census of one bench call (`adaptmc-lab bench`'s SAMPLERS) in a fresh process:
usage: python scripts/compile_census_bench.py TARGET SAMPLER; the cache folder from
$ADAPTMC_COMPILE_CACHE (empty: cold; filled: warm). Prints the call's seconds, its compile
seconds and CPU seconds, then each program's trace, lower and compile seconds
(`adaptmc.run.compile_clock.census`, every compile event of the call, all threads).
`scripts/run_census.py` is the same for `adaptmc.sample` without a compile cache."""

import sys
import time
from collections import defaultdict

import jax

from adaptmc.compile_cache import use_compile_cache
from adaptmc.run import compile_clock
from adaptmc_lab.bench.config import BenchConfig
from adaptmc_lab.bench.samplers import SAMPLERS
from adaptmc_lab.targets import get_target

jax.config.update("jax_enable_x64", True)
use_compile_cache()
target = get_target(sys.argv[1])
since = compile_clock.compile_events()
tick, cpu = time.perf_counter(), time.process_time()
out = SAMPLERS[sys.argv[2]](target, 1, BenchConfig())
print("call", round(time.perf_counter() - tick, 2), "compile", round(float(out.compile_s), 2),
      "cpu", round(time.process_time() - cpu, 2))
by_name = defaultdict(lambda: defaultdict(float))
for program in compile_clock.census(since):
    for phase in ("trace_s", "lower_s", "compile_s"):
        by_name[program["name"]][phase] += program[phase]
for name, d in sorted(by_name.items(), key=lambda kv: -sum(kv[1].values()))[:15]:
    print(f"{name[:40]:40s}", {k: round(v, 3) for k, v in d.items()})
print("total", round(sum(sum(d.values()) for d in by_name.values()), 2))
