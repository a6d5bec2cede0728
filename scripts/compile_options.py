"""Cold compile and call-to-draws time of the README's recipe with per-program XLA options.

Usage: ``python scripts/compile_options.py TARGET VARIANT`` (VARIANT: a key of `VARIANTS`);
prints one JSON line. The window warm-up's NUTS program ("warm") and the super-transition
loop ("loop") are compiled with ``Lowered.compile(compiler_options=...)``, the options of
the phase that compiles them; no compilation cache. BENCHMARKS.md, wave six.
"""

import json
import sys
import time

import jax
from jax._src import stages

import adaptmc
import adaptmc.adaptation.window as window
import adaptmc.run.loop as loop
from adaptmc import diagnostics
from adaptmc.targets import get_target

jax.config.update("jax_enable_x64", True)

O0, O1 = {"xla_backend_optimization_level": 0}, {"xla_backend_optimization_level": 1}
VARIANTS = {  # (warm-up program's options, loop program's options)
    "base": ({}, {}),
    "all-O1": (O1, O1),
    "warm-O0": (O0, {}),
    "all-O0": (O0, O0),
    "warm-O0-loop-O1": (O0, O1),
}
PHASE = {"options": None}
COMPILE_S = []


def _compile(original):
    def compile_(self, compiler_options=None, **kwargs):
        tick = time.perf_counter()
        out = original(self, compiler_options=PHASE["options"] or None, **kwargs)
        COMPILE_S.append(round(time.perf_counter() - tick, 2))
        return out
    return compile_


def _in_phase(function, options):
    def wrapped(*args, **kwargs):
        PHASE["options"] = options
        try:
            return function(*args, **kwargs)
        finally:
            PHASE["options"] = None
    return wrapped


def main(target_name: str, variant: str) -> dict:
    warm_options, loop_options = VARIANTS[variant]
    stages.Lowered.compile = _compile(stages.Lowered.compile)
    window._stage = _in_phase(window._stage, warm_options)
    loop.SuperTransitionLoop.__call__ = _in_phase(loop.SuperTransitionLoop.__call__,
                                                  loop_options)
    target = get_target(target_name)
    tick = time.perf_counter()
    idata = adaptmc.sample(target, chains=4, seed=0, progress=False)
    wall = time.perf_counter() - tick
    warm = json.loads(idata.attrs["warmup"])
    ess = float(diagnostics.robust_ess(idata.posterior["x"].values).min()) \
        if "x" in idata.posterior else float("nan")
    return {"target": target_name, "variant": variant, "compiles_s": COMPILE_S,
            "warmup_run_s": round(warm["wall_s"] - warm["compile_s"], 2),
            "run_compile_s": round(float(idata.attrs["compile_s"]), 2),
            "call_to_draws_s": round(wall, 2), "robust_min_ess_per_s": round(ess / wall, 1)}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
