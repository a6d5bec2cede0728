"""Every program one default ``adaptmc.sample`` call compiles, from JAX's compile events.

``python scripts/run_census.py TARGET [SEED]`` runs ``adaptmc.sample(TARGET, chains=4,
seed=SEED, progress=False, compile_cache=False)`` in this process and prints the run
record's census (each program: trace, lower, backend-compile seconds, ``cached``), the
names of every backend compilation of the whole call (target construction and the
posterior's variables included) and a hash of the posterior draws (to compare the draws of
two commits bit for bit).
"""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np
from jax import monitoring

COMPILED: list[str] = []
monitoring.register_event_duration_secs_listener(
    lambda event, seconds, **kw: COMPILED.append(str(kw.get("fun_name")))
    if event == "/jax/core/compile/backend_compile_duration" else None)


def main(target: str, seed: int = 0) -> None:
    import adaptmc

    before = len(COMPILED)
    idata = adaptmc.sample(target, chains=4, seed=seed, progress=False, compile_cache=False)
    programs = json.loads(idata.attrs["compile_census"])
    for p in programs:
        print(f"{p['name']:24s} {p['trace_s']:.3f} {p['lower_s']:.3f} {p['compile_s']:.3f}"
              f"{'  cached' if p['cached'] else ''}")
    total = sum(p["trace_s"] + p["lower_s"] + p["compile_s"] for p in programs)
    print(f"run census: {sum(p['compile_s'] > 0 for p in programs)} programs, {total:.2f} s; "
          f"whole call: {len(COMPILED) - before} {COMPILED[before:]}")
    post = idata.posterior
    draws = np.concatenate([np.asarray(post[v]).reshape(*post[v].shape[:2], -1)
                            for v in post.data_vars], axis=-1)
    print("posterior sha256", hashlib.sha256(draws.tobytes()).hexdigest()[:16], draws.shape)


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:]))
