"""MAMS (`adaptmc.kernels.mams`) through adaptmc's manual recipe against the default
(adaptive-hmc: NUTS warm-up, then NUTS or tuned HMC) on one posterior, per sampling gradient.

The default runs as the bench's row ``adaptmc-adaptive-hmc`` (500 warm-up transitions, 1000
draws, 4 chains). MAMS runs ``manual(kernel="mams", tuner="dual-averaging")`` from the same
starts in two forms:

- ``oracle``: its inverse mass is the dense covariance of the default's 4000 draws (given,
  as ``--inverse-mass cov.npy`` would), 30 warm-up super-transitions of dual averaging to
  ``target_accept``, then frozen;
- ``learned``: the manual recipe's own dense mass warm-up (``adapt_mass="dense"``, 25
  super-transitions, Stan's doubling windows), then 15 of dual averaging, then frozen;
- ``after-warmup``: the default's own NUTS warm-up (its metric, diagonal, low-rank or dense,
  and its chains' positions), then 20 super-transitions of 200 gradients of dual averaging
  (per-step acceptance, a divergent step counting 0) from ``sqrt(d)`` times NUTS's step,
  then frozen: what MAMS would sample as an arm of the default. Its warm-up and tuning
  gradients are counted as warm-up.

ESS is the robust min ESS (bench `evaluate`) per 1000 sampling gradients (kept draws only).

    PYTHONPATH=src python scripts/mams_check.py pdb-arK-arK [--seed-index 0]
        [--steps 1 2 3] [--jitter 0.5] [--target-accept 0.7]
        [--forms oracle after-warmup learned] [--out FILE.jsonl]
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import numpy as np

from adaptmc.api import run_plan
from adaptmc.recipes import build
from adaptmc_lab.bench.config import BenchConfig, SamplerOutput, cell_seed
from adaptmc_lab.bench.evaluation import evaluate
from adaptmc_lab.bench.quantities import run_positions
from adaptmc_lab.bench.samplers import recipe_sampler
from adaptmc_lab.targets import get_target


def mams_run(target, seed: int, steps: int, jitter: float, accept: float,
             inverse_mass=None) -> dict:
    dim = target.dim
    warm = dict(warmup=30, adapt_until=30) if inverse_mass is not None else \
        dict(warmup=40, adapt_until=40, adapt_mass="dense", mass_warmup=25)
    draws = max(1000, 12000 // steps)
    tick = time.perf_counter()
    if isinstance(inverse_mass, str):  # "after-warmup"
        plan = after_warmup_plan(target, steps, jitter, accept, draws)
    else:
        plan = build("manual", target, kernel="mams", num_leapfrog=steps, jitter=jitter,
                     step_size=None if inverse_mass is None else 0.5 * np.sqrt(dim),
                     inverse_mass=inverse_mass, tuner="dual-averaging", target_accept=accept,
                     objective=None, budget=max(50, 200 // steps) * steps, draws=draws,
                     seed=seed, **warm)
    result = run_plan(target, plan, chains=4, seed=seed, init_jitter=0.5, progress=False)
    wall = time.perf_counter() - tick
    stats = result.idata.sample_stats
    grads = int(stats["n_grad_evals"].values.sum())
    out = SamplerOutput(run_positions(result, target), result.num_grads - grads, grads,
                        wall, 0.0, int(stats["diverging"].values.sum()), {})
    e = evaluate(target, out)
    tuning = result.idata.tuning
    return dict(ess1k=e["min_ess_per_1k_sampling_grads"], min_ess=e["min_ess"],
                sampling_grads=grads, warmup_grads=out.warmup_grads,
                step_size=float(np.asarray(tuning["step_size"].values)[-1]),
                acceptance=float(stats["acceptance_rate"].values.mean()),
                divergences=out.divergences, rhat=e["max_rhat"], err_sd=e["max_err_sd"],
                err_mcse=e["max_err_mcse"],
                warmup=json.loads(result.idata.attrs.get("warmup", "{}")), wall_s=wall)


def after_warmup_plan(target, steps: int, jitter: float, accept: float, draws: int):
    """The default's warm-up (`adaptmc.recipes.adaptive_hmc`'s stage), then MAMS."""
    from adaptmc.adaptation.early_stage import EarlyWarmupStage
    from adaptmc.kernels import MAMSParams, mams
    from adaptmc.run.plan import Plan, Prepared
    from adaptmc.tuners import dual_averaging_tuner, fixed

    tuning, budget = 20, max(50, 200 // steps) * steps
    length = tuning + -(-draws * steps // budget)

    def then(warm):
        step_size = float(np.mean(warm.step_size)) * np.sqrt(target.dim)
        params = MAMSParams(step_size, steps, warm.inverse_mass, jitter)
        tuner = dual_averaging_tuner(step_size, target_accept=accept, zero_on_divergence=False)
        plan = Plan("mams-after-warmup", mams, params, tuner, None, length, budget, tuning,
                    tuning, draws=draws)
        return Prepared(plan, warm.positions, warm.num_grads, {"metric": warm.metric})

    return Plan("mams-after-warmup", mams, MAMSParams(num_leapfrog=steps), fixed(), None,
                length, budget, tuning, tuning, warmup=EarlyWarmupStage(500, "auto", then),
                draws=draws)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("--seed-index", type=int, default=0)
    parser.add_argument("--steps", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--jitter", type=float, default=0.5)
    parser.add_argument("--target-accept", type=float, default=0.7)
    parser.add_argument("--forms", nargs="+", default=["oracle", "after-warmup"])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)  # as the bench's cells and the command line
    target = get_target(args.target)
    seed = cell_seed(args.target, args.seed_index)
    tick = time.perf_counter()
    default = recipe_sampler("adaptmc-adaptive-hmc")(target, seed, BenchConfig())
    e = evaluate(target, default)
    rows = [dict(target=args.target, seed=seed, sampler="default", dim=target.dim,
                 ess1k=e["min_ess_per_1k_sampling_grads"], min_ess=e["min_ess"],
                 sampling_grads=default.sampling_grads, rhat=e["max_rhat"],
                 err_sd=e["max_err_sd"], err_mcse=e["max_err_mcse"], params=default.params,
                 wall_s=time.perf_counter() - tick)]
    print(json.dumps(rows[-1]), flush=True)
    flat = default.positions.reshape(-1, target.dim)
    cov = np.cov(flat.T).reshape(target.dim, target.dim)
    for form in args.forms:
        for steps in args.steps:
            metric = {"oracle": cov, "learned": None}.get(form, form)
            row = mams_run(target, seed, steps, args.jitter, args.target_accept, metric)
            rows.append(dict(target=args.target, seed=seed, sampler=f"mams-{form}",
                             steps=steps, jitter=args.jitter,
                             target_accept=args.target_accept,
                             ratio=row["ess1k"] / rows[0]["ess1k"], **row))
            print(json.dumps(rows[-1]), flush=True)
    if args.out:
        with open(args.out, "a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
