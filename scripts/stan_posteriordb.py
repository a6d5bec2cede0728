"""Every posteriordb posterior sampled from its ``model.stan``, beside the hand translation.

For each posterior folder (default: all of ``../shared/posteriordb``), one after another:
the default recipe with seed 0 on the Stan program (`adaptmc.targets.stan.stan_target`) and,
where one exists, on the JAX translation (``pdb-<name>``); accuracy (max over the reference
quantities of ``|mean - ref mean| / ref sd``), max R-hat, robust min ESS per 1000 gradients
(every gradient counted, warm-up and tuning included), and the cost of one gradient: Stan
called directly (ctypes), Stan through JAX (``jit(vmap(value_and_grad))`` over 4 points, one
host call) and the JAX translation the same way. Rows go to a JSON-lines file as they are
done; the table is printed at the end (``--table`` prints it from the file alone).

    PYTHONPATH=src python scripts/stan_posteriordb.py --draws 500 --out notes/stan_bench.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
import traceback
from pathlib import Path

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from adaptmc import diagnostics  # noqa: E402
from adaptmc.api import run_plan  # noqa: E402
from adaptmc.datasets.posteriordb import default_posteriordb_dir  # noqa: E402
from adaptmc.recipes import DEFAULT_RECIPE, build  # noqa: E402
from adaptmc.targets.named_draws import flatten_named  # noqa: E402
from adaptmc.targets.posteriordb import MODELS, posteriordb_target  # noqa: E402
from adaptmc.targets.stan import stan_target  # noqa: E402

CHAINS = 4
# run last: the translation's adaptive-hmc run took 1.6M gradients (BENCHMARKS)
LAST = ("diamonds-diamonds",)


def sample(target, draws: int) -> dict:
    """The default recipe on ``target`` (seed 0): accuracy, R-hat, ESS per 1000 gradients."""
    plan = build(DEFAULT_RECIPE, target, seed=0, draws=draws)
    started = time.perf_counter()
    result = run_plan(target, plan, chains=CHAINS, seed=0, progress=False)
    wall = time.perf_counter() - started
    posterior = result.idata.posterior
    flat = flatten_named({k: posterior[k].values for k in posterior.data_vars}, batch_ndim=2)
    ref = target.reference
    values = np.stack([flat[n] for n in ref.names], axis=-1)
    err_sd = np.abs(values.mean(axis=(0, 1)) - ref.mean) / ref.sd
    ess = diagnostics.robust_ess(values)
    position = np.asarray(result.states.position)
    return {"max_err_sd": float(np.max(err_sd)), "worst": ref.names[int(np.argmax(err_sd))],
            "max_rhat": float(np.nanmax(diagnostics.rhat(values))),
            "min_ess": float(np.min(ess)), "grads": int(result.num_grads),
            "ess_per_1k_grads": 1000.0 * float(np.min(ess)) / result.num_grads,
            "wall_s": wall, "position": position.reshape(-1, target.dim)[:CHAINS].tolist()}


def seconds_per_call(function, *args, calls: int = 200) -> float:
    jax.block_until_ready(function(*args))
    started = time.perf_counter()
    for _ in range(calls):
        jax.block_until_ready(function(*args))
    return (time.perf_counter() - started) / calls


def gradient_costs(stan, stan_points, jax_target=None, jax_points=None) -> dict:
    """Seconds per gradient (per point of a batch of 4, each at its run's last draws): Stan
    direct, Stan through JAX, and the JAX translation."""
    model = stan.info["stan_model"]
    out = {"stan_direct_s": seconds_per_call(model.log_density_gradient, stan_points),
           "stan_jax_s": seconds_per_call(
               jax.jit(jax.vmap(jax.value_and_grad(stan.logdensity))), stan_points)}
    if jax_target is not None:
        out["jax_s"] = seconds_per_call(
            jax.jit(jax.vmap(jax.value_and_grad(jax_target.logdensity))), jax_points)
    return {k: v / CHAINS for k, v in out.items()}


def one_posterior(folder: Path, draws: int) -> dict:
    name = folder.name
    row = {"posterior": name}
    started = time.perf_counter()
    stan = stan_target(folder / "model.stan", folder / "data.json.zip",
                       generated_quantities=False)
    row.update(dim=stan.dim, build_s=time.perf_counter() - started, stan=sample(stan, draws))
    jax_target, jax_points = None, None
    if name in MODELS:
        jax_target = posteriordb_target(name)  # draws stored constrained, as Stan's are
        jax_target = dataclasses.replace(jax_target, constrain=jax_target.info["constrain"])
        row["jax"] = sample(jax_target, draws)
        jax_points = np.asarray(row["jax"].pop("position"))
    row["cost"] = gradient_costs(stan, np.asarray(row["stan"].pop("position")), jax_target,
                                 jax_points)
    return row


def _cells(result: dict | None) -> list[str]:
    if not result:
        return ["", "", "", ""]
    return [f"{result['max_err_sd']:.2f}", f"{result['max_rhat']:.3f}",
            f"{result['ess_per_1k_grads']:.1f}", f"{result['wall_s']:.0f}"]


def table(rows: list[dict]) -> str:
    """A Markdown table of the rows."""
    lines = ["| posterior | dim | Stan: err/sd | R-hat | ESS/1k grads | wall s | JAX: err/sd | "
             "R-hat | ESS/1k grads | wall s | us/grad Stan direct | Stan via JAX | JAX |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['posterior']} | | failed: {row['error']} |||||||||||")
            continue
        cost = row["cost"]
        us = [f"{cost[k] * 1e6:.1f}" if k in cost else "" for k in
              ("stan_direct_s", "stan_jax_s", "jax_s")]
        lines.append("| " + " | ".join([row["posterior"], str(row["dim"]),
                                        *_cells(row["stan"]), *_cells(row.get("jax")), *us])
                     + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="posterior folders' names (default: all)")
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--out", default="notes/stan_bench.jsonl")
    parser.add_argument("--table", action="store_true", help="print the table of --out")
    args = parser.parse_args()
    out = Path(args.out)
    if not args.table:
        folders = [default_posteriordb_dir() / n for n in args.names] if args.names else \
            sorted((p for p in default_posteriordb_dir().iterdir()
                    if (p / "model.stan").is_file()), key=lambda p: (p.name in LAST, p.name))
        done = {json.loads(line)["posterior"] for line in out.read_text().splitlines()
                if line.strip()} if out.is_file() else set()
        for folder in (f for f in folders if f.name not in done):  # a rerun continues
            try:
                row = one_posterior(folder, args.draws)
            except Exception as err:  # one failure must not lose the other rows
                traceback.print_exc()
                row = {"posterior": folder.name, "error": " ".join(str(err).split())[:200]}
            with out.open("a") as handle:
                handle.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    rows = {}
    for line in out.read_text().splitlines():  # the first row of each posterior
        if line.strip():
            row = json.loads(line)
            rows.setdefault(row["posterior"], row)
    print(table(list(rows.values())))


if __name__ == "__main__":
    main()
