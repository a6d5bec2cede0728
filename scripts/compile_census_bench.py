"""Compile census of one bench call (`adaptmc-lab bench`'s SAMPLERS) in a fresh process:
usage: python scripts/compile_census_bench.py TARGET SAMPLER; the cache folder from
$ADAPTMC_COMPILE_CACHE (empty: cold; filled: warm). Prints the call's seconds, its compile
seconds and JAX's events per program (trace, lower, compile)."""
import sys
import time
from collections import defaultdict

import jax

from adaptmc.compile_cache import use_compile_cache
from adaptmc.run import compile_clock as cc
from adaptmc_lab.bench.config import BenchConfig
from adaptmc_lab.bench.samplers import SAMPLERS
from adaptmc_lab.targets import get_target

jax.config.update("jax_enable_x64", True)

use_compile_cache()
cc._listen()
t = get_target(sys.argv[1])
n0 = len(cc._EVENTS)
tick, cpu = time.perf_counter(), time.process_time()
out = SAMPLERS[sys.argv[2]](t, 1, BenchConfig())
print("call", round(time.perf_counter()-tick,2), "compile", round(float(out.compile_s),2),
      "cpu", round(time.process_time()-cpu,2))
agg = defaultdict(lambda: defaultdict(float))
for ph, name, s in cc._EVENTS[n0:]:
    agg[name][ph] += s
for name, d in sorted(agg.items(), key=lambda kv: -sum(kv[1].values()))[:15]:
    print(f"{name[:40]:40s}", {k: round(v,3) for k,v in d.items()})
print("total", round(sum(s for _,_,s in cc._EVENTS[n0:]),2))
