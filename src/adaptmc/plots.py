"""Figures of a finished run: what the tuner learned and what it tried.

Reads a run's InferenceData ``tuning`` group (one row per super-transition: the parameters
run, the reward, acceptance, ``tuner_s``) and refits the tuner's GP surrogate from it with
`adaptmc.tuners.gp` (no sampling happens here):

- `plot_reward_surface`: the GP mean of the normalised reward over the box, with the tried
  settings (as Wang 2012, Figs. 4.1-4.2);
- `plot_slice`: a slice through the best setting, mean +/- sd, with the annealed UCB
  acquisition below it (as Wang 2012, Figs. 4.1-4.2);
- `plot_tuning_trace`: reward and parameters against super-transition.

Only matplotlib's object API is used (``Figure``), so no display or pyplot state is needed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adaptmc.run import RECORD_FIELDS
from adaptmc.tuners import acquisition as acq
from adaptmc.tuners.bandit import ANNEAL_RATE, SIGNAL_VAR, normalise_rewards
from adaptmc.tuners.box import Box, make_box, scale_unit, to_unit
from adaptmc.tuners.gp import GPPosterior, gp_fit, gp_predict, unique_points
from adaptmc.tuners.schedules import Schedule, exponential


def tuning_record(idata) -> dict:
    """The ``tuning`` group as arrays: ``names`` (the tuned parameters), ``points: (n, d)``,
    ``rewards: (n,)`` and every recorded field by name."""
    if "tuning" not in idata.groups():
        raise ValueError("the InferenceData has no 'tuning' group (was it written by run()?)")
    tuning = idata["tuning"]
    names = tuple(v for v in tuning.data_vars if v not in RECORD_FIELDS)
    out = {k: np.asarray(tuning[k].values) for k in tuning.data_vars}
    out["names"] = names
    out["points"] = np.stack([out[n] for n in names], axis=1) if names else np.zeros(
        (len(out["reward"]), 0))
    out["rewards"] = np.asarray(out["reward"], dtype=float)
    return out


def fit_surrogate(box: Box, points: np.ndarray, rewards: np.ndarray, alpha: float = 0.2,
                  signal_var: float = SIGNAL_VAR, noise_var: float = 0.01) -> GPPosterior:
    """The GP of `adaptmc.tuners.gp_ucb` on ``points: (n, d)`` (box units) and raw
    ``rewards: (n,)`` (normalised to [0, 1], failures 0)."""
    return gp_fit(to_unit(box, points), normalise_rewards(rewards), np.full(box.dim, alpha),
                  signal_var, noise_var)


def _best_point(box: Box, post: GPPosterior, points: np.ndarray, rewards: np.ndarray):
    pts, _, _ = unique_points(points, rewards)
    return pts[int(np.argmax(gp_predict(post, to_unit(box, pts))[0]))]


def _set_scale(ax, box: Box, k: int, axis: str) -> None:
    if box.log is not None and box.log[k]:
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")


def plot_reward_surface(ax, box: Box, points: np.ndarray, rewards: np.ndarray,
                        dims: tuple[int, int] = (0, 1), resolution: int = 60, **gp_kwargs):
    """Contour of the GP mean over two box dimensions (others at the best setting) with the
    tried settings, failures as crosses, the best as a star."""
    post = fit_surrogate(box, points, rewards, **gp_kwargs)
    best = _best_point(box, post, points, rewards)
    i, j = dims
    grid = np.linspace(0.0, 1.0, resolution)
    ui, uj = np.meshgrid(grid, grid)
    unit = np.tile(to_unit(box, best), (ui.size, 1))
    unit[:, i], unit[:, j] = ui.ravel(), uj.ravel()
    mean = gp_predict(post, unit)[0].reshape(ui.shape)
    values = scale_unit(box, unit)  # continuous axes: integers not rounded
    xi, xj = values[:, i].reshape(ui.shape), values[:, j].reshape(uj.shape)
    filled = ax.contourf(xi, xj, mean, levels=20, cmap="viridis")
    ax.figure.colorbar(filled, ax=ax, label="GP mean of normalised reward")
    ok = np.isfinite(rewards)
    ax.scatter(points[ok, i], points[ok, j], s=14, c="white", edgecolors="black",
               linewidths=0.5, label="tried")
    if (~ok).any():
        ax.scatter(points[~ok, i], points[~ok, j], s=20, c="red", marker="x", label="failed")
    ax.scatter([best[i]], [best[j]], s=120, c="gold", marker="*", edgecolors="black",
               label="best")
    ax.set_xlabel(box.names[i])
    ax.set_ylabel(box.names[j])
    _set_scale(ax, box, i, "x")
    _set_scale(ax, box, j, "y")
    ax.legend(loc="upper right", fontsize=7)
    return ax


def plot_slice(ax_mean, ax_acq, box: Box, points: np.ndarray, rewards: np.ndarray, dim: int = 0,
               schedule: Schedule | None = None, delta: float = 0.1, resolution: int = 200,
               **gp_kwargs):
    """A slice along box dimension ``dim`` through the best setting: GP mean +/- sd with the
    tried settings on that slice, and below it the annealed UCB acquisition
    ``mu + p_n sqrt(beta_n) sd`` that the next proposal would maximise (``schedule`` default
    ``exp(-0.01 (i - 1))``)."""
    schedule = exponential(ANNEAL_RATE) if schedule is None else schedule
    post = fit_surrogate(box, points, rewards, **gp_kwargs)
    best = _best_point(box, post, points, rewards)
    unit = np.tile(to_unit(box, best), (resolution, 1))
    unit[:, dim] = np.linspace(0.0, 1.0, resolution)
    x = scale_unit(box, unit)[:, dim]  # continuous axis: integers not rounded
    mu, sd = gp_predict(post, unit)
    ax_mean.plot(x, mu, color="C0", label="GP mean")
    ax_mean.fill_between(x, mu - sd, mu + sd, color="C0", alpha=0.25, label="mean +/- sd")
    others = np.delete(np.arange(box.dim), dim)
    on_slice = np.all(np.isclose(points[:, others], best[others]), axis=1) if len(others) else \
        np.ones(len(points), bool)
    ax_mean.scatter(points[on_slice, dim], normalise_rewards(rewards)[on_slice], s=14,
                    c="black", zorder=3, label="rewards on this slice")
    ax_mean.set_ylabel("normalised reward")
    fixed = ", ".join(f"{box.names[k]} = {best[k]:.3g}" for k in others)
    ax_mean.set_title(f"slice at {fixed}" if fixed else "reward")
    ax_mean.legend(fontsize=7)
    n = max(len(rewards), 1)
    value = acq.ucb(mu, sd, acq.ucb_beta(n, box.dim, delta), schedule(n))
    ax_acq.plot(x, value, color="C1")
    ax_acq.axvline(x[int(np.argmax(value))], color="C1", linestyle=":")
    ax_acq.set_ylabel("UCB acquisition")
    ax_acq.set_xlabel(box.names[dim])
    _set_scale(ax_acq, box, dim, "x")
    return ax_mean, ax_acq


def plot_tuning_trace(axes, record: dict):
    """Reward (top) and each tuned parameter against super-transition; ``axes`` holds
    ``1 + len(record['names'])`` axes."""
    steps = np.arange(len(record["rewards"]))
    rewards = record["rewards"]
    ok = np.isfinite(rewards)
    axes[0].plot(steps[ok], rewards[ok], ".-", color="C0")
    if (~ok).any():
        low = np.nanmin(rewards) if ok.any() else 0.0
        axes[0].scatter(steps[~ok], np.full((~ok).sum(), low), c="red", marker="x",
                        label="failed")
        axes[0].legend(fontsize=7)
    axes[0].set_ylabel("reward")
    for ax, (k, name) in zip(axes[1:], enumerate(record["names"]), strict=False):
        ax.step(steps, record["points"][:, k], where="post", color="C2")
        ax.set_ylabel(name)
    axes[-1].set_xlabel("super-transition")
    return axes


def infer_box(record: dict) -> Box | None:
    """A box spanning the tried settings (used when the run's box is unknown), or None when a
    parameter never changed."""
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


def write_tuning_plots(idata, out_dir: str | Path, box: Box | None = None,
                       dpi: int = 110, skip: int = 0) -> list[Path]:
    """Write ``tuning_trace.png`` and, when a box is given or can be inferred from the tried
    settings, ``reward_surface.png`` (two or more parameters) and ``reward_slice.png`` into
    ``out_dir``. The first ``skip`` super-transitions were not the tuner's (mass-adaptation
    warm-up, `adaptmc.tuners.mass`): the trace shades them and the surface and slice leave
    them out, as the tuner never saw them. Returns the paths written."""
    from matplotlib.figure import Figure

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    record = tuning_record(idata)
    written = []

    fig = Figure(figsize=(7, 2.0 * (1 + len(record["names"]))), layout="constrained")
    axes = fig.subplots(1 + len(record["names"]), 1, sharex=True, squeeze=False)[:, 0]
    plot_tuning_trace(axes, record)
    if skip > 0:
        for ax in axes:
            ax.axvspan(-0.5, skip - 0.5, color="0.85", zorder=0)
        axes[0].text(0.0, 1.0, " mass warm-up", transform=axes[0].transAxes, va="top",
                     fontsize=7)
    axes[0].set_title(f"tuner {idata['tuning'].attrs.get('tuner', '?')}")
    written.append(out_dir / "tuning_trace.png")
    fig.savefig(written[-1], dpi=dpi)

    record = {**record, "points": record["points"][skip:], "rewards": record["rewards"][skip:]}
    box = infer_box(record) if box is None else box
    ok = np.isfinite(record["rewards"])
    if box is None or not ok.any() or tuple(record["names"]) != tuple(box.names):
        return written
    points, rewards = record["points"], record["rewards"]
    if box.dim >= 2:
        fig = Figure(figsize=(6, 4.8), layout="constrained")
        plot_reward_surface(fig.subplots(), box, points, rewards)
        written.append(out_dir / "reward_surface.png")
        fig.savefig(written[-1], dpi=dpi)
    fig = Figure(figsize=(6, 5), layout="constrained")
    ax_mean, ax_acq = fig.subplots(2, 1, sharex=True, height_ratios=(2, 1))
    plot_slice(ax_mean, ax_acq, box, points, rewards, dim=0)
    written.append(out_dir / "reward_slice.png")
    fig.savefig(written[-1], dpi=dpi)
    return written
