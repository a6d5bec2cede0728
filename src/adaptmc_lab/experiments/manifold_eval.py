"""Scoring of `adaptmc_lab.experiments.manifold`: normalised test error, weight
autocorrelations (Fig. 1), cost in gradient-equivalents and flops, predictive ESS, and the
report beside Zlochin & Baram's rows."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc_lab.datasets.robot_arm import NOISE_SD
from adaptmc_lab.models import bnn

# Zlochin & Baram (2000), Sec. 5.3: normalised test error, mean and sd over 10 runs; Sec.
# 5.2: flops per iteration.
PAPER_ROWS = {"HMC30": (1.314, 0.074), "HMC100": (1.167, 0.044), "MSD": (1.161, 0.023)}
PAPER_FLOPS = {"HMC100": 4.8e6, "HMC30": 1.4e6, "MSD": 0.5e6}
LAGS = (1, 10, 50, 100)
FIGURE_LAGS = 50  # Fig. 1's horizontal axis
GROUPS = ("input_hidden", "hidden_output")


def normalised_error(model, positions, x_test, y_test) -> float:
    """Squared error of the predictive mean over ``positions: (draws, dim)``, averaged over
    cases and outputs, in units of the noise variance ``0.05^2``."""
    mean = bnn.predictive_mean(model, jnp.asarray(positions), x_test)
    return float(jnp.mean((mean - y_test) ** 2) / NOISE_SD**2)


def group_indices(model) -> dict:
    """Flat indices of each weight group (``ravel_pytree`` order)."""
    lay = bnn.layout(model)
    index = lay.unravel_weights(jnp.arange(lay.num_weights, dtype=jnp.float64))
    return {g: np.asarray(index[g]).astype(int).ravel() for g in GROUPS}


def autocorrelations(positions: np.ndarray, indices: np.ndarray, lags=LAGS) -> list:
    """Autocorrelation at ``lags`` (iterations), averaged over runs and the weights in
    ``indices``; ``positions: (runs, draws, dim)``."""
    x = positions[:, :, indices]
    x = x - x.mean(axis=1, keepdims=True)
    n = x.shape[1]
    spectrum = np.fft.rfft(x, n=2 * n, axis=1)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), axis=1)[:, :n]
    acf = acov / np.maximum(acov[:, :1], 1e-300)
    return [float(np.mean(acf[:, lag])) if lag < n else float("nan") for lag in lags]


def robust_min_ess(draws: np.ndarray) -> float:
    """`adaptmc.diagnostics.robust_ess` of ``draws: (chains, draws, quantities)``, its
    minimum (NaN-safe)."""
    from adaptmc.diagnostics import robust_ess

    return float(np.nanmin(robust_ess(draws)))


def predictive_ess(model, positions: np.ndarray, x_test) -> float:
    """`robust_min_ess` of the network outputs at the test inputs (``runs`` chains)."""
    runs, draws, dim = positions.shape
    flat = jnp.asarray(positions.reshape(runs * draws, dim))
    outputs = jax.jit(lambda p: bnn.predict_flat(model, p, x_test))(flat)
    outputs = np.asarray(outputs, dtype=np.float32).reshape(runs, draws, -1)
    return robust_min_ess(outputs)


def flops_per_iteration(kernel, params, target, position) -> float:
    """Flops of one iteration as XLA counts them (``cost_analysis`` of the compiled step).
    A fixed-length leapfrog loop (HMC) is a ``fori_loop`` whose body XLA counts once: its
    other ``L - 1`` steps are added at the flops of one compiled leapfrog step."""
    from adaptmc.kernels.integrators import IntegratorState, leapfrog
    from adaptmc.kernels.metrics import euclidean_metric

    def count(fn, *args) -> float:
        analysis = jax.jit(fn).lower(*args).compile().cost_analysis()
        analysis = analysis[0] if isinstance(analysis, list) else analysis
        return float(analysis["flops"])

    position = jnp.asarray(position)
    state = kernel.init(position, target)
    total = count(lambda key, s: kernel.step(key, s, target, params), jax.random.key(0), state)
    if hasattr(params, "num_leapfrog"):
        start = IntegratorState(position, position, *target.logdensity_and_grad(position))
        metric = euclidean_metric(params.inverse_mass)
        one = count(lambda s: leapfrog(s, params.step_size, target.logdensity_and_grad,
                                       metric), start)
        total += (int(params.num_leapfrog) - 1) * one
    return total


def _kept(name, out, cfg):
    """``(kept draws, gradient-equivalents per run, per iteration)``."""
    if "num_grads" in out:  # fixed settings: all iterations, burn-in to drop
        grads = out["num_grads"].sum(axis=1)
        return out["positions"][:, cfg.burn_in:], grads, float(out["num_grads"].mean())
    runs = out["positions"].shape[0]  # the bandit: its run dropped the burn-in
    per_run = out["num_grads_total"] / runs
    return out["positions"], np.full(runs, per_run), per_run / cfg.num_iterations


def _sampler_row(name, out, model, data, cfg, indices, flops) -> dict:
    """One row: test error per run, cost, autocorrelations, predictive ESS."""
    x_test, y_test = data
    kept, grads_per_run, per_iteration = _kept(name, out, cfg)
    thin = max(1, kept.shape[1] * cfg.predict_every // (cfg.num_iterations - cfg.burn_in))
    errors = [normalised_error(model, run[::thin], x_test, y_test) for run in kept]
    ess = predictive_ess(model, kept, x_test)
    total_grads = float(np.sum(grads_per_run))
    row = {
        "sampler": name, "step_size": out.get("step_size"),
        "tuned_step_size": out.get("tuned_step_size"), "tuned_angle": out.get("tuned_angle"),
        "error_mean": float(np.mean(errors)), "error_sd": float(np.std(errors, ddof=1)),
        "errors": errors, "grad_eq_per_iteration": per_iteration, "flops_per_iteration": flops,
        "wall_ms_per_iteration": 1e3 * float(out["wall_s"]) / cfg.num_iterations,
        "grads_per_run": float(np.mean(grads_per_run)), "wall_s": float(out["wall_s"]),
        "predictive_ess": ess, "ess_per_1k_grads": 1e3 * ess / total_grads,
        "ess_per_s": ess / float(out["wall_s"]), "num_kept": int(kept.shape[1]),
    }
    if "accepted" in out:
        row["acceptance"] = float(out["accepted"][:, cfg.burn_in:].mean())
        energy = out["energy_error"][:, cfg.burn_in:]
        row["mean_abs_energy_error"] = float(np.mean(np.abs(energy[np.isfinite(energy)])))
        row["divergences"] = int(out["divergent"].sum())
    for group, idx in indices.items():
        row[f"acf_{group}"] = autocorrelations(kept, idx)
        row[f"acf_curve_{group}"] = autocorrelations(kept, idx, range(FIGURE_LAGS + 1))
    return row


def evaluate(target, results: dict, cfg, flops: dict) -> list:
    """A row per sampler of ``results`` (see `_sampler_row`); ``flops`` per iteration."""
    model = target.info["bnn"]
    x_test, y_test = (jnp.asarray(a) for a in target.info["test"])
    indices = group_indices(model)
    return [_sampler_row(name, out, model, (x_test, y_test), cfg, indices, flops[name])
            for name, out in results.items()]


def cost_line(rows: list) -> str:
    """``MSD cost per iteration / HMC30's: R (flops), R' (gradient-equivalents)``, with the
    paper's ratio beside it."""
    by = {r["sampler"]: r for r in rows}
    msd, hmc30 = by["MSD"], by["HMC30"]
    flops = msd["flops_per_iteration"] / hmc30["flops_per_iteration"]
    grads = msd["grad_eq_per_iteration"] / hmc30["grad_eq_per_iteration"]
    paper = PAPER_FLOPS["MSD"] / PAPER_FLOPS["HMC30"]
    return (f"MSD cost per iteration / HMC30's: {flops:.2f} (flops), {grads:.2f} "
            f"(gradient-equivalents); the paper's: {paper:.2f} (flops)")


def _error_table(rows: list) -> list:
    lines = ["| sampler | eps | normalised test error (mean +/- sd) | paper | flops / iter "
             "| paper's flops / iter | grad-eq / iter | ms / iter | acceptance | mean abs dH "
             "| pred. ESS | ESS / 1k grad-eq |", "|---" * 12 + "|"]
    for r in rows:
        paper = PAPER_ROWS.get(r["sampler"])
        paper_text = f"{paper[0]:.3f} +/- {paper[1]:.3f}" if paper else "-"
        paper_flops = PAPER_FLOPS.get(r["sampler"])
        eps = (f"{r['step_size']:g}" if r["step_size"] is not None else
               f"tuned {r['tuned_step_size']:.3g} (theta {r['tuned_angle']:.2f})")
        lines.append(
            f"| {r['sampler']} | {eps} | {r['error_mean']:.3f} +/- {r['error_sd']:.3f} | "
            f"{paper_text} | {r['flops_per_iteration']:.3g} | "
            f"{f'{paper_flops:.2g}' if paper_flops else '-'} | "
            f"{r['grad_eq_per_iteration']:.1f} | {r['wall_ms_per_iteration']:.3f} | "
            f"{r.get('acceptance', float('nan')):.3f} | "
            f"{r.get('mean_abs_energy_error', float('nan')):.3f} | "
            f"{r['predictive_ess']:.0f} | {r['ess_per_1k_grads']:.3f} |")
    return lines


def format_report(rows: list, cfg, quick: bool, note: str = "") -> str:
    """Markdown: errors and costs beside the paper's, ``note`` below; autocorrelations."""
    lines = [f"Robot arm, {cfg.num_runs} runs x {cfg.num_iterations} iterations "
             f"(burn-in {cfg.burn_in}, every {cfg.predict_every}th predicts)"
             + (" -- QUICK" if quick else ""), "", *_error_table(rows)]
    lines += ["", note] if note else []
    lines += ["", "Weight autocorrelations per iteration (Fig. 1), mean over weights and runs:",
              "", "| sampler | " + " | ".join(f"ACF {g} lag {lag}" for g in GROUPS
                                              for lag in LAGS)
              + " |", "|---" * (1 + len(GROUPS) * len(LAGS)) + "|"]
    for r in rows:
        values = [v for g in GROUPS for v in r[f"acf_{g}"]]
        lines.append(f"| {r['sampler']} | " + " | ".join(f"{v:.2f}" for v in values) + " |")
    return "\n".join(lines) + "\n"


def plot_autocorrelations(rows: list, path) -> None:
    """Fig. 1: the autocorrelation of input-to-hidden (left) and hidden-to-output (right)
    weights against the lag, averaged over weights and runs, one line per sampler."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, group in zip(axes, GROUPS, strict=True):
        for r in rows:
            ax.plot(range(FIGURE_LAGS + 1), r[f"acf_curve_{group}"], label=r["sampler"])
        ax.set_title(group.replace("_", "-to-") + " weights")
        ax.set_xlabel("lag (iterations)")
        ax.axhline(0.0, color="grey", lw=0.5)
    axes[0].set_ylabel("autocorrelation")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
