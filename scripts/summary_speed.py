"""Seconds to summarise a run's draws: adaptmc's table against ArviZ's estimators one
quantity at a time (what `adaptmc.diagnostics` called before `adaptmc.rank_diagnostics`).

``python scripts/summary_speed.py RUN_DIR [--repeats 3]`` reads ``RUN_DIR/draws.nc`` into
memory, then times, best of ``repeats``: `adaptmc.diagnostics.summary_table` on every
posterior quantity (bulk-, tail- and robust ESS, R-hat; NumPy threads as the run uses them),
the same with one thread, and ArviZ 0.23's ``ess`` (bulk, tail, bulk of x^2) and ``rhat``
per quantity, with Numba off as adaptmc runs them; and checks the numbers agree. Prints one
JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np


def _best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(run_dir: str, repeats: int) -> dict:
    from adaptmc import rank_diagnostics
    from adaptmc.arviz_quiet import az, numpy_only
    from adaptmc.diagnostics import posterior_array, summary_table
    from adaptmc.run.netcdf import read_draws

    draws, names = posterior_array(read_draws(run_dir))

    def arviz_table():
        with warnings.catch_warnings(), numpy_only(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            columns = [draws[..., i] for i in range(draws.shape[-1])]
            return {"bulk": [az.ess(c) for c in columns],
                    "tail": [az.ess(c, method="tail") for c in columns],
                    "bulk_sq": [az.ess(c**2) for c in columns],
                    "rhat": [az.rhat(c) for c in columns]}

    theirs = {k: np.asarray(v, float) for k, v in arviz_table().items()}
    ours = rank_diagnostics.summary(draws)
    agree = all(np.allclose(ours[k], theirs[k], rtol=1e-9, equal_nan=True) for k in ours)
    return {"run": run_dir, "quantities": len(names), "chains": draws.shape[0],
            "draws": draws.shape[1], "agree": bool(agree),
            "adaptmc_s": round(_best(lambda: summary_table(draws, names), repeats), 3),
            "adaptmc_one_thread_s": round(_best(
                lambda: rank_diagnostics.summary(draws, workers=1), repeats), 3),
            "arviz_per_quantity_s": round(_best(arviz_table, 1), 3)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(main(args.run_dir, args.repeats)))
