"""XLA compiler options for the warm-up's NUTS chunk program: compile seconds against run
seconds per gradient. Usage: python scripts/chunk_options.py TARGET '{"option": value}'
[num_steps]; one fresh process per measurement, no compile cache. Runs the default warm-up
(`adaptmc.adaptation.early`, 4 chains, key 0, from the target's start jittered by seed 0)
with the chunk program compiled under the options (``Lowered.compile(compiler_options=)``),
and prints compile seconds (wall and the process's CPU), warm-up seconds, gradients and
microseconds per gradient (wall and CPU)."""

import json
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402

from adaptmc.adaptation import early, warmup_programs  # noqa: E402
from adaptmc.adaptation.host_random import split  # noqa: E402
from adaptmc.adaptation.warmup_programs import chunk_key, chunk_program  # noqa: E402
from adaptmc.run.plan import run_start  # noqa: E402
from adaptmc.targets import base  # noqa: E402
from adaptmc_lab.targets import get_target  # noqa: E402

base.COMPILE_AHEAD = False
warmup_programs.chunk_compiler_options = lambda target, most=None: None  # then the options here
target = get_target(sys.argv[1])
options = json.loads(sys.argv[2])
num_steps = int(sys.argv[3]) if len(sys.argv) > 3 else 500
keys, starts = run_start(0, target.initial_position, 4, 0.5)
run = early.start_chains(target, np.asarray(starts), keys["warmup"], num_steps=num_steps,
                         progress=False)
tick = time.perf_counter()
lowered = chunk_program(target, 0.8).lower(run._rows(split(run.key, 4)[1]))
lowered_s = time.perf_counter() - tick
tick, cpu = time.perf_counter(), time.process_time()
target.programs[chunk_key(0.8, run.rank)] = lowered.compile(compiler_options=options or None)
compile_s, compile_cpu_s = time.perf_counter() - tick, time.process_time() - cpu
grads0, tick, cpu = run.num_grads, time.perf_counter(), time.process_time()
while not run.done():
    run.advance()
    run.adapt()
run_s, run_cpu_s = time.perf_counter() - tick, time.process_time() - cpu
grads = run.num_grads - grads0
print(json.dumps({"target": sys.argv[1], "options": options, "lower_s": round(lowered_s, 3),
                  "compile_s": round(compile_s, 3), "compile_cpu_s": round(compile_cpu_s, 3),
                  "run_s": round(run_s, 3), "grads": grads,
                  "us_per_grad": round(1e6 * run_s / grads, 2),
                  "cpu_us_per_grad": round(1e6 * run_cpu_s / grads, 2)}))
