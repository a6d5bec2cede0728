"""MacKay's robot arm: HMC tuned by a bandit on a cross-validated predictive reward against
expert-tuned HMC and NUTS (Wang & de Freitas 2011; Wang 2012, Sec. 4.1, Table 4.1).

For each seed the same data set is fitted three ways, from the same starting point and with
the same gradient budget for the chain that predicts the test set:

1. **adaptive HMC**: one product chain over ``num_folds`` networks, each trained on all but one
   fold, plus one network on the full training set (`adaptmc.models.cv`), all advanced with
   the same ``(eps, L)`` by `adaptmc.models.bnn_hmc` (HMC on weights, Gibbs on precisions,
   Neal's per-weight step scales). After each super-transition the annealed GP-UCB bandit
   (`adaptmc.tuners.gp_ucb`, Wang 2012, Algorithm 3) is rewarded with minus the log of the
   mean held-out squared error of the folds' predictive means (the full-data network is not
   scored). Test predictions come from the full-data network and, reported alongside, from
   the ensemble of the fold networks.
2. **expert HMC**: the same kernel on the full data at fixed settings ``EXPERT``.
3. **NUTS**: BlackJAX NUTS with window adaptation on the joint posterior of weights and log
   precisions; warm-up gradients count towards the budget.

Test error: mean over test cases of the squared error summed over the two outputs, of the
posterior predictive mean over the draws after the first quarter of the gradient budget.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.datasets import robot_arm as data_module
from adaptmc.io import write_json
from adaptmc.models import bnn, cv
from adaptmc.models.bnn_hmc import BNNHMCParams, bnn_hmc
from adaptmc.models.robot_arm import find_start

# Wang (2012), Table 4.1: test errors on the robot arm (noise floor 0.0050).
LITERATURE = (
    ("MacKay (1992), Gaussian approximation", 0.00573, None),
    ("Neal (1996), HMC", 0.00554, None),
    ("Neal (1996), HMC with ARD", 0.00549, None),
    ("Rios Insua & Muller (1998)", 0.00620, None),
    ("Andrieu et al. (2001), RJMCMC", 0.00502, None),
    ("Wang & de Freitas, adaptive HMC (mean)", 0.00498, 0.00012),
)

# Expert setting for fixed-parameter HMC: Neal's step-size factor and trajectory length of the
# form used for the robot arm with FBM (``hybrid 1000:10 0.3``: L = 1000 leapfrog steps, eps
# 0.3 times the heuristic per-weight scales), quoted from memory of the FBM examples and not
# re-checked here; FBM's windows of 10 states are not implemented.
EXPERT = {"step_size": 0.3, "num_leapfrog": 1000}


class Config(NamedTuple):
    """Sizes of one reproduction; ``FULL`` is Wang (2012), Sec. 4.1. NUTS warms up for
    ``nuts_warmup`` iterations with trees of at most ``2**nuts_max_doublings - 1`` leapfrog
    steps and then makes at most ``nuts_max_draws`` draws within the budget."""

    num_hidden: int
    num_folds: int
    num_super_transitions: int
    gradient_budget: int
    num_seeds: int
    step_size_box: tuple[float, float]
    num_leapfrog_box: tuple[int, int]
    expert: dict
    nuts_warmup: int
    start_steps: int
    burn_in: float = 0.25
    max_prediction_draws: int = 2000
    tuner_burn_in: int = 0
    fail_when_stuck: bool = False
    nuts_max_doublings: int = 10
    nuts_max_draws: int = 50000


# tuner_burn_in and fail_when_stuck: see BENCHMARKS.md, "Robot arm, second run". NUTS's
# warm-up spends at most nuts_warmup * (2**nuts_max_doublings - 1) + 1 gradients: 1.02e6 of
# FULL's 4.8e6; QUICK's tree depth 8 keeps its 30 iterations under 7651 of 12000 (at depth 10
# they took 19.4k, the whole budget, and NUTS had no draws to predict with).
FULL = Config(16, 8, 200, 24000, 3, (0.01, 1.01), (20, 5020), EXPERT, 1000, 2000,
              tuner_burn_in=5, fail_when_stuck=True)
QUICK = Config(16, 4, 12, 1000, 1, (0.01, 1.01), (40, 100), {"step_size": 0.3,
                                                             "num_leapfrog": 60}, 30, 500,
               tuner_burn_in=2, fail_when_stuck=True, nuts_max_doublings=8)


def run_robot_arm(out: str | Path, quick: bool = False, force: bool = False,
                  seed: int = 0, config: Config | None = None) -> int:
    """``adaptmc reproduce robot-arm``: write ``table.md``, ``results.json`` and figures.

    ``config`` overrides ``FULL`` / ``QUICK`` (e.g. ``FULL._replace(num_seeds=1)``)."""
    from adaptmc.io import prepare_output_dir

    out = Path(out)
    prepare_output_dir(out, force=force)
    out.mkdir(parents=True, exist_ok=True)
    if config is None:
        config = QUICK if quick else FULL
    results = run_experiment(config, seed=seed, out=out)
    print(f"\n{results['table']}\nwritten to {out}")
    return 0


def run_experiment(config: Config, seed: int = 0, out: Path | None = None,
                   log=print) -> dict:
    """Run every seed ``seed, seed + 1, ...`` and, if ``out`` is given, write the results."""
    started = time.perf_counter()
    seeds = [seed + i for i in range(config.num_seeds)]
    per_seed = []
    for s in seeds:
        per_seed.append(run_seed(config, s, log=log))
        if out is not None:
            _write(out, config, per_seed, time.perf_counter() - started)
    results = {"config": config._asdict(), "seeds": per_seed,
               "wall_s": time.perf_counter() - started}
    results["table"] = format_table(config, per_seed)
    if out is not None:
        _write(out, config, per_seed, results["wall_s"])
        make_figures(out, config, per_seed)
    return results


def _write(out: Path, config: Config, per_seed: list, wall_s: float) -> None:
    table = format_table(config, per_seed)
    (out / "table.md").write_text(table + "\n")
    payload = {"config": config._asdict(), "wall_s": wall_s, "seeds": per_seed,
               "literature": [list(row) for row in LITERATURE]}
    write_json(out / "results.json", payload, indent=1)


# ----------------------------------------------------------------------------- one seed


def run_seed(config: Config, seed: int, log=print) -> dict:
    """Data, common start, the three methods; returns a JSON-able dict."""
    from adaptmc.run import run
    from adaptmc.tuners import gp_ucb, make_box

    data = data_module.generate(seed)
    floor = data_module.true_function_error(data)
    spec = bnn.MLPSpec(2, config.num_hidden, 2)
    model = bnn.make_bnn(spec, data.x_train, data.y_train)
    log(f"[seed {seed}] true-function test error (floor of this draw): {floor:.5f}")
    start, start_grads = find_start(model, jax.random.key(seed), config.start_steps)
    total_budget = config.num_super_transitions * config.gradient_budget
    result = {"seed": seed, "floor": floor, "start_grads": start_grads,
              "total_budget": total_budget, "methods": {}}

    # 1. adaptive HMC: folds + one full-data copy in one product chain
    masks = np.concatenate([cv.kfold_masks(len(data.x_train), config.num_folds, seed),
                            np.ones((1, len(data.x_train)))])
    target = cv.product_target(model, masks, name="robot-arm-cv")
    objective = cv.cv_objective(model, masks, loss="mse", folds=range(config.num_folds),
                                log_scale=True, fail_when_stuck=config.fail_when_stuck)
    box = make_box({"step_size": config.step_size_box, "num_leapfrog": config.num_leapfrog_box},
                   integer=("num_leapfrog",))
    tuner = _ignore_divergences(gp_ucb(box))
    if config.tuner_burn_in:
        tuner = after_burn_in(tuner, config.tuner_burn_in, config.expert)
    tick = time.perf_counter()
    res = run(target, bnn_hmc, BNNHMCParams(**config.expert),
              num_super_transitions=config.num_super_transitions,
              gradient_budget=config.gradient_budget, num_chains=1, tuner=tuner,
              objective=objective, seed=seed,
              initial_positions=jnp.tile(start, masks.shape[0])[None], progress=False)
    wall = time.perf_counter() - tick
    tuning = res.idata.tuning
    copies = masks.shape[0]
    weights = _weights_from_idata(res.idata)
    grads = _cumulative_grads(res.idata)
    keep = grads > config.burn_in * total_budget
    full = _evaluate(model, _select(weights, copies - 1), grads, keep, data, config)
    ensemble = _evaluate(model, [_select(weights, k) for k in range(config.num_folds)], grads,
                         keep, data, config)
    result["methods"]["adaptive"] = {
        **full, "wall_s": wall, "compile_s": res.compile_s,
        "num_grads": int(res.num_grads), "network_grads": int(res.num_grads) * copies,
        "ensemble_test_error": ensemble["test_error"],
        "tuning": {"step_size": tuning["step_size"].values, "num_leapfrog":
                   tuning["num_leapfrog"].values, "reward": tuning["reward"].values,
                   "acceptance_rate": tuning["acceptance_rate"].values},
        "acceptance_rate": float(np.mean(tuning["acceptance_rate"].values)),
    }
    log(f"[seed {seed}] adaptive HMC: test error {full['test_error']:.5f} (ensemble "
        f"{ensemble['test_error']:.5f}), {wall:.0f} s")

    # 2. expert HMC on the full data
    single = bnn.bnn_target(model, name="robot-arm")
    tick = time.perf_counter()
    res = run(single, bnn_hmc, BNNHMCParams(**config.expert),
              num_super_transitions=config.num_super_transitions,
              gradient_budget=config.gradient_budget, num_chains=1, seed=seed,
              initial_positions=start[None], progress=False)
    wall = time.perf_counter() - tick
    grads = _cumulative_grads(res.idata)
    weights = _weights_from_idata(res.idata)
    expert = _evaluate(model, weights, grads, grads > config.burn_in * total_budget, data, config)
    result["methods"]["expert"] = {
        **expert, "wall_s": wall, "compile_s": res.compile_s, "num_grads": int(res.num_grads),
        "network_grads": int(res.num_grads),
        "acceptance_rate": float(np.mean(res.idata.tuning["acceptance_rate"].values)),
    }
    log(f"[seed {seed}] expert HMC: test error {expert['test_error']:.5f}, {wall:.0f} s")

    # 3. NUTS with window adaptation on (weights, log precisions)
    result["methods"]["nuts"] = _nuts_method(single, model, start, data, config, seed)
    log(f"[seed {seed}] NUTS: test error {result['methods']['nuts']['test_error']:.5f}, "
        f"{result['methods']['nuts']['wall_s']:.0f} s")
    return result


def _nuts_method(target, model, start, data, config: Config, seed: int) -> dict:
    """`run_nuts` on the full-data ``target`` from ``start`` with the whole budget, scored
    as the other methods (`_evaluate`)."""
    total_budget = config.num_super_transitions * config.gradient_budget
    tick = time.perf_counter()
    positions, grads, info = run_nuts(target, start, total_budget, config.nuts_warmup, seed,
                                      config.nuts_max_draws, config.nuts_max_doublings)
    wall = time.perf_counter() - tick
    lay = bnn.layout(model)
    weights = jax.vmap(lay.unravel_weights)(jnp.asarray(positions[:, : lay.num_weights]))
    nuts = _evaluate(model, weights, grads, grads > config.burn_in * total_budget, data, config)
    return {**nuts, "wall_s": wall, **info}


def _ignore_divergences(tuner):
    """Pass the tuner zero divergences: the predictive reward already reflects rejected
    trajectories, which for a BNN at a large step size are rejections, not failed runs."""
    return tuner._replace(
        update=lambda state, proposal, reward, stats: tuner.update(
            state, proposal, reward, {**stats, "divergences": 0}
        )
    )


def after_burn_in(tuner, num_burn_in: int, setting: dict):
    """Run ``setting`` for the first ``num_burn_in`` super-transitions and hide their rewards
    from ``tuner``: rewards of a chain still burning in would stretch the min-max
    normalisation of the bandit's rewards and flatten everything after them."""

    def init(key):
        return {"inner": tuner.init(key), "count": np.asarray(0)}

    def propose(key, state):
        if int(state["count"]) < num_burn_in:
            return dict(setting), state
        proposal, inner = tuner.propose(key, state["inner"])
        return proposal, {**state, "inner": inner}

    def update(state, proposal, reward, stats):
        count = int(state["count"])
        inner = state["inner"]
        if count >= num_burn_in:
            inner = tuner.update(inner, proposal, reward, stats)
        return {"inner": inner, "count": np.asarray(count + 1)}

    return tuner._replace(name=f"{tuner.name}+burn-in", init=init, propose=propose,
                          update=update, best=lambda state: tuner.best(state["inner"]))


def run_nuts(target, start, budget: int, num_warmup: int, seed: int, max_draws: int,
             max_num_doublings: int = 10):
    """BlackJAX NUTS (`adaptmc.baselines.compile_nuts`, one chain from ``start``): window
    adaptation for ``num_warmup`` iterations, then draws until the gradient evaluations
    (warm-up included) reach ``budget`` or ``max_draws`` draws are made; the draw that
    crosses the budget is dropped. The warm-up spends at most ``num_warmup *
    (2**max_num_doublings - 1)`` gradients (plus one). Returns ``(positions: (draws, dim),
    cumulative gradients: (draws,), info)``."""
    from adaptmc.baselines import compile_nuts

    program = compile_nuts(target, num_chains=1, num_warmup=num_warmup, num_draws=max_draws,
                           gradient_budget=budget, max_num_doublings=max_num_doublings)
    result = program.run(jax.random.key(seed + 1000)[None], jnp.asarray(start)[None])
    warm_grads = int(result.warmup_grads[0])
    made = int(result.num_draws[0])
    steps = result.num_grads[0, :made]
    cumulative = warm_grads + np.cumsum(steps)
    keep = cumulative <= budget
    info = {
        "num_grads": int(cumulative[keep][-1]) if keep.any() else warm_grads,
        "warmup_grads": warm_grads,
        "step_size": float(result.step_size[0]),
        "mean_tree_steps": float(np.mean(steps[keep])) if keep.any() else float("nan"),
        "divergences": int(result.divergent[0, :made][keep].sum()),
        "acceptance_rate": (float(np.mean(result.acceptance_rate[0, :made][keep]))
                            if keep.any() else float("nan")),
        "num_draws": int(keep.sum()),
        "max_num_doublings": max_num_doublings,
    }
    info["network_grads"] = info["num_grads"]
    return result.positions[0, :made][keep], cumulative[keep], info


# ----------------------------------------------------------------------------- evaluation


def _weights_from_idata(idata) -> dict:
    """Weight draws ``{group: (draws, [copies,] ...)}`` of chain 0 from the posterior group."""
    post = idata.posterior
    return {g: np.asarray(post[f"weights.{g}"].values[0]) for g in bnn.WEIGHT_GROUPS}


def _select(weights: dict, copy: int) -> dict:
    return {g: w[:, copy] for g, w in weights.items()}


def _cumulative_grads(idata) -> np.ndarray:
    """Gradient evaluations spent up to and including each draw of chain 0: ``(draws,)``."""
    return 1 + np.cumsum(np.asarray(idata.sample_stats["n_grad_evals"].values[0]))


def _evaluate(model, weights, grads, keep, data, config: Config, num_curve: int = 60) -> dict:
    """Test error of the predictive mean over the kept draws (an ensemble when ``weights`` is
    a list), and the curve of the test error of the running mean against gradients spent.

    ``weights``: dict of ``(draws, ...)`` arrays (or a list of them, averaged); ``grads,
    keep: (draws,)``.
    """
    members = weights if isinstance(weights, list) else [weights]
    index = np.flatnonzero(np.asarray(keep))
    if index.size == 0:
        return {"test_error": float("nan"), "curve_grads": [], "curve_error": [],
                "num_draws": 0}
    if index.size > config.max_prediction_draws:
        index = index[np.linspace(0, index.size - 1, config.max_prediction_draws).astype(int)]
    x_test = jnp.asarray(data.x_test, model.x.dtype)
    preds = np.mean(
        [np.asarray(bnn.predict(model, {g: jnp.asarray(w[g][index]) for g in w}, x_test))
         for w in members],
        axis=0,
    )  # (draws, 400, 2)
    running = np.cumsum(preds, axis=0) / np.arange(1, len(index) + 1)[:, None, None]
    marks = np.unique(np.linspace(0, len(index) - 1, min(num_curve, len(index))).astype(int))
    curve = [data_module.test_error(running[m], data.y_test) for m in marks]
    return {
        "test_error": data_module.test_error(running[-1], data.y_test),
        "curve_grads": np.asarray(grads)[index[marks]].tolist(),
        "curve_error": curve,
        "num_draws": int(np.asarray(keep).sum()),
    }


# ----------------------------------------------------------------------------- output

METHOD_LABELS = {
    "adaptive": "adaptive HMC (GP-UCB, CV reward), full-data chain",
    "ensemble": "adaptive HMC, ensemble of the CV chains",
    "expert": "HMC at expert settings",
    "nuts": "NUTS (BlackJAX, window adaptation)",
}


def summarise(per_seed: list) -> dict:
    """Mean and standard deviation over seeds of test error, excess over the floor, gradient
    evaluations and wall time, per method."""
    rows = {}
    for name in ("adaptive", "ensemble", "expert", "nuts"):
        src = "adaptive" if name == "ensemble" else name
        key = "ensemble_test_error" if name == "ensemble" else "test_error"
        errors = np.array([s["methods"][src][key] for s in per_seed])
        excess = errors - np.array([s["floor"] for s in per_seed])
        rows[name] = {
            "test_error": (float(errors.mean()), float(errors.std(ddof=1)) if len(errors) > 1
                           else float("nan")),
            "excess": (float(excess.mean()), float(excess.std(ddof=1)) if len(excess) > 1
                       else float("nan")),
            "num_grads": float(np.mean([s["methods"][src]["num_grads"] for s in per_seed])),
            "network_grads": float(np.mean([s["methods"][src]["network_grads"]
                                            for s in per_seed])),
            "wall_s": float(np.mean([s["methods"][src]["wall_s"] for s in per_seed])),
        }
    return rows


def _pm(mean: float, sd: float, digits: int = 5) -> str:
    return f"{mean:.{digits}f}" if math.isnan(sd) else f"{mean:.{digits}f} ± {sd:.{digits}f}"


def format_table(config: Config, per_seed: list) -> str:
    """Markdown table in the layout of Wang (2012), Table 4.1."""
    floor = np.array([s["floor"] for s in per_seed])
    lines = [
        f"Robot arm, {len(per_seed)} seed(s) {[s['seed'] for s in per_seed]}: "
        f"{config.num_super_transitions} super-transitions x {config.gradient_budget} "
        f"gradients per chain, {config.num_hidden} tanh hidden units, "
        f"{config.num_folds}-fold CV reward. True-function test error (floor of these draws): "
        f"{_pm(floor.mean(), floor.std(ddof=1) if len(floor) > 1 else float('nan'))}.",
        "",
        "| method | test error | excess over floor | gradients (test chain) | gradients (all "
        "networks) | wall time (s) |",
        "|---|---|---|---|---|---|",
    ]
    for name, error, sd in LITERATURE:
        err = f"{error:.5f}" if sd is None else f"{error:.5f} ± {sd:.5f}"
        lines.append(f"| {name} (literature) | {err} | {error - data_module.NOISE_FLOOR:+.5f} "
                     "(over 0.0050) | | | |")
    for name, row in summarise(per_seed).items():
        wall = "" if name == "ensemble" else f"{row['wall_s']:.0f}"
        lines.append(
            f"| {METHOD_LABELS[name]} | {_pm(*row['test_error'])} | {_pm(*row['excess'])} | "
            f"{row['num_grads']:.3g} | {row['network_grads']:.3g} | "
            f"{wall} |"
        )
    return "\n".join(lines)


def make_figures(out: Path, config: Config, per_seed: list) -> None:
    """Fig. 4.1 (reward surface with tried points), Fig. 4.2 (L-slice with the acquisition)
    and Fig. 4.3 (test error against gradient evaluations) of Wang (2012), first seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from adaptmc.tuners import acquisition as acq
    from adaptmc.tuners import make_box
    from adaptmc.tuners.box import to_unit
    from adaptmc.tuners.gp import gp_predict
    from adaptmc.tuners.surrogate import fit_gp

    first = per_seed[0]
    tuning = first["methods"]["adaptive"]["tuning"]
    points = np.stack([np.asarray(tuning["step_size"], float),
                       np.asarray(tuning["num_leapfrog"], float)], axis=1)
    rewards = np.asarray(tuning["reward"], float)
    box = make_box({"step_size": config.step_size_box, "num_leapfrog": config.num_leapfrog_box},
                   integer=("num_leapfrog",))
    post = fit_gp(box, {"points": points, "rewards": rewards})
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

    best = int(np.argmax(mean))
    eps_best = grid[best, 0]
    line = np.stack([np.full_like(steps, eps_best), steps], axis=1)
    mean_l, sd_l = gp_predict(post, to_unit(box, line))
    beta = acq.ucb_beta(len(rewards), 2)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(steps, mean_l, label="GP mean")
    ax.fill_between(steps, mean_l - 2 * sd_l, mean_l + 2 * sd_l, alpha=0.3, label="±2 sd")
    ax.plot(steps, acq.ucb(mean_l, sd_l, beta), "--", label="UCB acquisition")
    near = np.abs(points[:, 0] - eps_best) < 0.05 * (box.upper[0] - box.lower[0])
    from adaptmc.tuners.surrogate import normalise_rewards

    ax.scatter(points[near, 1], normalise_rewards(rewards)[near], c="k", s=12,
               label="tried (eps within 5% of the box)")
    ax.set_xlabel("leapfrog steps L")
    ax.set_ylabel("normalised reward")
    ax.set_title(f"L-slice at eps = {eps_best:.3f} (Wang 2012, Fig. 4.2)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "fig_l_slice.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for name in ("adaptive", "expert", "nuts"):
        m = first["methods"][name]
        ax.plot(m["curve_grads"], m["curve_error"], label=METHOD_LABELS[name])
    ax.axhline(first["floor"], color="k", ls=":", label="true function")
    ax.set_xlabel("gradient evaluations (test chain)")
    ax.set_ylabel("test error")
    ax.set_yscale("log")
    ax.set_title("Test error of the running predictive mean (Wang 2012, Fig. 4.3)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "fig_test_error.png", dpi=120)
    plt.close(fig)


def merge_results(result_dirs: list[str | Path], out: str | Path) -> str:
    """Combine the ``results.json`` of runs made separately (one seed each, same config) into
    one ``table.md`` / ``results.json`` with figures from the first; returns the table."""
    payloads = [json.loads((Path(d) / "results.json").read_text()) for d in result_dirs]
    configs = {json.dumps({k: v for k, v in p["config"].items() if k != "num_seeds"},
                          sort_keys=True) for p in payloads}
    if len(configs) != 1:
        raise ValueError("the runs to merge were made with different configurations")
    per_seed = [s for p in payloads for s in p["seeds"]]
    config = Config(**{k: tuple(v) if isinstance(v, list) else v
                       for k, v in payloads[0]["config"].items()})._replace(
        num_seeds=len(per_seed))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _write(out, config, per_seed, sum(p["wall_s"] for p in payloads))
    make_figures(out, config, per_seed)
    return format_table(config, per_seed)
