"""Figures of a finished run: what the tuner learned and what it tried.

Reads a run's InferenceData ``tuning`` group (one row per super-transition: the parameters
run, the reward, acceptance, ``tuner_s``) and its ``tuner_config`` attribute (the JSON facts of
``Tuner.describe``: box, surrogate hyperparameters, schedule, wrappers), and refits the
tuner's surrogate from them with the recorded hyperparameters (no sampling happens here):

- `plot_reward_surface`: the surrogate's mean of the normalised reward over the box, with the
  tried settings (as Wang 2012, Figs. 4.1-4.2);
- `plot_slice`: a slice through the best setting, mean +/- sd, with the acquisition the next
  proposal would maximise below it (as Wang 2012, Figs. 4.1-4.2);
- `plot_tuning_trace`: reward and parameters against super-transition, with a mark where
  tuning stopped.

Every title and axis is in plain words with units (`REWARD_LABELS`, `PARAMETER_LABELS`,
`describe_tuner`). The posterior's own figures (trace, rank, energy, pair) are
`adaptmc.posterior_plots` (`write_posterior_plots`, also importable from here).

Without a recorded ``tuner_config`` (runs written before it existed) the GP of `gp_ucb` with
its default hyperparameters is refitted over a box spanning the tried settings.
Only matplotlib's object API is used (``Figure``), so no display or pyplot state is needed.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

import numpy as np

from adaptmc.io import save_figure
from adaptmc.posterior_plots import write_posterior_plots as write_posterior_plots
from adaptmc.run import RECORD_FIELDS
from adaptmc.tuners import acquisition as acq
from adaptmc.tuners.annealed import ANNEAL_RATE
from adaptmc.tuners.box import Box, make_box, scale_unit, to_unit
from adaptmc.tuners.describe import box_from_config, innermost
from adaptmc.tuners.gp import GPPosterior, gp_predict, unique_points
from adaptmc.tuners.nig import parametric_predict
from adaptmc.tuners.schedules import exponential, schedule_from_config
from adaptmc.tuners.surrogate import (
    GPConfig,
    fit_gp,
    fit_nig,
    gp_config_from,
    nig_config_from,
    normalise_rewards,
)

REWARD_LABELS = {
    "lag_one_ess_per_grad": "effective draws per 1000 gradients (lag-one estimate)",
    "robust_ess_per_grad": "effective draws per 1000 gradients (slowest of x, x^2, tails)",
    "esjd_per_grad": "squared jump distance per gradient",
    "esjd_per_sqrt_cost": "squared jump distance per step / sqrt(gradients per step)",
    "autocorrelation_score": "1 - mean |autocorrelation| (1: independent draws)",
    "min_ess_per_grad": "smallest effective draws per gradient",
    "chees_per_grad": "ChEES (change in squared distance from the mean) per gradient",
}
"""The reward axis of each objective (`adaptmc.objectives`), by its function's name."""

PARAMETER_LABELS = {
    "step_size": "step size (eps)",
    "num_leapfrog": "leapfrog steps per draw (L)",
    "refresh_angle": "momentum refresh angle (radians)",
    "jitter": "step-size jitter (fraction)",
}

_TUNER_WORDS = {
    "gp-ucb": "Gaussian-process bandit (GP-UCB)", "parametric": "parametric bandit",
    "hedge": "GP-Hedge bandit", "sir": "resampling bandit (SIR)",
    "sir-mixture": "resampling bandit (SIR mixture)", "random": "random search",
    "grid": "grid of settings", "dual-averaging": "dual averaging of the step size",
    "fixed": "fixed setting", "moving-box": "search box that moves",
    "stop": "stops once confident", "freeze": "frozen after tuning",
    "mass": "after a mass-matrix warm-up",
}


def reward_label(objective: str | None) -> str:
    """The reward axis for the objective named ``objective`` (its function's name)."""
    name = str(objective or "none").split("_tolerating_")[0]
    return REWARD_LABELS.get(name, f"reward ({name.replace('_', ' ')})")


def parameter_label(name: str) -> str:
    return PARAMETER_LABELS.get(name, name.replace("_", " "))


def describe_tuner(name: str | None) -> str:
    """A tuner's name (``stop+moving-box+gp-ucb``) in plain words."""
    parts = [p for p in str(name or "").split("+") if p]
    words = [_TUNER_WORDS.get(p, p.replace("-", " ")) for p in reversed(parts)]
    return ", ".join(words) or "tuner"


def tuning_record(idata) -> dict:
    """The ``tuning`` group as arrays: ``names`` (the tuned parameters), ``points: (n, d)``,
    ``rewards: (n,)`` as the tuner saw them (NaN where a super-transition diverged), every
    recorded field by name, and ``tuner_config``: the recorded ``Tuner.describe`` facts (a
    dict), or None."""
    if "tuning" not in idata.groups():
        raise ValueError("the InferenceData has no 'tuning' group (was it written by run()?)")
    tuning = idata["tuning"]
    names = tuple(v for v in tuning.data_vars if v not in RECORD_FIELDS)
    out = {k: np.asarray(tuning[k].values) for k in tuning.data_vars}
    out["names"] = names
    out["points"] = np.stack([out[n] for n in names], axis=1) if names else np.zeros(
        (len(out["reward"]), 0))
    rewards = np.asarray(out["reward"], dtype=float)
    if "divergences" in out:  # a divergent super-transition is a failure to the tuner
        rewards = np.where(np.asarray(out["divergences"]) > 0, np.nan, rewards)
    out["rewards"] = rewards
    config = tuning.attrs.get("tuner_config")
    out["tuner_config"] = json.loads(config) if isinstance(config, str) else config
    out["objective"] = tuning.attrs.get("objective")
    adapted = int(tuning.attrs.get("adapted", -1))
    out["adapted"] = adapted if 0 <= adapted < len(rewards) else None
    attrs = getattr(idata, "attrs", None) or {}
    out["gradient_budget"] = attrs.get("gradient_budget")
    return out


def policy_window(tuner_config: Mapping | None, num_rows: int) -> tuple[int, int]:
    """``(start, stop)``: the super-transitions whose rewards the innermost policy saw, from
    the recorded wrappers (a mass warm-up hides its first ``num_warmup`` super-transitions,
    less the terminal ones with ``warm_start``; `freeze` hides all after its ``after``
    updates, a stop rule all after it fired). ``(0, num_rows)`` without wrappers."""
    start, stop = 0, num_rows
    facts = tuner_config
    while facts is not None:
        if facts.get("wrapper") == "freeze":
            stop = min(stop, start + int(facts["after"]))
        elif facts.get("wrapper") == "stop" and facts.get("stopped_at") is not None:
            stop = min(stop, start + int(facts["stopped_at"]))
        elif facts.get("wrapper") == "mass_adaptation":
            hidden = int(facts["num_warmup"]) - (int(facts["terminal"])
                                                  if facts.get("warm_start") else 0)
            start += hidden
        facts = facts.get("inner")
    return min(start, num_rows), max(min(stop, num_rows), min(start, num_rows))


def fit_surrogate(box: Box, points: np.ndarray, rewards: np.ndarray,
                  config: GPConfig | None = None) -> GPPosterior:
    """The GP of the GP policies on ``points: (n, d)`` (box units) and raw ``rewards: (n,)``
    (normalised to [0, 1], failures 0), with the hyperparameters ``config`` (default
    ``GPConfig()``)."""
    return fit_gp(box, {"points": points, "rewards": rewards}, config)


class Refit(NamedTuple):
    """A refitted surrogate: ``predict(u: (m, d)) -> (mean (m,), sd (m,))`` in unit
    coordinates, ``acquisition(u: (m, d)) -> (m,)`` that the policy's next proposal would
    maximise, and names for the axes."""

    predict: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    acquisition: Callable[[np.ndarray], np.ndarray]
    surrogate_label: str
    acquisition_label: str


def refit_surrogate(box: Box, points: np.ndarray, rewards: np.ndarray,
                    facts: Mapping | None = None) -> Refit:
    """The policy's surrogate refitted with its recorded ``facts`` (the innermost
    ``tuner_config``): the NIG mixture with the recorded centres for ``parametric``, else the
    GP with the recorded `GPConfig` (defaults for what is not recorded)."""
    facts = {} if facts is None else facts
    state = {"points": points, "rewards": rewards}
    n = max(len(rewards), 1)
    if facts.get("surrogate") == "nig":
        model = fit_nig(box, state, np.asarray(facts["centres"]), nig_config_from(facts))
        tried = to_unit(box, unique_points(points, rewards)[0])
        incumbent = float(np.max(parametric_predict(model, tried)[0]))
        return Refit(lambda u: parametric_predict(model, u),
                     acq.nig_mixture_ei(model, incumbent), "NIG mean", "Student-t EI")
    post = fit_surrogate(box, points, rewards, gp_config_from(facts))
    if facts.get("policy") == "sir":
        temperature = float(facts["temperature"])

        def resampling(u):
            logits = gp_predict(post, u)[0] / temperature
            return np.exp(logits - logits.max())

        return Refit(lambda u: gp_predict(post, u), resampling, "GP mean",
                     "SIR weight (relative)")
    schedule = schedule_from_config(facts) or exponential(ANNEAL_RATE)
    beta = acq.ucb_beta(n, box.dim, float(facts.get("delta", 0.1)))
    return Refit(lambda u: gp_predict(post, u),
                 lambda u: acq.ucb(*gp_predict(post, u), beta, schedule(n)), "GP mean",
                 "UCB acquisition")


def _best_point(box: Box, refit: Refit, points: np.ndarray, rewards: np.ndarray,
                resolution: int = 60):
    """The surrogate's peak: the highest mean on a grid over a box of one or two
    dimensions (where the surface and slice are drawn), else the best tried setting."""
    if box.dim <= 2:
        axes = np.meshgrid(*[np.linspace(0.0, 1.0, resolution)] * box.dim)
        unit = np.stack([a.ravel() for a in axes], axis=1)
        return scale_unit(box, unit[int(np.argmax(refit.predict(unit)[0]))][None])[0]
    pts, _, _ = unique_points(points, rewards)
    return pts[int(np.argmax(refit.predict(to_unit(box, pts))[0]))]


def _set_scale(ax, box: Box, k: int, axis: str) -> None:
    """A log axis for a log dimension, labelled at 1, 2, 5 times powers of ten in plain
    numbers (``0.02``, ``50``), no minor labels: matplotlib's default labels every minor
    tick of a short log range, and they collide."""
    if box.log is not None and box.log[k]:
        from matplotlib import ticker

        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
        target = ax.xaxis if axis == "x" else ax.yaxis
        target.set_major_locator(ticker.LogLocator(base=10.0, subs=(1.0, 2.0, 5.0),
                                                   numticks=8))
        target.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
        target.set_minor_formatter(ticker.NullFormatter())


def plot_reward_surface(ax, box: Box, points: np.ndarray, rewards: np.ndarray,
                        dims: tuple[int, int] = (0, 1), resolution: int = 60,
                        facts: Mapping | None = None, frozen: np.ndarray | None = None):
    """Contour of the surrogate mean over two box dimensions (others at the best setting) with
    the tried settings, failures as crosses, the surface's peak as a star and the setting
    the run sampled with (``frozen``, when given) as a diamond. ``facts``: the policy's
    recorded facts (`refit_surrogate`)."""
    refit = refit_surrogate(box, points, rewards, facts)
    best = _best_point(box, refit, points, rewards, resolution)
    i, j = dims
    grid = np.linspace(0.0, 1.0, resolution)
    ui, uj = np.meshgrid(grid, grid)
    unit = np.tile(to_unit(box, best), (ui.size, 1))
    unit[:, i], unit[:, j] = ui.ravel(), uj.ravel()
    mean = refit.predict(unit)[0].reshape(ui.shape)
    values = scale_unit(box, unit)  # continuous axes: integers not rounded
    xi, xj = values[:, i].reshape(ui.shape), values[:, j].reshape(uj.shape)
    filled = ax.contourf(xi, xj, mean, levels=20, cmap="viridis")
    ax.figure.colorbar(filled, ax=ax, label="predicted reward (0: worst tried, 1: best)")
    ok = np.isfinite(rewards)
    ax.scatter(points[ok, i], points[ok, j], s=14, c="white", edgecolors="black",
               linewidths=0.5, label="tried")
    if (~ok).any():
        ax.scatter(points[~ok, i], points[~ok, j], s=20, c="red", marker="x", label="failed")
    ax.scatter([best[i]], [best[j]], s=120, c="gold", marker="*", edgecolors="black",
               label="predicted best")
    if frozen is not None:
        ax.scatter([frozen[i]], [frozen[j]], s=60, c="none", marker="D", edgecolors="red",
                   linewidths=1.5, label="sampled with")
    ax.set_xlabel(parameter_label(box.names[i]))
    ax.set_ylabel(parameter_label(box.names[j]))
    ax.set_title("Predicted reward over the search box")
    _set_scale(ax, box, i, "x")
    _set_scale(ax, box, j, "y")
    ax.legend(loc="upper right", fontsize=7)
    return ax


def plot_slice(ax_mean, ax_acq, box: Box, points: np.ndarray, rewards: np.ndarray, dim: int = 0,
               resolution: int = 200, facts: Mapping | None = None):
    """A slice along box dimension ``dim`` through the best setting: surrogate mean +/- sd with
    the tried settings on that slice, and below it the acquisition the next proposal would
    maximise (for the GP policies the annealed UCB ``mu + p_n sqrt(beta_n) sd`` with the
    recorded schedule and ``delta``). ``facts`` as in `plot_reward_surface`."""
    refit = refit_surrogate(box, points, rewards, facts)
    best = _best_point(box, refit, points, rewards)
    unit = np.tile(to_unit(box, best), (resolution, 1))
    unit[:, dim] = np.linspace(0.0, 1.0, resolution)
    x = scale_unit(box, unit)[:, dim]  # continuous axis: integers not rounded
    mu, sd = refit.predict(unit)
    ax_mean.plot(x, mu, color="C0", label=refit.surrogate_label)
    ax_mean.fill_between(x, mu - sd, mu + sd, color="C0", alpha=0.25, label="mean +/- sd")
    others = np.delete(np.arange(box.dim), dim)
    on_slice = np.all(np.isclose(points[:, others], best[others]), axis=1) if len(others) else \
        np.ones(len(points), bool)
    log = bool(gp_config_from(facts or {}).log_rewards)
    ax_mean.scatter(points[on_slice, dim], normalise_rewards(rewards, log)[on_slice], s=14,
                    c="black", zorder=3, label="rewards on this slice")
    ax_mean.set_ylabel(f"{'log ' if log else ''}reward (0: worst tried, 1: best)")
    fixed = ", ".join(f"{parameter_label(box.names[k])} = {best[k]:.3g}" for k in others)
    ax_mean.set_title(f"Predicted reward at {fixed}" if fixed else "Predicted reward")
    ax_mean.legend(fontsize=7)
    value = refit.acquisition(unit)
    ax_acq.plot(x, value, color="C1")
    ax_acq.axvline(x[int(np.argmax(value))], color="C1", linestyle=":")
    ax_acq.set_ylabel(f"next try\n({refit.acquisition_label})")
    ax_acq.set_xlabel(parameter_label(box.names[dim]))
    _set_scale(ax_acq, box, dim, "x")
    return ax_mean, ax_acq


def plot_tuning_trace(axes, record: dict):
    """Reward (top, labelled with its unit, `reward_label`) and each tuned parameter against
    super-transition, with a dashed line where tuning stopped (``record["adapted"]``);
    ``axes`` holds ``1 + len(record['names'])`` axes."""
    steps = np.arange(len(record["rewards"]))
    rewards = record["rewards"]
    ok = np.isfinite(rewards)
    axes[0].plot(steps[ok], rewards[ok], ".-", color="C0")
    if (~ok).any():
        low = np.nanmin(rewards) if ok.any() else 0.0
        axes[0].scatter(steps[~ok], np.full((~ok).sum(), low), c="red", marker="x",
                        label="failed")
        axes[0].legend(fontsize=7)
    axes[0].set_ylabel(textwrap.fill(reward_label(record.get("objective")), 28), fontsize=8)
    for ax, (k, name) in zip(axes[1:], enumerate(record["names"]), strict=False):
        ax.step(steps, record["points"][:, k], where="post", color="C2")
        ax.set_ylabel(textwrap.fill(parameter_label(name), 28), fontsize=8)
    if record.get("adapted") is not None:
        for ax in axes:
            ax.axvline(record["adapted"] - 0.5, color="black", linestyle="--", linewidth=1)
        axes[0].text(record["adapted"] - 0.5, 1.0, " tuning stopped, setting frozen",
                     transform=axes[0].get_xaxis_transform(), va="top", fontsize=7)
    budget = record.get("gradient_budget")
    each = f"{int(budget)} gradients per chain" if budget is not None else "a fixed budget"
    axes[-1].set_xlabel(f"super-transition ({each} each)")
    return axes


def infer_box(record: dict) -> Box | None:
    """The tuner's box as recorded in ``record["tuner_config"]``; else a box spanning the tried
    settings (None when a parameter never changed)."""
    facts = innermost(record.get("tuner_config"))
    if facts is not None and facts.get("box") is not None:
        return box_from_config(facts["box"])
    points = record["points"]
    if points.shape[1] == 0 or len(points) < 2:
        return None
    low, high = points.min(0), points.max(0)
    if np.any(high <= low):
        return None
    integer = tuple(n for n, col in zip(record["names"], points.T, strict=True)
                    if n == "num_leapfrog" and np.all(col == np.round(col)))
    return make_box({n: (lo, hi) for n, lo, hi in zip(record["names"], low, high, strict=True)},
                    integer)


def _write_trace(record: dict, out_path: Path, title: str, shaded: int, dpi: int) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 2.0 * (1 + len(record["names"]))), layout="constrained")
    axes = fig.subplots(1 + len(record["names"]), 1, sharex=True, squeeze=False)[:, 0]
    plot_tuning_trace(axes, record)
    if shaded > 0:
        for ax in axes:
            ax.axvspan(-0.5, shaded - 0.5, color="0.85", zorder=0)
        axes[0].text(0.0, 0.0, " mass-matrix warm-up", transform=axes[0].transAxes,
                     va="bottom", fontsize=7)
    axes[0].set_title(textwrap.fill(title, 70), fontsize=10)
    save_figure(fig, out_path, dpi)


def write_tuning_plots(idata, out_dir: str | Path, box: Box | None = None,
                       dpi: int = 110, skip: int | None = None) -> list[Path]:
    """Write ``tuning_trace.png`` and, when a box is given, recorded or can be inferred from
    the tried settings, ``reward_surface.png`` (two or more parameters) and
    ``reward_slice.png`` into ``out_dir``. The first ``skip`` super-transitions were not the
    tuner's (mass-adaptation warm-up, `adaptmc.tuners.mass`): the trace shades them and the
    surface and slice leave them out, as the tuner never saw them. ``skip=None`` takes the
    window the policy saw from the recorded wrappers (`policy_window`). Returns the paths
    written."""
    from matplotlib.figure import Figure

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    record = tuning_record(idata)
    config = record["tuner_config"]
    start, stop = policy_window(config, len(record["rewards"]))
    if skip is not None:
        start = min(skip, len(record["rewards"]))
        stop = max(stop, start)
    written = [out_dir / "tuning_trace.png"]
    tuner = describe_tuner(idata["tuning"].attrs.get("tuner"))
    _write_trace(record, written[-1], f"Tuning: {tuner}", start, dpi)
    frozen = record["points"][-1] if record.get("adapted") is not None else None

    box = infer_box({**record, "points": record["points"][start:stop]}) if box is None else box
    record = {**record, "points": record["points"][start:stop],
              "rewards": record["rewards"][start:stop]}
    ok = np.isfinite(record["rewards"])
    if box is None or not ok.any() or tuple(record["names"]) != tuple(box.names):
        return written
    points, rewards, facts = record["points"], record["rewards"], innermost(config)
    if box.dim >= 2:
        fig = Figure(figsize=(6, 4.8), layout="constrained")
        plot_reward_surface(fig.subplots(), box, points, rewards, facts=facts, frozen=frozen)
        written.append(out_dir / "reward_surface.png")
        save_figure(fig, written[-1], dpi)
    fig = Figure(figsize=(6, 5), layout="constrained")
    ax_mean, ax_acq = fig.subplots(2, 1, sharex=True, height_ratios=(2, 1))
    plot_slice(ax_mean, ax_acq, box, points, rewards, dim=0, facts=facts)
    written.append(out_dir / "reward_slice.png")
    save_figure(fig, written[-1], dpi)
    return written
