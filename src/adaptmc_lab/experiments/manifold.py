"""Manifold stochastic dynamics on the robot-arm network: re-run the protocol of Zlochin &
Baram (2000), "Manifold Stochastic Dynamics for Bayesian Learning" (NIPS), Sec. 5.

Protocol (as the issue states it): MacKay's robot-arm data (`adaptmc_lab.datasets.robot_arm`,
200 training and 400 test cases), a ``2 -> 8 tanh -> 2`` network, noise precision
``beta = 400`` and prior precision ``alpha = 1`` fixed (`adaptmc_lab.models.metric_models.
robot_arm_bnn_target`). Samplers, all with momentum persistence ``cos(theta) = 0.95``:

- **HMC30 / HMC100**: `adaptmc.kernels.hmc` with 30 or 100 leapfrog steps, the step size the
  largest of a grid whose pilot rejection rate stays below 5 %;
- **MSD**: `adaptmc.kernels.manifold.msd_kernel` on the Gauss-Newton metric, one
  generalised-leapfrog step per iteration with Metropolis correction and the exact
  Hamiltonian (``log|G|`` kept, so the draws are from the posterior itself, not the
  posterior times Zlochin & Baram's Jeffreys factor), fixed points solved with Anderson
  acceleration (``MSD_MEMORY``; the same equations to the same tolerance), the step size of
  the grid whose pilot mean ``|H error|`` is closest to 0.05;
- **MSD (Jeffreys)**: the same with ``log|G|`` dropped from ``H`` (``log_det = 0``): the
  draws are from the posterior times ``|G(q)|^(1/2)``, the target Zlochin & Baram sampled
  (their Jeffreys factor read as part of the prior); its test error is that target's;
- **bandit MSD**: the same kernel with its step size tuned by GP-UCB (`adaptmc.recipes.
  manual`), at the fixed MSD's measured cost;
- **NUTS**: BlackJAX NUTS with window adaptation (`adaptmc_lab.experiments.robot_arm.run_nuts`)
  at its own cost (``nuts_warmup`` + ``nuts_draws`` iterations): at the fixed MSD's cost its
  warm-up alone does not fit (about 1000 gradients per iteration on this posterior), which
  the report states.

``num_runs`` runs of ``num_iterations`` iterations from the same starts (random weights moved by
Adam towards a mode, `adam_starts`); the first
``burn_in`` are discarded and every ``predict_every``-th draw predicts. **Normalised test
error**: the squared error of the posterior predictive mean, averaged over test cases and
the two outputs, divided by the noise variance ``0.05^2`` (so the true function scores 1 in
expectation). We take this to be Zlochin & Baram's normalisation (the error in units of the
noise level); we could not check their text offline, so the comparison of levels is
second-hand. Cost: gradient-equivalents per iteration as the kernels report them
(`adaptmc.kernels.integrators.generalized_leapfrog`) and wall seconds per iteration of the
compiled loop (10 runs vmapped, compile excluded). Predictive ESS: the robust min ESS (min
over test outputs of min(bulk-ESS of f, bulk-ESS of f^2, tail-ESS of f)) of the network's
outputs at the 400 test inputs, over all kept draws, per gradient-equivalent and per second.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.kernels import HMCParams, MSDParams, hmc, msd_kernel
from adaptmc_lab.datasets.robot_arm import NOISE_SD, true_function
from adaptmc_lab.experiments.manifold_eval import (
    PAPER_ROWS,
    evaluate,
    format_report,
)

PERSISTENCE = math.acos(0.95)


class Config(NamedTuple):
    """Sizes of one reproduction; ``FULL`` is the paper's."""

    num_runs: int
    num_iterations: int
    burn_in: int
    predict_every: int
    pilot_iterations: int
    hmc_grid: tuple[float, ...]
    msd_grid: tuple[float, ...]
    tuned_super_transitions: int
    nuts_warmup: int
    nuts_draws: int = 500


FULL = Config(10, 3000, 1000, 20, 200, (0.0002, 0.0003, 0.0004, 0.0005, 0.0007, 0.001),
              (0.005, 0.01, 0.015, 0.02, 0.03), 30, 500, 500)
QUICK = Config(3, 450, 150, 10, 100, (0.0002, 0.0003, 0.0005), (0.005, 0.01, 0.02), 6, 150,
               50)
MSD_ITERATIONS, MSD_TOLERANCE = 100, 1e-6  # fixed-point limits (20 diverged half the time)
MSD_MEMORY = 3  # Anderson acceleration of the fixed points (`integrators.fixed_point`)
MAX_PILOT_DIVERGENCE = 0.1


def compiled_chains(kernel, target, num_runs: int, num_iterations: int):
    """``fn(keys, starts, params) -> (positions, num_grads, energy_error, accepted,
    divergent)``, each ``(runs, iterations, ...)``, compiled once (params are traced).
    Runs are vmapped: a vmapped while-loop (MSD's fixed points) runs every run to the
    slowest one's count, but running them one after another (``lax.map``) measured slower
    still (`scripts/msd_profile.py`)."""

    def chain(key, start, params):
        def body(state, k):
            state, info = kernel.step(k, state, target, params)
            return state, (state.position, info.num_grads, info.energy_error, info.accepted,
                           info.is_divergent)

        keys = jax.random.split(key, num_iterations)
        return jax.lax.scan(body, kernel.init(start, target), keys)[1]

    return jax.jit(jax.vmap(chain, in_axes=(0, 0, None)))


def run_fixed(fn, keys, starts, params) -> dict:
    """Run ``fn`` (from `compiled_chains`) and time it; compile time is excluded."""
    compiled = fn.lower(keys, starts, params).compile()
    tick = time.perf_counter()
    out = jax.block_until_ready(compiled(keys, starts, params))
    wall = time.perf_counter() - tick
    positions, grads, energy, accepted, divergent = (np.asarray(a) for a in out)
    return {"positions": positions, "num_grads": grads, "energy_error": energy,
            "accepted": accepted, "divergent": divergent, "wall_s": wall}


def pilot(fn, keys, starts, make_params, grid, score) -> tuple[float, list]:
    """Run each step size of ``grid`` for the pilot length and keep the one ``score``
    (a function of the second half's run dict, lower is better) picks."""
    rows = []
    compiled = None
    for step_size in grid:
        params = make_params(step_size)
        compiled = compiled or fn.lower(keys, starts, params).compile()
        out = [np.asarray(a) for a in compiled(keys, starts, params)]
        half = out[0].shape[1] // 2
        run = {"energy_error": out[2][:, half:], "accepted": out[3][:, half:],
               "divergent": out[4][:, half:]}
        rows.append({"step_size": step_size, "score": float(score(run)),
                     "acceptance": float(run["accepted"].mean()),
                     "mean_abs_energy_error": float(np.nanmean(np.abs(
                         np.where(np.isfinite(run["energy_error"]), run["energy_error"],
                                  np.nan))))})
    best = min(rows, key=lambda r: r["score"])
    return best["step_size"], rows


def _hmc_score(run) -> float:
    """Rejection below 5 % (the grid runs from the largest step, so the largest such step
    wins); when no step qualifies, the least rejecting."""
    rejection = 1.0 - float(run["accepted"].mean())
    return 0.0 if rejection < 0.05 else rejection


def _msd_score(run) -> float:
    """Mean |H error| closest to 0.05 among steps diverging at most 10 % of the time."""
    if run["divergent"].mean() > MAX_PILOT_DIVERGENCE:  # refused: rank by divergences
        return 1e6 + float(run["divergent"].mean())
    energy = np.where(np.isfinite(run["energy_error"]), run["energy_error"], np.nan)
    return abs(float(np.nanmean(np.abs(energy))) - 0.05)


def adam_starts(target, num_runs: int, seed: int, steps: int = 3000, rate: float = 0.01):
    """Shared starting points: ``N(0, 0.1^2)`` weights moved by ``steps`` Adam steps on
    ``-log pi`` (Kingma & Ba 2015). From the random draws themselves (log density about
    -1.8e5, gradients about 1e5) every fixed point of MSD failed and HMC30 rejected at
    every step size tried; the burn-in of every sampler starts after this."""
    x0 = 0.1 * jax.random.normal(jax.random.fold_in(jax.random.key(seed), 1),
                                 (num_runs, target.dim))

    def adam(x):
        def body(carry, t):
            x, m, v = carry
            g = -jax.grad(target.logdensity)(x)
            m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
            step = m / (1 - 0.9 ** (t + 1)) / (jnp.sqrt(v / (1 - 0.999 ** (t + 1))) + 1e-8)
            return (x - rate * step, m, v), None

        zeros = jnp.zeros_like(x)
        return jax.lax.scan(body, (x, zeros, zeros), jnp.arange(steps))[0][0]

    return jax.jit(jax.vmap(adam))(x0)


def run_samplers(target, cfg: Config, seed: int, starts) -> dict:
    """The fixed-setting samplers: pilot, then ``num_runs`` runs of each."""
    metric = target.info["metric"]
    key = jax.random.key(seed)
    keys = jax.random.split(jax.random.fold_in(key, 2), cfg.num_runs)
    pilot_keys = jax.random.split(jax.random.fold_in(key, 3), cfg.num_runs)
    results = {}
    msd = msd_kernel(metric, memory=MSD_MEMORY)
    samplers = {
        "HMC30": (hmc, lambda e: HMCParams(step_size=e, num_leapfrog=30,
                                           refresh_angle=PERSISTENCE), cfg.hmc_grid, _hmc_score),
        "HMC100": (hmc, lambda e: HMCParams(step_size=e, num_leapfrog=100,
                                            refresh_angle=PERSISTENCE), cfg.hmc_grid,
                   _hmc_score),
        "MSD": (msd, lambda e: MSDParams(step_size=e, refresh_angle=PERSISTENCE,
                                         max_iterations=MSD_ITERATIONS,
                                         tolerance=MSD_TOLERANCE), cfg.msd_grid, _msd_score),
        "MSD (Jeffreys)": (msd, lambda e: MSDParams(
            step_size=e, refresh_angle=PERSISTENCE, max_iterations=MSD_ITERATIONS,
            tolerance=MSD_TOLERANCE, log_det=0.0), cfg.msd_grid, _msd_score),
    }
    for name, (kernel, make_params, grid, score) in samplers.items():
        if score is _hmc_score:
            grid = tuple(sorted(grid, reverse=True))  # the first refusing-free step wins
        pilot_fn = compiled_chains(kernel, target, cfg.num_runs, cfg.pilot_iterations)
        step_size, rows = pilot(pilot_fn, pilot_keys, starts, make_params, grid, score)
        fn = compiled_chains(kernel, target, cfg.num_runs, cfg.num_iterations)
        out = run_fixed(fn, keys, starts, make_params(step_size))
        out.update(step_size=step_size, pilot=rows)
        results[name] = out
        print(f"{name}: step {step_size:g}, acceptance {out['accepted'].mean():.3f}, "
              f"{out['num_grads'].mean():.1f} grad-eq/iteration, {out['wall_s']:.1f} s",
              flush=True)
    return results


def run_tuned_msd(target, cfg: Config, total_cost: float, overcount: float, seed: int,
                  starts) -> dict:
    """MSD with its step size tuned by GP-UCB over ``[0.002, 0.05]`` (log scale), the first
    third of the super-transitions discarded, at about ``total_cost`` gradient-equivalents
    per chain: the run loop sizes super-transitions by the kernel's upper-bound cost, which
    exceeds the fixed MSD's measured cost by ``overcount``, so the budget is scaled by it.
    Draws past that cost are dropped (`within_cost`); the wall time is scaled by the share
    of gradient-equivalents kept. The reward is ESJD per gradient-equivalent; a
    super-transition fails only when more than ``MAX_PILOT_DIVERGENCE`` of its steps
    diverged, the pilot's rule (``recipes.manual(max_divergence_rate=...)``): with every
    divergence a failure, one non-converged fixed point in 1000 steps failed a setting,
    the box shrank below the pilot's step and the tuner froze at a quarter of it."""
    from adaptmc import api, recipes
    from adaptmc.tuners import make_box

    kernel = msd_kernel(target.info["metric"], memory=MSD_MEMORY)
    num = cfg.tuned_super_transitions
    budget = int(total_cost * overcount / num)
    plan = recipes.manual(
        target, kernel=kernel, tuner="gp-ucb", refresh_angle=PERSISTENCE, step_size=0.01,
        box=make_box({"step_size": (0.002, 0.05)}, log=("step_size",)),
        objective="esjd", max_divergence_rate=MAX_PILOT_DIVERGENCE,
        warmup=num // 3, adapt_until=(2 * num) // 3, super_transitions=num, budget=budget,
        seed=seed, name="msd-gp-ucb",
    )
    plan = plan._replace(params=plan.params._replace(max_iterations=MSD_ITERATIONS,
                                                     tolerance=MSD_TOLERANCE))
    flat = dataclasses.replace(target, unravel=lambda x: x, constrain=None)  # draws as "x"
    result = api.run_plan(flat, plan, chains=cfg.num_runs, seed=seed,
                          initial_positions=np.asarray(starts), progress=False)
    draws, grads = within_cost(result.idata.tuning, result.num_grads, plan.num_warmup,
                               cfg.num_runs, total_cost)
    positions = np.asarray(result.idata.posterior["x"])[:, :draws]
    return {"positions": positions, "num_grads_total": grads,
            "wall_s": (result.wall_s - result.compile_s) * grads / result.num_grads,
            "tuned_step_size": float(np.median(np.asarray(result.params.step_size)))}


def within_cost(tuning, num_grads: int, num_warmup: int, chains: int, cost: float):
    """``(kept draws, gradient-equivalents over all chains)`` of the leading
    super-transitions whose spending stays within ``cost`` per chain (at least the first
    kept one): the tuned run at the fixed MSD's cost. Its super-transitions are sized by the
    kernel's upper-bound cost, so a larger tuned step (more fixed-point iterations per step)
    spends more than the fixed MSD; the rest of its draws are dropped. ``num_grads`` (the
    run's total) gives the spending before the first super-transition."""
    per_chain = np.asarray(tuning["num_grads"], float) / chains
    before = num_grads / chains - per_chain.sum()
    spent = before + np.cumsum(per_chain)
    within = max(int(np.searchsorted(spent, cost, side="right")), num_warmup + 1)
    draws = int(np.asarray(tuning["num_draws"])[num_warmup:within].sum())
    return draws, float(chains * spent[within - 1])


def run_nuts_runs(target, cfg: Config, seed: int, starts) -> dict:
    """BlackJAX NUTS, one chain per run, at its own cost: ``nuts_warmup`` window-adaptation
    iterations, then ``nuts_draws`` draws (the gradient budget is set above what they can
    spend). Wall time is the runs' sum, each run's compilation included."""
    from adaptmc_lab.experiments.robot_arm import run_nuts

    draws, grads, walls, infos = [], [], [], []
    ceiling = (cfg.nuts_warmup + cfg.nuts_draws) * 1023 + 1  # 10 doublings at most
    for run in range(cfg.num_runs):
        tick = time.perf_counter()
        positions, _, info = run_nuts(target, starts[run], ceiling, cfg.nuts_warmup,
                                      seed + run, max_draws=cfg.nuts_draws)
        walls.append(time.perf_counter() - tick)
        draws.append(positions)
        grads.append(info["num_grads"])
        infos.append(info)
    length = min(len(d) for d in draws)
    return {"positions": np.stack([d[-length:] for d in draws]), "num_grads_total":
            int(np.sum(grads)), "wall_s": float(np.sum(walls)), "info": infos,
            "warmup_grads_per_run": float(np.mean([i["warmup_grads"] for i in infos])),
            "tuned_step_size": float(np.median([i["step_size"] for i in infos]))}


def floor_note(target) -> str:
    """The true function's normalised error on this test draw: the level no predictor
    beats but by the noise of the draw."""
    x_test, y_test = target.info["test"]
    truth = true_function(np.asarray(x_test))
    floor = float(np.mean((truth - np.asarray(y_test)) ** 2) / NOISE_SD**2)
    return (f"The true function scores {floor:.3f} on this test draw. The data are a fresh "
            "draw of MacKay's process, not the paper's set: levels differ from the paper's "
            "by the draw.")


def equal_cost_note(nuts: dict, msd_cost: float) -> str:
    """What NUTS makes at the fixed MSD's cost per run: draws only if its warm-up fits."""
    warm = nuts["warmup_grads_per_run"]
    if warm < msd_cost:
        return (f"NUTS's warm-up spent {warm:,.0f} gradients per run, within MSD's "
                f"{msd_cost:,.0f}; the NUTS row is at its own cost.")
    return (f"NUTS at the fixed MSD's cost ({msd_cost:,.0f} gradient-equivalents per run) "
            f"makes no draw: its warm-up alone spent {warm:,.0f} gradients per run. The "
            "NUTS row is at its own cost (warm-up included).")


def run_manifold(out, quick: bool = False, force: bool = False, seed: int = 0,
                 config: Config | None = None) -> int:
    """``adaptmc reproduce manifold [--quick]``: the table, autocorrelations and ESS;
    ``config`` replaces `FULL` / `QUICK` (from Python, for a reduced protocol)."""
    from adaptmc_lab.models.metric_models import robot_arm_bnn_target

    out = Path(out)
    if out.exists() and any(out.iterdir()) and not force:
        print(f"{out} exists; use --force to overwrite")
        return 1
    out.mkdir(parents=True, exist_ok=True)
    cfg = config if config is not None else (QUICK if quick else FULL)
    jax.config.update("jax_enable_x64", True)
    target = robot_arm_bnn_target(seed)
    starts = adam_starts(target, cfg.num_runs, seed)
    results = run_samplers(target, cfg, seed, starts)
    msd = results["MSD"]
    msd_cost = float(msd["num_grads"].sum(axis=1).mean())
    upper = msd_kernel(target.info["metric"], memory=MSD_MEMORY).cost(
        MSDParams(max_iterations=MSD_ITERATIONS, tolerance=MSD_TOLERANCE))
    overcount = upper / float(msd["num_grads"].mean())
    results["MSD (GP-UCB)"] = run_tuned_msd(target, cfg, msd_cost, overcount, seed, starts)
    print(f"MSD (GP-UCB): {results['MSD (GP-UCB)']['wall_s']:.1f} s", flush=True)
    results["NUTS"] = run_nuts_runs(target, cfg, seed, starts)
    print(f"NUTS: {results['NUTS']['wall_s']:.1f} s", flush=True)
    rows = evaluate(target, results, cfg)
    report = format_report(rows, cfg, quick, floor_note(target) + "\n\n"
                           + equal_cost_note(results["NUTS"], msd_cost))
    (out / "results.json").write_text(json.dumps({"config": cfg._asdict(), "rows": rows,
                                                  "paper": PAPER_ROWS}, indent=1))
    (out / "report.md").write_text(report)
    print(report)
    return 0


