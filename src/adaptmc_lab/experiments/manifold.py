"""Manifold stochastic dynamics on the robot-arm network: re-run the protocol of Zlochin &
Baram (2000), "Manifold Stochastic Dynamics for Bayesian Learning" (NIPS), Sec. 5.

Protocol (Sec. 5): MacKay's robot-arm data (`adaptmc_lab.datasets.robot_arm`, 200 training and
400 test cases), a ``2 -> 8 tanh -> 2`` network, noise precision ``beta = 400`` and prior
precision ``alpha = 1`` (sigma = 1) fixed (`adaptmc_lab.models.metric_models.
robot_arm_bnn_target`). Samplers, all with momentum persistence ``cos(theta) = 0.95``:

- **HMC30 / HMC100**: `adaptmc.kernels.hmc` with 30 or 100 leapfrog steps, the step size the
  largest of a grid whose pilot rejection rate stays below 5 % (Sec. 5.2);
- **MSD**: Zlochin & Baram's MSD (`adaptmc.kernels.msd_explicit`): one explicit step of
  their eq. (10) per iteration on ``G_B = beta J^T J + alpha I``, persistence in
  ``N(0, G_B)``, **no Metropolis correction**, the step size of the grid whose pilot mean
  ``|H error|`` is closest to 0.05 (Sec. 5.2's "equivalent criterion"). Why uncorrected:
  the abstract calls it "a generalization of the stochastic dynamics method", which Sec. 2
  describes without the Metropolis step (citing Neal 1996's finding that uncorrected
  dynamics with a small step differ little from HMC); Sec. 4's two-fold scheme has no
  acceptance test; and the step is chosen by a Hamiltonian error, not a rejection rate, as
  it is for HMC. Its draws target the posterior times the Jeffreys factor ``|G_B|^(1/2)``
  (Sec. 4, footnote 2);
- **MSD + MH**: the same with the exact correction (the step's Jacobian included), same
  step rule;
- **MSD (GP-UCB, reward)**: the corrected MSD with its step size and persistence angle
  tuned by GP-UCB (`adaptmc.recipes.manual`) during the burn-in, then frozen;
  super-transitions of ``bandit_steps`` iterations; one row per seed paper's reward
  (`BANDIT_OBJECTIVES`). The correction is what makes a reward safe: without it a longer
  step raises ESJD with no rejection to stop it.

``num_runs`` runs of ``num_iterations`` iterations from the same starts (random weights moved by
Adam towards a mode, `adam_starts`); the first ``burn_in`` are discarded and every
``predict_every``-th draw predicts (Sec. 5.3). **Normalised test error**: the squared error
of the posterior predictive mean, averaged over test cases and the two outputs, divided by
the noise variance ``0.05^2``. Zlochin & Baram normalise "with respect to the variance on
the test cases"; the data here are a fresh draw of MacKay's process, so levels differ from
theirs by the draw. Cost per iteration in gradient-equivalents (as the kernels count them)
and in flops (XLA's count of one compiled iteration, `manifold_eval.flops_per_iteration`),
the unit of Sec. 5.2.
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

from adaptmc.kernels import HMCParams, hmc
from adaptmc.kernels.msd_explicit import ExplicitMSDParams, explicit_msd_kernel
from adaptmc_lab.datasets.robot_arm import NOISE_SD, true_function
from adaptmc_lab.experiments.manifold_eval import (
    PAPER_ROWS,
    cost_line,
    evaluate,
    flops_per_iteration,
    format_report,
    plot_autocorrelations,
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
    bandit_steps: int


FULL = Config(10, 3000, 1000, 20, 200, (0.0002, 0.0003, 0.0004, 0.0005, 0.0007, 0.001),
              (0.02, 0.04, 0.06, 0.08, 0.1, 0.13, 0.16, 0.2), 50)
QUICK = Config(3, 450, 150, 10, 100, (0.0002, 0.0003, 0.0005), (0.04, 0.08, 0.16), 25)
MAX_PILOT_DIVERGENCE = 0.1
BANDIT_BOX = {"step_size": (0.005, 0.5), "refresh_angle": (0.05, math.pi / 2)}
BANDIT_OBJECTIVES = {"ESJD": "esjd", "autocorrelation": "autocorrelation"}
"""The seed papers' rewards (`adaptmc.objectives`): ESJD per gradient-equivalent (Wang
2012) and one minus the mean absolute autocorrelation over lags up to 50 (Mahendran, Wang,
Hamze & de Freitas 2012; all of MSD's settings cost the same per iteration)."""


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


def fixed_samplers(target, cfg: Config) -> dict:
    """``name: (kernel, make_params(step), grid, score)`` of the fixed-setting samplers."""
    geometry = target.info["msd_geometry"]

    def hmc_params(num):
        return lambda e: HMCParams(step_size=e, num_leapfrog=num, refresh_angle=PERSISTENCE)

    def msd_params(e):
        return ExplicitMSDParams(step_size=e, refresh_angle=PERSISTENCE)

    hmc_grid = tuple(sorted(cfg.hmc_grid, reverse=True))  # the first qualifying step wins
    return {
        "HMC30": (hmc, hmc_params(30), hmc_grid, _hmc_score),
        "HMC100": (hmc, hmc_params(100), hmc_grid, _hmc_score),
        "MSD": (explicit_msd_kernel(geometry), msd_params, cfg.msd_grid, _msd_score),
        "MSD + MH": (explicit_msd_kernel(geometry, metropolis=True), msd_params,
                     cfg.msd_grid, _msd_score),
    }


def run_samplers(target, cfg: Config, seed: int, starts) -> dict:
    """The fixed-setting samplers: pilot, then ``num_runs`` runs of each; each result
    carries its kernel and parameters (for the flop count)."""
    key = jax.random.key(seed)
    keys = jax.random.split(jax.random.fold_in(key, 2), cfg.num_runs)
    pilot_keys = jax.random.split(jax.random.fold_in(key, 3), cfg.num_runs)
    results = {}
    for name, (kernel, make_params, grid, score) in fixed_samplers(target, cfg).items():
        pilot_fn = compiled_chains(kernel, target, cfg.num_runs, cfg.pilot_iterations)
        step_size, rows = pilot(pilot_fn, pilot_keys, starts, make_params, grid, score)
        fn = compiled_chains(kernel, target, cfg.num_runs, cfg.num_iterations)
        out = run_fixed(fn, keys, starts, make_params(step_size))
        out.update(step_size=step_size, pilot=rows, kernel=kernel,
                   params=make_params(step_size))
        results[name] = out
        print(f"{name}: step {step_size:g}, acceptance {out['accepted'].mean():.3f}, "
              f"{out['num_grads'].mean():.1f} grad-eq/iteration, {out['wall_s']:.1f} s",
              flush=True)
    return results


def run_bandit_msd(target, cfg: Config, seed: int, starts, step_size: float,
                   objective: str = "esjd") -> dict:
    """The corrected MSD tuned by GP-UCB over `BANDIT_BOX` (log scale) on ``objective``
    (`BANDIT_OBJECTIVES`) during the burn-in (super-transitions of ``bandit_steps``
    iterations), then frozen: ``num_iterations`` in all, the burn-in's draws dropped. A
    super-transition fails only when more than `MAX_PILOT_DIVERGENCE` of its steps
    diverged (the pilot's rule)."""
    from adaptmc import api, recipes
    from adaptmc.tuners import make_box

    kernel = explicit_msd_kernel(target.info["msd_geometry"], metropolis=True)
    steps = cfg.bandit_steps
    warmup = cfg.burn_in // steps
    params = ExplicitMSDParams(step_size=step_size, refresh_angle=PERSISTENCE)
    plan = recipes.manual(
        target, kernel=kernel, tuner="gp-ucb", refresh_angle=PERSISTENCE,
        step_size=step_size, box=make_box(BANDIT_BOX, log=tuple(BANDIT_BOX)),
        objective=objective, max_divergence_rate=MAX_PILOT_DIVERGENCE, warmup=warmup,
        adapt_until=warmup, super_transitions=cfg.num_iterations // steps,
        budget=steps * kernel.cost(params), seed=seed, name=f"msd-gp-ucb-{objective}",
    )
    flat = dataclasses.replace(target, unravel=lambda x: x, constrain=None)  # draws as "x"
    result = api.run_plan(flat, plan, chains=cfg.num_runs, seed=seed,
                          initial_positions=np.asarray(starts), progress=False)
    tuned = result.params
    return {"positions": np.asarray(result.idata.posterior["x"]),
            "num_grads_total": float(result.num_grads),
            "wall_s": result.wall_s - result.compile_s,
            "tuned_step_size": float(np.median(np.asarray(tuned.step_size))),
            "tuned_angle": float(np.median(np.asarray(tuned.refresh_angle))),
            "kernel": kernel, "params": params._replace(
                step_size=float(np.median(np.asarray(tuned.step_size))))}


def floor_note(target) -> str:
    """The true function's normalised error on this test draw: the level no predictor
    beats but by the noise of the draw."""
    x_test, y_test = target.info["test"]
    truth = true_function(np.asarray(x_test))
    floor = float(np.mean((truth - np.asarray(y_test)) ** 2) / NOISE_SD**2)
    return (f"The true function scores {floor:.3f} on this test draw. The data are a fresh "
            "draw of MacKay's process, not the paper's set: levels differ from the paper's "
            "by the draw.")


def run_manifold(out, quick: bool = False, force: bool = False, seed: int = 0,
                 config: Config | None = None) -> int:
    """``adaptmc-lab reproduce manifold [--quick]``: the table beside the paper's, the cost
    ratio, the autocorrelations (``fig1.png``); ``config`` replaces `FULL` / `QUICK` (from
    Python, for a reduced protocol)."""
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
    for label, objective in BANDIT_OBJECTIVES.items():
        tick = time.perf_counter()
        results[f"MSD (GP-UCB, {label})"] = run_bandit_msd(
            target, cfg, seed, starts, results["MSD + MH"]["step_size"], objective)
        print(f"MSD (GP-UCB, {label}): {time.perf_counter() - tick:.1f} s", flush=True)
    flops = {name: flops_per_iteration(r["kernel"], r["params"], target, starts[0])
             for name, r in results.items()}
    rows = evaluate(target, results, cfg, flops)
    line = cost_line(rows)
    report = format_report(rows, cfg, quick, floor_note(target) + "\n\n" + line)
    plot_autocorrelations(rows, out / "fig1.png")
    (out / "results.json").write_text(json.dumps({"config": cfg._asdict(), "rows": rows,
                                                  "paper": PAPER_ROWS}, indent=1))
    (out / "report.md").write_text(report)
    print(report)
    return 0
