"""Run time per leapfrog step of the warm-up's chunk program, BlackJAX's NUTS against the
compact one (`scripts/cnuts_compile.py`'s programs), in one process, calls alternating, so
that both see the same load. Usage: python scripts/cnuts_runtime.py TARGET [calls]."""

import sys
import time

import jax
import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cnuts_compile import program, rows  # noqa: E402 - a script beside this one


def main(name, calls):
    from adaptmc_lab.targets import get_target

    target = get_target(name)
    programs = {w: program(target, w) for w in ("blackjax", "wired")}
    args = {w: rows(target) for w in programs}
    spent = {w: [0.0, 0] for w in programs}
    for i in range(calls + 1):
        for w, f in programs.items():
            keys = jax.random.split(jax.random.key(i + 1), args[w][0].shape[0])
            tick = time.perf_counter()
            out = jax.block_until_ready(f((keys, *args[w][1:])))
            if i:  # the first call compiles
                spent[w][0] += time.perf_counter() - tick
                spent[w][1] += int(np.sum(out[2][3]))
            args[w] = (keys, type(args[w][1])(*out[0]), out[1], *args[w][3:])
    for w, (seconds, steps) in spent.items():
        print(f"{name} {w}: {seconds / steps * 1e6:.2f} us per leapfrog step "
              f"({steps} steps, {seconds:.2f} s)")


main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
