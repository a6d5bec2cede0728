"""adaptmc's default recipe against nutpie (diagonal and low-rank) on the same JAX log
densities, same starts, every gradient counted: one JSON line per (target, seed, row).

    python scripts/warmup_vs_nutpie.py pdb-arK-arK ... --label after --rows adaptmc \
        nutpie-diag nutpie-low-rank --seeds 0 1 >> rows.jsonl
    python scripts/warmup_vs_nutpie.py --report rows.jsonl

The ``adaptmc`` row is ``adaptmc sample`` with its defaults (recipe adaptive-hmc, 4 chains,
1000 draws); run it with another source tree on PYTHONPATH (``--label before``) to measure
an earlier version in the same run. nutpie: `adaptmc_lab.baselines.nutpie.nutpie_pyfunc`,
tune 1000 and 1000 draws (its defaults). Accuracy and ESS: `adaptmc_lab.bench.evaluation`.
"""

import argparse
import json
import statistics
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

from adaptmc.targets import get_target  # noqa: E402
from adaptmc_lab.bench.config import SamplerOutput, initial_positions  # noqa: E402
from adaptmc_lab.bench.evaluation import evaluate  # noqa: E402

CHAINS, DRAWS = 4, 1000


def adaptmc_row(target, seed):
    from adaptmc.api import run_plan
    from adaptmc.recipes import build
    from adaptmc_lab.bench.quantities import run_positions

    starts = initial_positions(target, seed, CHAINS, 0.5)
    tick = time.perf_counter()
    plan = build("adaptive-hmc", target, seed=seed, draws=DRAWS)
    result = run_plan(target, plan, chains=CHAINS, seed=seed, initial_positions=starts,
                      progress=False)
    wall = time.perf_counter() - tick
    stats = result.idata.sample_stats
    sampling = int(stats["n_grad_evals"].values.sum())
    warm = json.loads(result.idata.attrs.get("warmup", "{}"))
    out = SamplerOutput(run_positions(result), result.num_grads - sampling, sampling,
                        wall - result.compile_s, result.compile_s,
                        int(stats["diverging"].values.sum()), {})
    extra = {"metric": warm.get("metric"), "warmup_only_grads": warm.get("num_grads"),
             "metric_rank": warm.get("metric_rank")}
    return out, extra


def nutpie_row(target, seed, low_rank):
    from adaptmc_lab.baselines.nutpie import nutpie_pyfunc

    starts = initial_positions(target, seed, CHAINS, 0.5)
    run = nutpie_pyfunc(target, seed, num_chains=CHAINS, num_draws=DRAWS,
                        initial_positions=starts, low_rank=low_rank)
    stats = run.idata.sample_stats
    out = SamplerOutput(run.positions, run.warmup_grads, run.num_grads - run.warmup_grads,
                        run.wall_s, run.compile_s, int(np.sum(stats["diverging"].values)), {})
    return out, {"metric": "low-rank" if low_rank else "diag"}


def measure(names, seeds, rows, label):
    for name in names:
        target = get_target(name)
        for seed in seeds:
            for row in rows:
                if row == "adaptmc":
                    out, extra = adaptmc_row(target, seed)
                else:
                    out, extra = nutpie_row(target, seed, row == "nutpie-low-rank")
                cell = evaluate(target, out)
                keep = ("warmup_grads", "sampling_grads", "min_ess", "min_ess_per_1k_grads",
                        "max_rhat", "max_err_sd", "divergences", "wall_s", "compile_s")
                line = {"target": name, "seed": seed, "row": f"{row}-{label}"
                        if row == "adaptmc" else row, **{k: cell[k] for k in keep}, **extra}
                print(json.dumps(line), flush=True)


def right(cell):
    return cell["max_err_sd"] is not None and cell["max_err_sd"] <= 0.25 \
        and cell["max_rhat"] < 1.01


def report(path):
    cells = [json.loads(line) for line in open(path) if line.startswith("{")]
    order = ["adaptmc-before", "adaptmc-after", "nutpie-diag", "nutpie-low-rank"]
    rows = sorted(dict.fromkeys(c["row"] for c in cells),
                  key=lambda r: order.index(r) if r in order else len(order))
    targets = list(dict.fromkeys(c["target"] for c in cells))
    print("| target | seed | " + " | ".join(rows) + " |")
    print("|---|---|" + "---|" * len(rows))
    by = {(c["target"], c["seed"], c["row"]): c for c in cells}
    for target in targets:
        for seed in sorted({c["seed"] for c in cells if c["target"] == target}):
            parts = []
            for row in rows:
                c = by.get((target, seed, row))
                if c is None:
                    parts.append("")
                    continue
                mark = "" if right(c) else " **wrong**"
                metric = f" {c['metric']}" if c.get("metric") else ""
                parts.append(f"{c['min_ess_per_1k_grads']:.1f} / {c['warmup_grads'] / 1e3:.1f}k"
                             f" / {c['max_err_sd']:.2f}, {c['max_rhat']:.3f}{metric}{mark}")
            print(f"| {target} | {seed} | " + " | ".join(parts) + " |")
    base = [r for r in rows if r.startswith("adaptmc")]
    for ours in base:
        for peer in rows:
            if peer.startswith("adaptmc"):
                continue
            ratios = [by[(t, s, ours)]["min_ess_per_1k_grads"] /
                      by[(t, s, peer)]["min_ess_per_1k_grads"]
                      for (t, s, r) in by if r == peer and (t, s, ours) in by
                      and right(by[(t, s, peer)])]
            warm = [by[(t, s, ours)]["warmup_grads"] / by[(t, s, peer)]["warmup_grads"]
                    for (t, s, r) in by if r == peer and (t, s, ours) in by]
            if ratios:
                print(f"\n{ours} / {peer}: median ESS-per-gradient ratio "
                      f"{statistics.median(ratios):.2f} over {len(ratios)} cells where the "
                      f"peer is right (min {min(ratios):.2f}, max {max(ratios):.2f}); median "
                      f"warm-up gradient ratio {statistics.median(warm):.2f}")
    for row in rows:
        n = [right(c) for c in cells if c["row"] == row]
        print(f"{row}: right on {sum(n)} of {len(n)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("targets", nargs="*")
    parser.add_argument("--rows", nargs="+", default=["adaptmc"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--label", default="after")
    parser.add_argument("--report")
    args = parser.parse_args()
    if args.report:
        report(args.report)
    else:
        measure(args.targets, args.seeds, args.rows, args.label)
        sys.stdout.flush()
