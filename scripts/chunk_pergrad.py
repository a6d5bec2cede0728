"""Run seconds per gradient of the chunk programs (the warm-up's NUTS chunk and MAMS's) under
XLA's defaults and under `QUICK_CHUNK`, both compiled in this one process and called
alternately from the same states with the same keys (same work, so the same draws if the
options change no bit). Usage: python scripts/chunk_pergrad.py TARGET [rounds] [calls].

The default warm-up (`adaptmc.adaptation.early`, 4 chains, key 0, 200 steps) gives the
states, metric and step size; then ``rounds`` times: ``calls`` chunk calls per program
(NUTS: 10 transitions per chain each; MAMS: 50 transitions of 10 isokinetic steps each),
alternating which program goes first. Prints one JSON line per program: median CPU and wall
microseconds per gradient over the rounds, compile seconds (wall and CPU), and whether the
two programs' outputs were the same bits (else their largest difference)."""

import functools
import json
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402

from adaptmc.adaptation import early, warmup_programs  # noqa: E402
from adaptmc.adaptation.host_random import split  # noqa: E402
from adaptmc.adaptation.warmup_programs import chunk_program, padded  # noqa: E402
from adaptmc.kernels import mams_chunk  # noqa: E402
from adaptmc.run.plan import run_start  # noqa: E402
from adaptmc.targets import base  # noqa: E402
from adaptmc_lab.targets import get_target  # noqa: E402

base.COMPILE_AHEAD = False
OPTIONS = {"defaults": None, "quick": warmup_programs.QUICK_CHUNK}


def _forced(options, target, most=None):
    return options


def compile_both(target, make, args):
    """``{name: (compiled, wall s, CPU s)}`` for `OPTIONS`."""
    out = {}
    for name, options in OPTIONS.items():
        forced = functools.partial(_forced, options)
        warmup_programs.chunk_compiler_options = mams_chunk.chunk_compiler_options = forced
        lowered = make().lower(*args)
        tick, cpu = time.perf_counter(), time.process_time()
        compiled = lowered.compile()
        out[name] = (compiled, time.perf_counter() - tick, time.process_time() - cpu)
    return out


def alternate(programs, start, call, rounds, calls):
    """Per program the median CPU and wall us per gradient; whether outputs were equal."""
    times = {name: [] for name in programs}
    same, gap = True, 0.0
    for r in range(rounds):
        outs = {}
        for name in (list(programs) if r % 2 == 0 else list(programs)[::-1]):
            state, grads, last = start, 0, None
            tick, cpu = time.perf_counter(), time.process_time()
            for i in range(calls):
                state, g, last = call(programs[name][0], state, i)
                grads += g
            times[name].append((1e6 * (time.process_time() - cpu) / grads,
                                1e6 * (time.perf_counter() - tick) / grads))
            outs[name] = last
        first, *others = outs.values()
        same &= all(np.array_equal(first, o) for o in others)
        gap = max([gap] + [float(np.max(np.abs(first - o))) for o in others])
    return {name: np.median(np.array(t), axis=0) for name, t in times.items()}, (same, gap)


def main(name, rounds=5, calls=20):
    target = get_target(name)
    keys, starts = run_start(0, target.initial_position, 4, 0.5)
    run = early.start_chains(target, np.asarray(starts), keys["warmup"], num_steps=200,
                             progress=False)
    while not run.done():
        run.advance()
        run.adapt()
    chains, dim = run.state.position.shape
    nuts = compile_both(target, lambda: chunk_program(target, 0.8),
                        (run._rows(split(run.key, 4)[1]),))

    def nuts_call(program, state, i):
        _, chain_keys = split(run.key, chains, i)
        state, _, out = program((chain_keys, state, run.da, padded(run.metric, run.rank),
                                 np.zeros(chains)))
        return state, int(np.sum(out[3])), np.asarray(out[0])

    step = float(np.exp(np.mean(run.da.log_step_size_avg)))
    metric = mams_chunk.as_padded(run.metric, dim, run.rank, run.state.position.dtype)
    packed = np.concatenate([run.state.position, run.state.logdensity_grad,
                             run.state.logdensity[:, None]], axis=1)
    real = np.float64

    def mams_args(state, i):
        _, chain_keys = split(run.key, chains, i)
        return (chain_keys, state, metric, np.asarray(mams_chunk.da_fixed(step), real),
                np.asarray([0.0, 0.0, 0.9], real), np.asarray([10, 0, 1, 50], np.int32))

    mams = compile_both(target, lambda: mams_chunk.chunk_program(target), mams_args(packed, 0))

    def mams_call(program, state, i):
        out = program(*mams_args(state, i))
        return np.asarray(out[0]), int(np.sum(np.asarray(out[4])[:, 0])), np.asarray(out[2])

    for kind, programs, start, call in (("nuts", nuts, run.state, nuts_call),
                                        ("mams", mams, packed, mams_call)):
        per_grad, same = alternate(programs, start, call, rounds, calls)
        for option, (_, wall, cpu) in programs.items():
            print(json.dumps({"target": name, "program": kind, "options": option,
                              "compile_s": round(wall, 3), "compile_cpu_s": round(cpu, 3),
                              "cpu_us_per_grad": round(float(per_grad[option][0]), 3),
                              "us_per_grad": round(float(per_grad[option][1]), 3),
                              "same_bits": bool(same[0]), "max_gap": same[1]}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:]))
