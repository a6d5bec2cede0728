"""Dexter: a two-hidden-layer Bayesian network tuned by a cross-validation reward (Wang 2012,
Sec. 4.2, Tables 4.2-4.3; Wang & de Freitas 2011).

Protocol (re-run here, budget a parameter):

- data: the NIPS 2003 Dexter set (`adaptmc_lab.datasets.dexter`); 10-fold cross-validation
  over the 300 training cases. Each fold selects its own 295 inputs from its own training
  cases (Neal & Zhang 2006; `adaptmc_lab.datasets.dexter.select_features`), so no held-out case
  and no validation label reaches a network;
- network: 295 inputs, tanh hidden layers of 20 and 8 units, logistic output, ARD on the
  input weights, Gamma hyperpriors per group (`adaptmc_lab.models.bnn.neal_prior`); HMC on the
  weights with Neal's per-weight step scales, Gibbs on the precisions
  (`adaptmc_lab.models.bnn_hmc`). The 10 fold networks form one product chain; one product
  gradient counts once;
- adaptive: after each super-transition of ``gradient_budget`` gradients, the library's
  predictive objective (`adaptmc.heldout.predictive_objective`, what a user's
  ``objective="predictive"`` computes: the mean over the 300 training cases of the log of
  the predictive probability of each case's label, from the super-transition's draws of the
  fold network that held it out; `cv_log_score`) updates GP-UCB (Wang 2012, Algorithm 3) or
  the parametric bandit (Wang & de Freitas 2011) over ``eps`` in [0.01, 0.61] and ``L`` in
  [20, 2000]; the first ``tuner_burn_in`` super-transitions run the expert setting and
  are hidden from the tuner (rewards of a chain still burning in would stretch the bandit's
  reward normalisation);
- expert: the same product chain at fixed ``EXPERT`` settings; NUTS: BlackJAX NUTS with
  window adaptation on the product of the joint posteriors (weights and log precisions),
  warm-up gradients counted, same total budget;
- evaluation: the predictive probability of each fold network averaged over the
  trajectories after the first ``burn_in`` fraction of the budget; validation error of each
  network (mean, median over the 10) and of their majority vote; test predictions (+1/-1)
  by majority vote.

The draws are not stored: each trajectory's predictive probabilities on all 2,600 cases are
summed per super-transition (a product state has 63,960 numbers; storing every draw of a
full run would need tens of GB).
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

from adaptmc_lab.datasets import dexter as data_module
from adaptmc_lab.experiments import checked_sizes
from adaptmc_lab.models import bnn, cv
from adaptmc_lab.models.bnn_hmc import BNNHMCParams, BNNState
from adaptmc_lab.models.bnn_hmc import step as bnn_hmc_step

# Second-hand: quoted in issue #18 from Wang (2012), Tables 4.2-4.3, and Wang & de Freitas
# (2011); validation errors unless marked test.
LITERATURE = (
    ("Neal & Zhang (expert HMC), validation", 0.080),
    ("Wang (2012), adaptive HMC, mean over CV networks, validation", 0.0730),
    ("Wang (2012), adaptive HMC, median over CV networks, validation", 0.070),
    ("Wang (2012), adaptive HMC, majority vote, validation", 0.0667),
    ("Wang (2012), adaptive HMC, majority vote, test", 0.0355),
    ("Wang & de Freitas (2011), parametric bandit", 0.0385),
)

# Neal & Zhang's sampler settings for Dexter could not be recovered offline. We use the form
# of the robot-arm expert setting (FBM ``hybrid 1000:10 0.3``, from memory of the FBM examples,
# not re-checked): eps = 0.3 times the heuristic per-weight scales, L = 1000.
EXPERT = {"step_size": 0.3, "num_leapfrog": 1000}


class Config(NamedTuple):
    """Sizes of one run; ``FULL`` is Neal's budget (160 super-transitions of 20,000
    leapfrog steps), which this 2-core machine cannot run (see `projected_full_s`)."""

    num_super_transitions: int
    gradient_budget: int
    step_size_box: tuple[float, float] = (0.01, 0.61)
    num_leapfrog_box: tuple[int, int] = (20, 2000)
    expert: dict = EXPERT
    nuts_warmup: int = 100
    start_steps: int = 1000
    num_folds: int = 10
    num_features: int = data_module.NUM_SELECTED
    hidden: tuple[int, ...] = (20, 8)
    tuners: tuple[str, ...] = ("gp-ucb", "parametric")
    burn_in: float = 0.25
    tuner_burn_in: int = 2


FULL = Config(160, 20_000)
QUICK = Config(5, 300, num_leapfrog_box=(20, 100), expert={"step_size": 0.3, "num_leapfrog": 50},
               nuts_warmup=5, start_steps=100, tuner_burn_in=1)
FULL_BUDGET = 160 * 20_000


def run_dexter(out: str | Path, quick: bool = False, force: bool = False, seed: int = 0,
               config: Config | None = None, sizes: dict | None = None) -> int:
    """``adaptmc-lab reproduce dexter``: ``table.md``, ``results.json``, ``dexter_test.resu``
    (the GP-UCB vote on the 2,000 test cases, one +1/-1 a line) and one prediction file per
    method. ``sizes``: `Config` fields replaced (``--set num_super_transitions=20 --set
    gradient_budget=4004``), on top of ``QUICK`` or ``FULL``."""
    from adaptmc.io import prepare_output_dir

    config = config or (QUICK if quick else FULL)
    config = config._replace(**checked_sizes("dexter", sizes or {}, SIZE_FIELDS,
                                             may_be_zero=("tuner_burn_in",)))
    out = Path(out)
    prepare_output_dir(out, force=force)
    out.mkdir(parents=True, exist_ok=True)
    results = run_experiment(config, seed=seed, out=out)
    print(f"\n{results['table']}\nwritten to {out}")
    return 0


SIZE_FIELDS = ("num_super_transitions", "gradient_budget", "nuts_warmup", "start_steps",
               "num_folds", "tuner_burn_in")


# ----------------------------------------------------------------------------- set-up


class Problem(NamedTuple):
    """``inputs: (copies, 2600, I)`` train, validation and test inputs of each fold;
    ``masks: (copies, 300)``; labels in {0, 1}."""

    model: bnn.BNN
    target: object
    masks: np.ndarray
    inputs: jax.Array
    y_train: np.ndarray
    y_valid: np.ndarray


def prepare(config: Config, seed: int, data=None) -> Problem:
    """Folds, per-fold feature selection and inputs, and the product target."""
    data = data if data is not None else data_module.load_dexter()
    masks = cv.kfold_masks(300, config.num_folds, seed)
    blocks = []
    for mask in masks:
        chosen = data_module.select_features(data.train.features, data.train.labels,
                                             mask == 1, config.num_features)
        blocks.append(np.concatenate([data_module.transform(split.features, chosen)
                                      for split in data]))
    inputs = jnp.asarray(np.stack(blocks))
    y_train = (data.train.labels == 1).astype(float)
    spec = bnn.MLPSpec(config.num_features, tuple(config.hidden), 1, "bernoulli", ard=True)
    model = bnn.make_bnn(spec, inputs[0, :300], y_train)
    target = cv.product_target(model, masks, name="dexter-cv", key=jax.random.key(seed),
                               inputs=inputs[:, :300])
    return Problem(model, target, masks, inputs, y_train, (data.valid.labels == 1).astype(float))


def find_start(problem: Problem, num_steps: int, learning_rate: float = 0.01):
    """Adam on the weights of every fold network with the precisions at Neal's start
    (standard deviation 0.5), from ``N(0, 0.1**2)`` weights: a common start for every
    method. Returns ``(position: (copies * dim,), product gradients)``."""
    import optax

    target, lay = problem.target, bnn.layout(problem.model)
    copies = problem.masks.shape[0]
    is_weight = jnp.tile(jnp.concatenate([jnp.ones(lay.num_weights),
                                          jnp.zeros(lay.num_precisions)]), copies)
    optimiser = optax.adam(learning_rate)

    def body(carry, _):
        position, opt_state = carry
        grad = -jax.grad(target.logdensity)(position) * is_weight
        updates, opt_state = optimiser.update(grad, opt_state)
        return (optax.apply_updates(position, updates), opt_state), None

    start = target.initial_position
    (position, _), _ = jax.jit(lambda p: jax.lax.scan(body, (p, optimiser.init(p)), None,
                                                      num_steps))(start)
    return position, int(num_steps)


def make_predictor(problem: Problem):
    """``position: (copies * dim,) -> (copies, 2600)`` probabilities of class +1."""
    lay, copies = bnn.layout(problem.model), problem.masks.shape[0]
    spec = problem.model.spec

    def predict(position):
        rows = position.reshape(copies, -1)[:, : lay.num_weights]
        weights = jax.vmap(lay.unravel_weights)(rows)
        return jax.vmap(lambda w, x: jax.nn.sigmoid(bnn.forward(spec, w, x))[:, 0])(
            weights, problem.inputs)

    return predict


# ----------------------------------------------------------------------------- chains


def max_steps(config: Config) -> int:
    """The most transitions of one super-transition: ``gradient_budget`` over the shortest
    trajectory (the box's or the expert's) plus one."""
    shortest = min(config.num_leapfrog_box[0], int(config.expert["num_leapfrog"]))
    return config.gradient_budget // (max(shortest, 1) + 1)


def make_segment(problem: Problem, rows: int):
    """One super-transition of the product chain: ``num_steps <= rows`` transitions (traced),
    summing each transition's predictive probabilities and keeping each transition's held-out
    pointwise log-likelihood (`adaptmc_lab.models.cv.heldout_pointwise`; the draws, 63,960
    numbers each, are not kept). Returns ``(state, sums: (copies, 2600), pointwise: (rows,
    300), acceptance sum, any accepted)``; rows past ``num_steps`` are zero."""
    predict = make_predictor(problem)
    pointwise = cv.heldout_pointwise(problem.model, problem.masks,
                                     inputs=problem.inputs[:, :300])
    target = problem.target

    @jax.jit
    def segment(key, state, step_size, num_leapfrog, num_steps):
        params = BNNHMCParams(step_size, num_leapfrog)

        def body(i, carry):
            state, sums, values, accept, accepted = carry
            state, info = bnn_hmc_step(jax.random.fold_in(key, i), state, target, params)
            values = values.at[i].set(pointwise(state.position))
            return (state, sums + predict(state.position), values,
                    accept + info.acceptance_rate, accepted | info.accepted)

        sums = jnp.zeros((problem.masks.shape[0], problem.inputs.shape[1]))
        values = jnp.zeros((rows, problem.masks.shape[1]))
        return jax.lax.fori_loop(0, num_steps, body, (state, sums, values, 0.0, False))

    return segment


def cv_log_score(values: np.ndarray) -> float:
    """The bandit's reward: the library's predictive objective
    (`adaptmc.heldout.predictive_objective`) of one super-transition, ``values: (S, 300)``
    its ``S`` transitions' held-out pointwise log-likelihoods (`make_segment`): the mean over
    the training cases of ``log((1/S) sum_s p(y_c | theta_s))``, ``theta_s`` the draws of the
    fold network that held case ``c`` out. The segment evaluates
    `adaptmc_lab.models.cv.heldout_pointwise` at each draw as it goes, so the objective's
    pointwise function here is the identity."""
    from adaptmc.heldout import predictive_objective

    return predictive_objective(_same)(np.asarray(values), {}, 0)


def _same(row):
    return row


def run_hmc(problem: Problem, config: Config, start, seed: int, tuner=None, log=print,
            segment=None) -> dict:
    """The product chain for ``config.num_super_transitions`` super-transitions at expert
    settings (``tuner=None``) or tuned by ``tuner`` on the held-out reward; ``segment``: a
    compiled `make_segment` to reuse."""
    rows = max_steps(config)
    segment = segment or make_segment(problem, rows)
    state = BNNState(start, problem.target.logdensity(start))
    key = jax.random.key(seed)
    tuner_state = None if tuner is None else tuner.init(jax.random.fold_in(key, 1))
    record = {k: [] for k in ("step_size", "num_leapfrog", "reward", "acceptance_rate",
                              "num_steps", "sums", "wall_s_each")}
    tick, grads = time.perf_counter(), 0
    for t in range(config.num_super_transitions):
        key, key_tune, key_run = jax.random.split(key, 3)
        tuned = tuner is not None and t >= config.tuner_burn_in
        proposal = config.expert
        if tuned:
            proposal, tuner_state = tuner.propose(key_tune, tuner_state)
        step_size = float(proposal["step_size"])
        num_leapfrog = int(min(round(float(proposal["num_leapfrog"])), config.gradient_budget - 1))
        num_steps = config.gradient_budget // (num_leapfrog + 1)
        if num_steps > rows:
            raise ValueError(f"dexter: L {num_leapfrog} below the box's and the expert's")
        tick_st = time.perf_counter()
        state, sums, values, accept, accepted = segment(key_run, state, step_size,
                                                        num_leapfrog, num_steps)
        sums = np.asarray(sums)
        record["wall_s_each"].append(time.perf_counter() - tick_st)
        reward = cv_log_score(np.asarray(values)[:num_steps])
        if not bool(accepted) or not math.isfinite(reward):
            reward = float("nan")  # nothing new was drawn: says little about the setting
        if tuned:
            tuner_state = tuner.update(tuner_state, proposal, reward, {})
        grads += num_steps * (num_leapfrog + 1)
        for name, value in (("step_size", step_size), ("num_leapfrog", num_leapfrog),
                            ("reward", reward), ("acceptance_rate", float(accept) / num_steps),
                            ("num_steps", num_steps), ("sums", sums.astype(np.float32))):
            record[name].append(value)
        log(f"  [{t + 1}/{config.num_super_transitions}] eps {step_size:.3f} L {num_leapfrog} "
            f"accept {record['acceptance_rate'][-1]:.2f} reward {reward:.4f}")
    record["wall_s"], record["num_grads"] = time.perf_counter() - tick, grads
    return record


def run_nuts(problem: Problem, config: Config, start, seed: int, budget: int) -> dict:
    """BlackJAX NUTS with window adaptation on the product target, then chunks of draws
    until the gradients (warm-up included) reach ``budget``."""
    import blackjax

    target, predict = problem.target, make_predictor(problem)
    tick = time.perf_counter()
    key_warm, key_sample = jax.random.split(jax.random.key(seed + 1000))
    warmup = blackjax.window_adaptation(blackjax.nuts, target.logdensity)
    (state, parameters), warm_info = warmup.run(key_warm, start, num_steps=config.nuts_warmup)
    spent = warm = int(np.sum(warm_info.info.num_integration_steps))
    del warm_info
    kernel = blackjax.nuts(target.logdensity, **parameters)
    tick_sample = time.perf_counter()

    @jax.jit
    def one(state, key):
        state, info = kernel.step(key, state)
        return state, predict(state.position), info.num_integration_steps, info.acceptance_rate

    record = {"num_steps": [], "sums": [], "acceptance_rate": [], "grads_at": []}
    index = 0
    while True:
        new_state, probs, steps, accept = one(state, jax.random.fold_in(key_sample, index))
        index += 1
        if spent + int(steps) > budget:
            break
        state, spent = new_state, spent + int(steps)
        record["num_steps"].append(1)
        record["sums"].append(np.asarray(probs, np.float32))
        record["acceptance_rate"].append(float(accept))
        record["grads_at"].append(spent)
    record.update(wall_s=time.perf_counter() - tick, num_grads=spent, warmup_grads=warm,
                  sample_wall_s=time.perf_counter() - tick_sample,
                  step_size=float(parameters["step_size"]))
    return record


# ----------------------------------------------------------------------------- evaluation


def vote(probs: np.ndarray) -> np.ndarray:
    """Majority vote of the networks' classes, ``probs: (copies, n) -> (n,)`` in {0, 1}; a tie
    goes to the mean probability."""
    votes = np.sum(np.where(probs > 0.5, 1.0, -1.0), axis=0)
    return np.where(votes != 0, votes > 0, probs.mean(axis=0) > 0.5).astype(float)


def evaluate(problem: Problem, record: dict, budget: int, burn_in: float) -> dict:
    """Validation errors (each network, mean, median, majority vote) and test votes from the
    units (super-transitions or NUTS draws) whose gradients fall in ``(burn_in * budget,
    budget]``; ``record["grads_at"]``: cumulative gradients at the end of each unit."""
    grads = np.asarray(record["grads_at"], float)
    keep = (grads > burn_in * budget) & (grads <= budget)
    if not keep.any():
        return {"valid_errors": [], "mean": math.nan, "median": math.nan, "vote": math.nan,
                "test_votes": None, "num_units": 0}
    sums = np.sum(np.asarray(record["sums"], float)[keep], axis=0)
    probs = sums / np.sum(np.asarray(record["num_steps"], float)[keep])
    valid = probs[:, 300:600]
    errors = np.mean((valid > 0.5) != (problem.y_valid > 0.5), axis=1)
    return {"valid_errors": errors.tolist(), "mean": float(errors.mean()),
            "median": float(np.median(errors)),
            "vote": float(np.mean(vote(valid) != problem.y_valid)),
            "test_votes": np.where(vote(probs[:, 600:]) > 0.5, 1, -1), "num_units": int(keep.sum())}


def error_curve(problem: Problem, record: dict, budget: int, burn_in: float,
                num_marks: int = 8) -> list:
    """``(budget B, mean, median, vote)`` for runs truncated at ``B = budget * j / num_marks``
    (same burn-in fraction)."""
    rows = []
    for j in range(1, num_marks + 1):
        mark = budget * j // num_marks
        ev = evaluate(problem, record, mark, burn_in)
        rows.append((int(mark), ev["mean"], ev["median"], ev["vote"]))
    return rows


# ----------------------------------------------------------------------------- experiment


def _tuner(name: str, config: Config):
    from adaptmc.tuners import gp_ucb, make_box, parametric

    box = make_box({"step_size": config.step_size_box, "num_leapfrog": config.num_leapfrog_box})
    return {"gp-ucb": gp_ucb, "parametric": parametric}[name](box)


def run_experiment(config: Config, seed: int = 0, out: Path | None = None, log=print,
                   data=None) -> dict:
    """Every method from one common start; writes results as each method finishes."""
    started = time.perf_counter()
    problem = prepare(config, seed, data)
    log(f"features selected per fold; network {config.num_features}-"
        f"{'-'.join(map(str, config.hidden))}-1, {bnn.layout(problem.model).num_weights} weights")
    start, start_grads = find_start(problem, config.start_steps)
    budget = config.num_super_transitions * config.gradient_budget
    methods = {}
    plans = [(f"adaptive {name}", name) for name in config.tuners] + [("expert", None)]
    segment = make_segment(problem, max_steps(config))
    for label, tuner_name in plans:
        log(f"{label}:")
        tuner = None if tuner_name is None else _tuner(tuner_name, config)
        record = run_hmc(problem, config, start, seed, tuner, log=log, segment=segment)
        record["grads_at"] = np.cumsum(np.asarray(record["num_steps"]) *
                                       (np.asarray(record["num_leapfrog"]) + 1)).tolist()
        methods[label] = _summarise(problem, record, budget, config)
        log(f"  {label}: vote {methods[label]['vote']:.4f}, {record['wall_s']:.0f} s")
        if out is not None:
            _write(out, config, seed, methods, start_grads, time.perf_counter() - started)
    log("NUTS:")
    record = run_nuts(problem, config, start, seed, budget)
    methods["NUTS"] = _summarise(problem, record, budget, config)
    log(f"  NUTS: vote {methods['NUTS']['vote']:.4f}, {record['wall_s']:.0f} s")
    results = {"config": config._asdict(), "seed": seed, "start_grads": start_grads,
               "methods": methods, "wall_s": time.perf_counter() - started}
    results["table"] = format_table(config, methods, start_grads)
    if out is not None:
        _write(out, config, seed, methods, start_grads, results["wall_s"])
    return results


def _summarise(problem: Problem, record: dict, budget: int, config: Config) -> dict:
    ev = evaluate(problem, record, budget, config.burn_in)
    summary = {k: v for k, v in ev.items() if k != "test_votes"}
    summary["test_votes"] = None if ev["test_votes"] is None else ev["test_votes"].tolist()
    summary["curve"] = error_curve(problem, record, budget, config.burn_in)
    summary["wall_s"], summary["num_grads"] = record["wall_s"], int(record["num_grads"])
    summary["s_per_grad"] = seconds_per_gradient(record)
    summary["projected_full_s"] = summary["s_per_grad"] * FULL_BUDGET
    summary["acceptance_rate"] = float(np.mean(record["acceptance_rate"])) if record[
        "acceptance_rate"] else math.nan
    for name in ("step_size", "num_leapfrog", "reward", "warmup_grads"):
        if name in record:
            summary[name] = record[name]
    return summary


def seconds_per_gradient(record: dict) -> float:
    """Wall time per product gradient (predictions included) over the super-transitions after
    the first, which carries the compilation; the whole run when there is only one (NUTS:
    sampling after warm-up)."""
    walls = record.get("wall_s_each", [])
    if len(walls) > 1:
        grads = np.diff(np.asarray(record["grads_at"], float))
        return float(np.sum(walls[1:]) / np.sum(grads))
    if record.get("sample_wall_s") and record["num_grads"] > record.get("warmup_grads", 0):
        return record["sample_wall_s"] / (record["num_grads"] - record["warmup_grads"])
    return record["wall_s"] / max(record["num_grads"], 1)


def _write(out: Path, config: Config, seed: int, methods: dict, start_grads: int,
           wall_s: float) -> None:
    table = format_table(config, methods, start_grads)
    (out / "table.md").write_text(table + "\n")
    payload = {"config": config._asdict(), "seed": seed, "start_grads": start_grads,
               "wall_s": wall_s, "methods": methods, "literature": [list(r) for r in LITERATURE]}
    (out / "results.json").write_text(json.dumps(payload, indent=1))
    for label, summary in methods.items():
        if summary["test_votes"] is None:
            continue
        lines = "\n".join(str(v) for v in summary["test_votes"]) + "\n"
        (out / f"test_predictions_{label.replace(' ', '_')}.txt").write_text(lines)
        if label == f"adaptive {config.tuners[0]}":
            (out / "dexter_test.resu").write_text(lines)


def format_table(config: Config, methods: dict, start_grads: int) -> str:
    """Validation errors beside the literature rows, gradients, wall time and the time the
    full budget (160 x 20,000 gradients) would take at the measured cost per gradient."""
    budget = config.num_super_transitions * config.gradient_budget
    lines = [
        f"Dexter, {config.num_folds}-fold CV product chain: {config.num_super_transitions} "
        f"super-transitions x {config.gradient_budget} gradients = {budget} product gradients "
        f"per method (+{start_grads} Adam steps from a common start; Neal's budget "
        f"{FULL_BUDGET}). Errors on the 300 validation cases; burn-in {config.burn_in:.0%} "
        f"of the budget; reward: the library's held-out log score.",
        "",
        "| method | mean | median | majority vote | gradients | wall (s) | projected full "
        "budget (h) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, error in LITERATURE:
        lines.append(f"| {name} (literature, second-hand) | | | {error:.4f} | | | |")
    for label, m in methods.items():
        lines.append(f"| {label} (measured) | {m['mean']:.4f} | {m['median']:.4f} | "
                     f"{m['vote']:.4f} | {m['num_grads']} | {m['wall_s']:.0f} | "
                     f"{m['projected_full_s'] / 3600:.1f} |")
    lines += ["", "Error against budget (mean / median / vote at truncated budgets):", ""]
    for label, m in methods.items():
        points = ", ".join(f"{b}: {mn:.3f}/{md:.3f}/{v:.3f}" for b, mn, md, v in m["curve"])
        lines.append(f"- {label}: {points}")
    return "\n".join(lines)
