"""Titsias & Dellaportas (2019, Sec. 4, Tables 1-2): gradient-based adaptive MCMC against
adaptive Metropolis, MALA and HMC with dual-averaged step sizes, and NUTS.

Protocol (full): per target, every sampler starts from the target's initial position, runs
``2 x 10^4`` burn-in iterations with its adaptation on, then ``2 x 10^4`` kept iterations
with adaptation frozen, repeated 10 times with different keys. Reported per sampler (means
over repeats): wall time (burn-in + kept, compile excluded), acceptance rate of the kept
iterations, robust ESS over coordinates (min, median, max; `adaptmc.diagnostics.robust_ess`:
per coordinate the least of bulk-ESS of x, of x^2 and tail-ESS), min
ESS per second and min ESS per 1000 gradient evaluations (every evaluation counted, burn-in
included: NUTS's sum of ``num_integration_steps``, gadMALA-exact's Hessian-vector product as
a second gradient, RWM-type samplers' log-density evaluations).

Samplers: gadRWM, gadMALA (fast, exact) with full Cholesky factors (`adaptmc.kernels.
gradient_adaptive`), adaptive Metropolis (Haario et al. 2001), MALA with dual averaging
(target 0.574), HMC with L in {5, 10, 20} and dual-averaged eps (target 0.65), and BlackJAX
NUTS with window adaptation (diagonal mass matrix, target 0.8) over the same burn-in length.

Targets: the 2-d Gaussian with correlation 0.99, Neal's 100-d Gaussian (sds 0.01..1), the
51-d GP Gaussian (`gp_gaussian_51d`) and Bayesian logistic regression on the six shared
sets (N(0, 100) prior, standardised inputs plus intercept).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np

from adaptmc import diagnostics, io
from adaptmc.kernels import KERNELS, Kernel
from adaptmc.targets.base import Target
from adaptmc_lab.targets import get_target

TARGETS = (
    "gauss-2d-v1",
    "neal-100d",
    "gp-gauss-51d",
    *(f"logistic-{name}"
      for name in ("australian", "german", "heart", "pima", "ripley", "caravan")),
)
SAMPLERS = ("gadrwm", "gadmala", "gadmala-exact", "gadmala-diag", "am", "mala-da", "hmc-5",
            "hmc-10", "hmc-20", "nuts")
RIEMANNIAN = {"rmhmc": {"num_leapfrog": 6, "integration_time": math.pi / 2},
              "msd": {"target_accept": 0.9}}
"""The Riemannian samplers (`adaptmc.kernels.manifold`, on the logistic sets' Fisher metric,
Girolami & Calderhead 2011, Sec. 7), both with the Metropolis correction and ``log|G|`` kept
(exact):

- RMHMC: a fresh momentum, ``L = 6`` steps over the integration time ``pi / 2``
  (``eps = pi / 12``), fixed. Why: the Fisher metric is close to the posterior precision
  here, and under a metric equal to a Gaussian's precision the flow rotates at unit angular
  frequency, so ``pi / 2`` (a quarter period) ends independent of the start. With the step
  dual-averaged toward acceptance 0.8 instead, German's ended at ``eps L = 3.1``, half a
  period: antithetic in ``x`` and ``x^2`` nearly unchanged (robust min ESS 96 of 1000
  draws), and Ripley's at 4.4 (23 of 1000).
- MSD: one step, Zlochin & Baram's persistence ``cos(theta) = 0.95``, its step size
  dual-averaged between super-transitions of `RIEMANNIAN_STEPS` iterations during burn-in
  (`adaptmc.tuners.dual_averaging_tuner` with ``zero_on_divergence=False``: a divergent
  step counts as a rejection, not its whole super-transition) toward acceptance 0.9, our
  choice (a rejection reverses its persistent momentum), then frozen.

Our choices, not the papers' (whose settings we could not check here)."""
RIEMANNIAN_STEPS = 50
QUICK_TARGETS = ("gauss-2d-v1", "neal-100d", "logistic-ripley")
QUICK_SAMPLERS = ("gadrwm", "gadmala", "am", "mala-da", "hmc-10", "nuts")
INITIAL_STEP_SIZE = 0.1

# Second-hand: Girolami & Calderhead (2011), German credit (5000 kept draws), as issue 5
# quotes them (not re-read from the paper).
LITERATURE = {
    "logistic-german": [
        {"sampler": "G&C 2011 HMC (lit., second-hand)", "min_ess": 3182.0, "time_s": 117.9},
        {"sampler": "G&C 2011 RMHMC (lit., second-hand)", "min_ess": 4757.0, "time_s": 246.6},
    ],
}


def make_kernel(name: str) -> Kernel:
    """The kernel of one sampler of the comparison (not NUTS), from `adaptmc.kernels.KERNELS`:
    the gradient-adaptive kernels and adaptive Metropolis (``am``) adapt inside every step
    (their ``adapt`` parameter); ``mala-da`` and HMC-L (``hmc-da``) dual-average their step
    size inside every step (target 0.574 and 0.65)."""
    if name in ("gadrwm", "gadmala", "gadmala-exact", "gadmala-diag", "gadmala-direct", "am",
                "mala-da"):
        return KERNELS[name]
    if name.startswith("hmc-") and name.split("-")[1].isdigit():
        return KERNELS["hmc-da"]
    raise ValueError(f"unknown sampler {name!r}; choose from {', '.join(SAMPLERS)}")


def make_plan(name: str, target: Target, num_burn: int, num_keep: int, seed: int = 0):
    """One sampler of the comparison (not NUTS) as the ``manual`` recipe: its kernel from
    step size `INITIAL_STEP_SIZE` (HMC-L: ``L`` leapfrog steps), adapting inside every step
    for ``num_burn`` iterations, then frozen for ``num_keep`` kept ones. Iterations come in
    super-transitions of ``gcd(num_burn, num_keep)`` steps (the budget is that many times a
    burn-in step's cost; gadMALA-exact's frozen step costs half its adapting one, so it makes
    twice the kept iterations)."""
    from adaptmc import recipes

    if name in RIEMANNIAN:
        return _riemannian_plan(name, target, num_burn, num_keep, seed)
    kernel = make_kernel(name)
    steps = math.gcd(num_burn, num_keep)
    lengths = {"num_leapfrog": int(name.split("-")[1])} if name.startswith("hmc-") else {}
    budget = steps * kernel.cost(kernel.Params(**lengths))
    return recipes.manual(target, kernel=kernel, step_size=INITIAL_STEP_SIZE, **lengths,
                          tuner="fixed", objective=None, warmup=num_burn // steps,
                          super_transitions=(num_burn + num_keep) // steps, budget=budget,
                          seed=seed, name=f"gradient-adaptive-{name}")


def _riemannian_plan(name: str, target: Target, num_burn: int, num_keep: int, seed: int):
    """RMHMC or MSD (`RIEMANNIAN`) on ``target``'s metric as the ``manual`` recipe, in
    super-transitions of `RIEMANNIAN_STEPS` iterations (fewer where they do not divide the
    burn-in and kept lengths); MSD's step size dual-averaged during burn-in, then frozen."""
    from adaptmc import recipes, tuners
    from adaptmc.kernels.manifold import metric_of, msd_kernel, rmhmc_kernel
    from adaptmc.recipes.plan import check_plan

    setting = RIEMANNIAN[name]
    kernel = (rmhmc_kernel if name == "rmhmc" else msd_kernel)(metric_of(target))
    steps = math.gcd(RIEMANNIAN_STEPS, num_burn, num_keep)
    lengths, step_size = {}, INITIAL_STEP_SIZE
    if "num_leapfrog" in setting:
        lengths = {"num_leapfrog": setting["num_leapfrog"]}
        step_size = setting["integration_time"] / setting["num_leapfrog"]
    budget = steps * kernel.cost(kernel.Params(**lengths))
    plan = recipes.manual(target, kernel=kernel, step_size=step_size, **lengths,
                          objective=None, warmup=num_burn // steps,
                          adapt_until=num_burn // steps,
                          super_transitions=(num_burn + num_keep) // steps, budget=budget,
                          seed=seed, name=f"gradient-adaptive-{name}")
    if "target_accept" in setting:
        plan = plan._replace(tuner=tuners.dual_averaging_tuner(
            step_size, target_accept=setting["target_accept"], zero_on_divergence=False))
    check_plan(plan)
    return plan


def metric_target(target_name: str) -> Target:
    """The logistic set ``logistic-NAME`` with its Fisher metric attached
    (`adaptmc_lab.models.metric_models.logistic_metric_target`: the same posterior as
    ``get_target(target_name)``); the Riemannian samplers run on it."""
    from adaptmc.datasets.logistic import load_logistic
    from adaptmc_lab.models.metric_models import logistic_metric_target

    if not target_name.startswith("logistic-"):
        raise ValueError(f"{target_name}: the Riemannian samplers ({', '.join(RIEMANNIAN)}) "
                         "run on the logistic sets only (their Fisher metric)")
    data = load_logistic(target_name.removeprefix("logistic-"))
    return logistic_metric_target(data.features, data.labels, name=target_name)


def _recipe_runner(plan, target: Target):
    """``run_once(key) -> (kept positions (draws, dim), acceptance, gradients, wall s)``:
    `adaptmc.api.run_plan` with one chain from the target's initial position; the wall time
    excludes compilation."""
    from adaptmc.api import run_plan

    start = np.asarray(target.initial_position)[None]

    def run_once(key):
        seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
        result = run_plan(target, plan, chains=1, seed=seed, initial_positions=start,
                          progress=False)
        positions = np.asarray(result.idata.posterior["x"].values[0])
        rate = float(result.idata.sample_stats["acceptance_rate"].mean())
        return positions, rate, result.num_grads, result.wall_s - result.compile_s

    return run_once


def _nuts_runner(target: Target, num_burn: int, num_keep: int):
    """BlackJAX NUTS after window adaptation, one chain (`adaptmc_lab.baselines.compile_nuts`),
    compiled once; gradients = 1 + sum of num_integration_steps."""
    from adaptmc_lab.baselines import compile_nuts

    program = compile_nuts(target, num_chains=1, num_warmup=num_burn, num_draws=num_keep)
    start = target.initial_position[None]

    def run_once(key):
        result = program.run(key[None], start)
        return (result.positions[0], float(np.mean(result.acceptance_rate)), result.total_grads,
                result.wall_s)

    return run_once


def measure(target: Target, name: str, num_burn: int, num_keep: int, repeats: int,
            seed: int) -> dict:
    """One sampler on one target: means over ``repeats`` single-chain runs."""
    tick = time.perf_counter()
    if name in RIEMANNIAN and "metric" not in target.info:
        target = metric_target(target.name)
    if name == "nuts":
        runner = _nuts_runner(target, num_burn, num_keep)
    else:
        runner = _recipe_runner(make_plan(name, target, num_burn, num_keep, seed), target)
    compile_s = time.perf_counter() - tick
    rows = []
    for r in range(repeats):
        positions, rate, grads, wall = runner(jax.random.fold_in(jax.random.key(seed), r))
        ess = diagnostics.robust_ess(positions[None])
        rows.append({"time_s": wall, "acceptance": rate, "num_grads": grads,
                     "min_ess": float(ess.min()), "median_ess": float(np.median(ess)),
                     "max_ess": float(ess.max())})
    out = {k: float(np.mean([row[k] for row in rows])) for k in rows[0]}
    out["min_ess_per_s"] = float(np.mean([r["min_ess"] / r["time_s"] for r in rows]))
    out["min_ess_per_1000_grads"] = float(
        np.mean([1000.0 * r["min_ess"] / r["num_grads"] for r in rows]))
    out.update(sampler=name, repeats=repeats, compile_s=compile_s, per_repeat=rows)
    return out


def markdown_table(target_name: str, results: list[dict], num_keep: int) -> str:
    """One target's table, with the ratio of every sampler's min ESS/s to NUTS's."""
    nuts = next((r for r in results if r["sampler"] == "nuts"), None)
    lines = [
        f"### {target_name}",
        "",
        "| sampler | time (s) | acc. | ESS min | ESS median | ESS max | min ESS/s "
        "| min ESS / 1000 grads | min ESS/s vs NUTS |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        ratio = f"{r['min_ess_per_s'] / nuts['min_ess_per_s']:.2f}x" if nuts and \
            nuts["min_ess_per_s"] > 0 else "-"
        lines.append(
            f"| {r['sampler']} | {r['time_s']:.2f} | {r['acceptance']:.2f} | {r['min_ess']:.0f} "
            f"| {r['median_ess']:.0f} | {r['max_ess']:.0f} | {r['min_ess_per_s']:.1f} "
            f"| {r['min_ess_per_1000_grads']:.2f} | {ratio} |")
    for lit in LITERATURE.get(target_name, []):
        scaled = lit["min_ess"] / 5000 * num_keep
        lines.append(
            f"| {lit['sampler']} | {lit['time_s']:.1f} | - | {lit['min_ess']:.0f} (5000 kept; "
            f"{scaled:.0f} per {num_keep}) | - | - | {lit['min_ess'] / lit['time_s']:.1f} "
            "| - | (other machine) |")
    return "\n".join(lines) + "\n"


def comparison_table(results: dict[str, list[dict]], sampler: str = "gadmala") -> str:
    """``sampler`` against NUTS on every target: min ESS per second and per 1000 gradient
    evaluations, with the ratios."""
    lines = [
        f"| target | {sampler} min ESS/s | NUTS min ESS/s | ratio | {sampler} min ESS/1000 "
        "grads | NUTS min ESS/1000 grads | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for target_name, rows in results.items():
        by_name = {r["sampler"]: r for r in rows}
        if sampler not in by_name or "nuts" not in by_name:
            continue
        mine, nuts = by_name[sampler], by_name["nuts"]
        per_s = mine["min_ess_per_s"] / max(nuts["min_ess_per_s"], 1e-300)
        per_g = mine["min_ess_per_1000_grads"] / max(nuts["min_ess_per_1000_grads"], 1e-300)
        lines.append(
            f"| {target_name} | {mine['min_ess_per_s']:.1f} | {nuts['min_ess_per_s']:.1f} "
            f"| {per_s:.2f}x | {mine['min_ess_per_1000_grads']:.2f} "
            f"| {nuts['min_ess_per_1000_grads']:.2f} | {per_g:.2f}x |")
    return "\n".join(lines) + "\n"


def run_protocol(out, targets=TARGETS, samplers=SAMPLERS, num_burn: int = 20_000,
                 num_keep: int = 20_000, repeats: int = 10, seed: int = 0,
                 force: bool = False, log: Callable[[str], None] = print,
                 compared: tuple[str, ...] = ("gadmala",)) -> dict:
    """Run ``samplers`` on ``targets`` and write ``results.json`` and ``results.md`` (with
    each of ``compared`` against NUTS at the end)."""
    jax.config.update("jax_enable_x64", True)
    out = io.prepare_output_dir(out, force=force)
    io.create_output_dir(out, force=force)
    config = {"targets": list(targets), "samplers": list(samplers), "num_burn": num_burn,
              "num_keep": num_keep, "repeats": repeats, "seed": seed,
              "device": str(jax.devices()[0])}
    results: dict[str, list[dict]] = {}
    sections = [
        "# Gradient-based adaptive MCMC (Titsias & Dellaportas 2019)",
        "",
        f"burn-in {num_burn}, kept {num_keep}, {repeats} repeat(s), one chain each; "
        "time = burn-in + kept (compile excluded); ESS = robust ESS of the kept draws "
        "(per coordinate the least of bulk-ESS of x, of x^2 and tail-ESS); "
        "gradients include burn-in.",
        "",
    ]
    for t_index, target_name in enumerate(targets):
        target = get_target(target_name)
        results[target_name] = []
        for name in samplers:
            tick = time.perf_counter()
            row = measure(target, name, num_burn, num_keep, repeats,
                          seed=seed + 1000 * t_index)
            results[target_name].append(row)
            log(f"[{target_name}] {name:14s} acc {row['acceptance']:.2f} min ESS "
                f"{row['min_ess']:8.1f} min ESS/s {row['min_ess_per_s']:9.1f} "
                f"({time.perf_counter() - tick:.1f} s with compile)")
            io.write_json(out / "results.json", {"config": config, "results": results})
        sections.append(markdown_table(target_name, results[target_name], num_keep))
        (out / "results.md").write_text("\n".join(sections))
    summary = [line for name in compared
               for line in (f"### {name} against NUTS", "", comparison_table(results, name))]
    (out / "results.md").write_text("\n".join(sections + summary))
    return results


def run_gradient_adaptive(out, quick: bool = False, force: bool = False, seed: int = 0) -> int:
    """``adaptmc-lab reproduce gradient-adaptive``: the full protocol, or with ``quick`` three
    targets, six samplers, 2000 + 2000 iterations and one repeat (about 2-3 minutes)."""
    if quick:
        run_protocol(out, QUICK_TARGETS, QUICK_SAMPLERS, num_burn=2000, num_keep=2000,
                     repeats=1, seed=seed, force=force)
    else:
        run_protocol(out, seed=seed, force=force)
    print(f"wrote {Path(out) / 'results.md'} and results.json")
    return 0


RIEMANNIAN_TARGETS = tuple(t for t in TARGETS
                           if t.startswith("logistic-") and t != "logistic-caravan")
"""Five of the six logistic sets: on caravan (5822 x 86) one RMHMC iteration took 0.42 s
and one MSD iteration 0.085 s here (each metric evaluation forms ``X^T W X``), hours per
repeat of the full protocol; ``--set caravan=1`` adds it (with shorter lengths)."""
RIEMANNIAN_SAMPLERS = ("rmhmc", "msd", "gadmala", "nuts")


def run_riemannian_logistic(out, quick: bool = False, force: bool = False, seed: int = 0,
                            sizes: dict | None = None) -> int:
    """``adaptmc-lab reproduce riemannian-logistic``: RMHMC and MSD (`RIEMANNIAN`) beside gadMALA
    and NUTS on the logistic sets (`RIEMANNIAN_TARGETS`), this experiment's protocol (issue
    16); ``sizes``
    (``--set num_burn=, num_keep=, repeats=``) shorten it, ``--set caravan=1`` adds caravan
    (0.4 s per RMHMC iteration), ``quick`` runs Ripley with 1000 + 1000 iterations once
    (about a minute)."""
    from adaptmc_lab.experiments import checked_sizes

    chosen = checked_sizes("riemannian-logistic", sizes or {},
                           ("num_burn", "num_keep", "repeats", "caravan"), ("caravan",))
    caravan = chosen.pop("caravan", 0)
    if caravan > 1:
        raise ValueError("riemannian-logistic: --set caravan=0 or 1")
    lengths = ({"num_burn": 1000, "num_keep": 1000, "repeats": 1} if quick else
               {"num_burn": 20_000, "num_keep": 20_000, "repeats": 10})
    lengths.update(chosen)
    targets = ("logistic-ripley",) if quick else RIEMANNIAN_TARGETS
    targets += ("logistic-caravan",) if caravan else ()
    run_protocol(out, targets, RIEMANNIAN_SAMPLERS, seed=seed, force=force,
                 compared=("rmhmc", "msd", "gadmala"), **lengths)
    print(f"wrote {Path(out) / 'results.md'} and results.json")
    return 0


def render(path) -> str:
    """Re-render the markdown tables (and the gadMALA-NUTS summary) from a results.json."""
    saved = json.loads(Path(path).read_text())
    num_keep = saved["config"]["num_keep"]
    tables = [markdown_table(name, rows, num_keep) for name, rows in saved["results"].items()]
    return "\n".join([*tables, comparison_table(saved["results"])])
