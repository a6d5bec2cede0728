"""Tables and figures of the robot-arm reproduction (`adaptmc_lab.experiments.robot_arm`): the
literature's rows of Wang (2012), Table 4.1 beside the measured ones with the difference,
statistics over seeds and over the CV networks, predictive ESS per gradient and R-hat."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from adaptmc_lab.datasets import robot_arm as data_module

# Wang (2012), Table 4.1: test errors on the robot arm (noise floor 0.0050). The thesis' GP
# bandit row is its own; the parametric bandit's is Wang & de Freitas (2011), an L = 3520
# slice after discarding the first 1,500 samples.
LITERATURE = (
    ("MacKay (1992), Gaussian approximation", 0.00573, None),
    ("Neal (1996), HMC", 0.00554, None),
    ("Neal (1996), HMC with ARD", 0.00549, None),
    ("Rios Insua & Muller (1998)", 0.00620, None),
    ("Andrieu et al. (2001), RJMCMC", 0.00502, None),
    ("Wang (2012), GP-UCB adaptive HMC (mean over networks)", 0.00498, 0.00012),
    ("Wang & de Freitas (2011), parametric bandit", 0.00494, None),
)
# which measured row each literature row is compared with (difference = measured - literature)
COMPARED = {
    "Neal (1996), HMC": "expert",
    "Wang (2012), GP-UCB adaptive HMC (mean over networks)": "adaptive",
    "Wang & de Freitas (2011), parametric bandit": "parametric",
}

METHOD_LABELS = {
    "adaptive": "adaptive HMC, GP-UCB (CV reward)",
    "hedge": "adaptive HMC, GP-Hedge (CV reward)",
    "parametric": "adaptive HMC, parametric bandit (CV reward)",
    "expert": "HMC at expert settings",
    "nuts": "NUTS (BlackJAX, window adaptation)",
}
BANDIT_KEYS = {"gp-ucb": "adaptive", "hedge": "hedge", "parametric": "parametric"}


def _mean_sd(values) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    return (float(values.mean()),
            float(values.std(ddof=1)) if len(values) > 1 else float("nan"))


def summarise(per_seed: list) -> dict:
    """Per method, mean and sd over seeds of: the test error of the chain that predicts (the
    full-data network for the bandits), the mean / median / sd over the CV networks of their
    test errors (the thesis' statistic; bandits only), excess over the floor, predictive ESS
    per gradient (min and median over the 800 network outputs at the test inputs), the
    largest split R-hat of those outputs, gradients and wall time."""
    rows = {}
    floors = np.array([s["floor"] for s in per_seed])
    for name in METHOD_LABELS:
        if name not in per_seed[0]["methods"]:
            continue
        ms = [s["methods"][name] for s in per_seed]
        errors = np.array([m["test_error"] for m in ms])
        row = {
            "test_error": _mean_sd(errors),
            "excess": _mean_sd(errors - floors),
            "ess_min_per_grad": _mean_sd([m["pred_ess_min"] / m["num_grads"] for m in ms]),
            "ess_median_per_grad": _mean_sd([m["pred_ess_median"] / m["num_grads"]
                                             for m in ms]),
            "rhat_max": float(np.max([m["pred_rhat_max"] for m in ms])),
            "num_grads": float(np.mean([m["num_grads"] for m in ms])),
            "network_grads": float(np.mean([m["network_grads"] for m in ms])),
            "wall_s": float(np.mean([m["wall_s"] for m in ms])),
        }
        if "network_errors" in ms[0]:
            nets = [np.asarray(m["network_errors"], float) for m in ms]
            row["networks_mean"] = _mean_sd([n.mean() for n in nets])
            row["networks_median"] = _mean_sd([np.median(n) for n in nets])
            row["networks_sd"] = _mean_sd([n.std(ddof=1) if n.size > 1 else np.nan
                                           for n in nets])
        rows[name] = row
    return rows


def _pm(mean: float, sd: float, digits: int = 5) -> str:
    return f"{mean:.{digits}f}" if math.isnan(sd) else f"{mean:.{digits}f} ± {sd:.{digits}f}"


def format_table(config, per_seed: list) -> str:
    """Markdown: the measured rows, then the literature rows of Wang (2012), Table 4.1 with
    the difference to the measured row each is compared with (`COMPARED`)."""
    floor = np.array([s["floor"] for s in per_seed])
    burn = (f"the first {config.burn_in_draws} draws (at most half of a chain's draws)"
            if config.burn_in_draws is not None else
            f"the draws in the first {config.burn_in:g} of the gradient budget")
    lines = [
        f"Robot arm, {len(per_seed)} seed(s) {[s['seed'] for s in per_seed]}: "
        f"{config.num_super_transitions} super-transitions x {config.gradient_budget} "
        f"gradients per chain, {config.num_hidden} tanh hidden units, "
        f"{config.num_folds}-fold CV reward (held-out log predictive density), burn-in {burn}. "
        f"True-function test error "
        f"(floor of these draws): "
        f"{_pm(floor.mean(), floor.std(ddof=1) if len(floor) > 1 else float('nan'))}.",
        "",
        "| method | test error (predicting chain) | CV networks: mean / median "
        "(sd over networks) | excess over floor | pred. ESS / 1000 grads (min / median) | "
        "max R-hat | gradients (test chain) | gradients (all networks) | wall time (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rows = summarise(per_seed)
    for name, row in rows.items():
        nets = ""
        if "networks_mean" in row:
            nets = (f"{row['networks_mean'][0]:.5f} / {row['networks_median'][0]:.5f} "
                    f"({row['networks_sd'][0]:.5f})")
        ess = (f"{1e3 * row['ess_min_per_grad'][0]:.3g} / "
               f"{1e3 * row['ess_median_per_grad'][0]:.3g}")
        lines.append(
            f"| {METHOD_LABELS[name]} | {_pm(*row['test_error'])} | {nets} | "
            f"{_pm(*row['excess'])} | {ess} | {row['rhat_max']:.3f} | {row['num_grads']:.3g} "
            f"| {row['network_grads']:.3g} | {row['wall_s']:.0f} |"
        )
    lines += ["", "| literature row (Wang 2012, Table 4.1) | literature | excess over 0.0050 | "
              "measured row | measured | measured - literature |", "|---|---|---|---|---|---|"]
    for name, error, sd in LITERATURE:
        err = f"{error:.5f}" if sd is None else f"{error:.5f} ± {sd:.5f}"
        key = COMPARED.get(name)
        if key in rows:
            measured = rows[key].get("networks_mean", rows[key]["test_error"])[0]
            rest = f"{METHOD_LABELS[key]} | {measured:.5f} | {measured - error:+.5f}"
        else:
            rest = " | | "
        lines.append(f"| {name} | {err} | {error - data_module.NOISE_FLOOR:+.5f} | {rest} |")
    return "\n".join(lines)


def make_figures(out: Path, config, per_seed: list) -> None:
    """Fig. 4.1 (reward surface with tried points), Fig. 4.2 (L-slice with the acquisition)
    and Fig. 4.3 (test error against gradient evaluations) of Wang (2012), first seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from adaptmc.tuners import acquisition as acq
    from adaptmc.tuners import make_box
    from adaptmc.tuners.box import to_unit
    from adaptmc.tuners.gp import gp_predict
    from adaptmc.tuners.surrogate import GPConfig, fit_gp

    first = per_seed[0]
    tuning = first["methods"]["adaptive"]["tuning"]
    points = np.stack([np.asarray(tuning["step_size"], float),
                       np.asarray(tuning["num_leapfrog"], float)], axis=1)
    rewards = np.asarray(tuning["reward"], float)
    box = make_box({"step_size": config.step_size_box, "num_leapfrog": config.num_leapfrog_box},
                   integer=("num_leapfrog",))
    post = fit_gp(box, {"points": points, "rewards": rewards},
                  GPConfig(0.2, config.gp_signal_var, config.gp_noise_var))
    eps = np.linspace(*config.step_size_box, 60)
    steps = np.linspace(*config.num_leapfrog_box, 60)
    grid = np.stack(np.meshgrid(eps, steps), axis=-1).reshape(-1, 2)
    mean, sd = gp_predict(post, to_unit(box, grid))

    fig, ax = plt.subplots(figsize=(6, 4.5))
    cs = ax.contourf(eps, steps, mean.reshape(60, 60), levels=20, cmap="viridis")
    fig.colorbar(cs, label="GP mean of the normalised reward")
    ax.scatter(points[:, 0], points[:, 1], c="w", edgecolors="k", s=18, label="tried")
    ax.set_xlabel("step size factor eps")
    ax.set_ylabel("leapfrog steps L")
    ax.set_title("Reward surface (Wang 2012, Fig. 4.1)")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(out / "fig_reward_surface.png", dpi=120)
    plt.close(fig)

    # Fig. 4.2 as the thesis draws it: L fixed at 1500, eps varied, mean +/- 1 sd and the
    # annealed acquisition mu + p_i sqrt(beta_i) sd
    slice_l = float(np.clip(1500, *config.num_leapfrog_box))
    line = np.stack([eps, np.full_like(eps, slice_l)], axis=1)
    mean_l, sd_l = gp_predict(post, to_unit(box, line))
    beta = acq.ucb_beta(len(rewards), 2)
    p_i = math.exp(-config.anneal_rate * (len(rewards) - 1))
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(eps, mean_l, label="GP mean")
    ax.fill_between(eps, mean_l - sd_l, mean_l + sd_l, alpha=0.3, label="±1 sd")
    ax.plot(eps, acq.ucb(mean_l, sd_l, beta, p_i), "--", label="acquisition (p_i UCB)")
    near = np.abs(points[:, 1] - slice_l) < 0.05 * (box.upper[1] - box.lower[1])
    from adaptmc.tuners.surrogate import normalise_rewards

    ax.scatter(points[near, 0], normalise_rewards(rewards)[near], c="k", s=12,
               label="tried (L within 5% of the box)")
    ax.set_xlabel("step size factor eps")
    ax.set_ylabel("normalised reward")
    ax.set_title(f"eps-slice at L = {slice_l:.0f} (Wang 2012, Fig. 4.2)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "fig_l_slice.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for name in [k for k in METHOD_LABELS if k in first["methods"]]:
        m = first["methods"][name]
        ax.plot(m["curve_draws"], m["curve_error"], label=METHOD_LABELS[name])
    ax.axhline(first["floor"], color="k", ls=":", label="true function")
    ax.set_xlabel("samples after burn-in (test chain)")
    ax.set_ylabel("test error")
    ax.set_yscale("log")
    ax.set_title("Test error of the running predictive mean (Wang 2012, Fig. 4.3)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "fig_test_error.png", dpi=120)
    plt.close(fig)


