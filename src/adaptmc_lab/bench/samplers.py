"""The bench's samplers: plain functions ``(target, seed, config) -> SamplerOutput`` in
`SAMPLERS`, giving draws on the flat unconstrained space, gradient evaluations of warm-up and
tuning and of sampling counted separately and exactly, and wall and compile seconds.

Every adaptmc row runs a named recipe (`adaptmc.recipes`) through `adaptmc.api.run_plan`,
exactly as ``adaptmc sample --recipe NAME`` does with the options of `recipe_options` (the
row ``adaptmc-adaptive-hmc`` of seed ``s`` makes the draws of ``adaptmc sample --recipe
adaptive-hmc --seed s --warmup-steps W --draws D``, tested); NUTS is `adaptmc_lab.baselines.nuts`
(BlackJAX) or `adaptmc_lab.baselines.numpyro_nuts`. Every sampler of a row starts from the same
positions, the run's own default starts (`adaptmc_lab.bench.config.bench_starts`: retried as
Stan does where not finite): an adaptmc row's run makes and counts them; the others are given
them and charged the retries (the points tried beyond one per chain) as warm-up gradients.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from adaptmc_lab.bench.config import BenchConfig, SamplerOutput, bench_starts
from adaptmc_lab.bench.quantities import run_positions

RECIPE_ROWS: dict[str, tuple[str, dict]] = {
    "adaptmc-adaptive-hmc": ("adaptive-hmc", {}),
    # NUTS sampling after the default's warm-up (the default before MAMS, --mams off), and
    # the HMC tuning's variants, none of which runs with MAMS
    "adaptmc-nuts-sampling": ("adaptive-hmc", {"mams": "off"}),
    "adaptmc-adaptive-hmc-frozen": ("adaptive-hmc", {"tuning": 1, "mams": "off"}),
    "adaptmc-adaptive-hmc-nuts": ("adaptive-hmc", {"nuts": "choose", "mams": "off"}),
    "adaptmc-adaptive-hmc-nuts-always": ("adaptive-hmc", {"nuts": "always", "mams": "off"}),
    # NUTS right after the warm-up (one tuning super-transition, the fewest there are)
    "adaptmc-adaptive-hmc-nuts-frozen": ("adaptive-hmc", {"tuning": 1, "nuts": "always",
                                                          "mams": "off"}),
    "adaptmc-adaptive-hmc-parametric": ("adaptive-hmc", {"tuner": "parametric", "mams": "off"}),
    "adaptmc-adaptive-hmc-hedge": ("adaptive-hmc", {"tuner": "hedge", "mams": "off"}),
    "adaptmc-adaptive-hmc-sir": ("adaptive-hmc", {"tuner": "sir", "mams": "off"}),
    # the default's warm-up, then MAMS, thinned by the run's measurement (--mams on)
    "adaptmc-mams": ("adaptive-hmc", {"mams": "on"}),
    "adaptmc-adaptive-portfolio": ("adaptive-portfolio", {}),
    "adaptmc-bandit-hmc": ("bandit-hmc", {}),
    "adaptmc-hmc-da": ("hmc-da", {}),
    "adaptmc-hmc-grid": ("hmc-grid", {}),
    "adaptmc-gadmala": ("gradient-adaptive", {"kernel": "gadmala"}),
}
"""Bench row -> (recipe, options beyond `recipe_options`)."""


def row_options(row: str) -> dict:
    """What a cell of bench row ``row`` ran beyond the bench's config, as JSON: for a recipe
    row the recipe and every option it runs with, its defaults included (so a cell cached
    before a default changed is computed again); ``{}`` for a peer."""
    import inspect
    if row not in RECIPE_ROWS:
        return {}
    from adaptmc.recipes import get_recipe

    recipe, extra = RECIPE_ROWS[row]
    defaults = {p.name: p.default for p in inspect.signature(get_recipe(recipe)).parameters
                .values() if p.default is not inspect.Parameter.empty}
    return json.loads(json.dumps({"recipe": recipe, **defaults, **extra}, default=repr))


def recipe_options(recipe: str, config: BenchConfig) -> dict:
    """The options a recipe row runs with at the bench's sizes: adaptive-hmc and
    adaptive-portfolio warm up for ``num_warmup`` NUTS transitions and sample about
    ``num_samples`` draws' worth of gradients; the super-transition recipes keep their own
    defaults."""
    if recipe in ("adaptive-hmc", "adaptive-portfolio"):
        return {"warmup_steps": max(150, config.num_warmup), "draws": config.num_samples}
    return {}


def recipe_sampler(row: str) -> Callable[[Any, int, BenchConfig], SamplerOutput]:
    """The sampler of bench row ``row`` (`RECIPE_ROWS`): the recipe, run by
    `adaptmc.api.run_plan` from the row's starts; the wall time is the user's (call to
    InferenceData: warm-up, compilation and tuning included)."""
    recipe, extra = RECIPE_ROWS[row]

    def sampler(target, seed: int, config: BenchConfig) -> SamplerOutput:
        from adaptmc.api import run_plan
        from adaptmc.recipes import build

        tick = time.perf_counter()
        plan = build(recipe, target, seed=seed, **recipe_options(recipe, config), **extra)
        # the run's own starts, the row's (`bench_starts`), retries counted in its record
        result = run_plan(target, plan, chains=config.num_chains, seed=seed,
                          init_jitter=config.init_jitter, progress=False)
        wall = time.perf_counter() - tick
        stats = result.idata.sample_stats
        compile_s = result.compile_s  # the warm-up's compilation included
        tuning = result.idata.tuning
        # the kept super-transitions' every gradient (a thinned run's unkept steps too)
        kept = ~np.asarray(tuning["warmup"].values, dtype=bool)
        sampling_grads = int(np.sum(np.asarray(tuning["num_grads"].values)[kept]))
        host_s = float(np.sum(tuning["tuner_s"].values) + np.sum(tuning["objective_s"].values))
        return SamplerOutput(run_positions(result, target),
                             result.num_grads - sampling_grads,
                             sampling_grads, wall - compile_s, compile_s,
                             int(stats["diverging"].values.sum()),
                             _final_setting(result.idata), host_s, _programs(result.idata))

    sampler.__name__ = row.replace("-", "_")
    sampler.__doc__ = f"The recipe {recipe!r} with {extra or 'its defaults'}."
    return sampler


def _programs(idata) -> dict | None:
    """The run's compile census in two counts: programs compiled, and loaded from the
    compile cache (None without a census)."""
    if "compile_census" not in idata.attrs:
        return None
    programs = json.loads(idata.attrs["compile_census"])
    loaded = sum(1 for p in programs if p.get("cached"))
    return {"compiled": sum(1 for p in programs if p["compile_s"] > 0) - loaded,
            "loaded": loaded}


def _final_setting(idata) -> dict:
    """The tuned parameters of the last super-transition (the frozen setting), the tuning
    super-transitions run and, for adaptive-hmc, whether NUTS sampled; for an
    adaptive-portfolio run, ``gadmala_won`` (1 or 0) and the winner's frozen scalars."""
    if "portfolio" in idata.attrs:
        record = json.loads(idata.attrs["portfolio"])
        winner = record["winner"]
        scalars = {k: float(v) for k, v in record["trials"][winner]["params"].items()
                   if isinstance(v, (int, float))}
        return {"gadmala_won": float(winner == "gadmala"), **scalars}
    tuning = idata.tuning
    tuned = {"tuning": float(np.sum(np.asarray(tuning["warmup"].values)))}
    if "sampler" in idata.attrs:  # adaptive-hmc: 1 where NUTS sampled, 0 the frozen HMC
        record = json.loads(idata.attrs["sampler"])
        tuned["nuts"] = float(record["sampler"] == "nuts")
        if record["sampler"] == "mams":  # its step, steps, thinning and what set it
            tuned.update({f"mams_{k}": float(record[k]) for k in (
                "step_size", "num_leapfrog", "thin", "k_star", "r1", "overhead_per_draw",
                "measure_acceptance", "trajectory_length", "tau", "initial_step_size",
                "adapt_transitions")})
        warmup = json.loads(idata.attrs.get("warmup", "{}")).get("mams")
        if warmup is not None:  # MAMS was tried and not used: its step fell below its floor
            tuned.update({f"mams_{k}": float(warmup[k]) for k in (
                "step_size", "initial_step_size", "num_grads")})
    skip = set(("reward", "acceptance_rate", "divergences", "num_grads", "num_steps",
                "num_draws", "warmup", "wall_s", "tuner_s", "objective_s"))
    return {**tuned, **{name: float(np.asarray(tuning[name].values)[-1])
                        for name in tuning.data_vars
                        if name not in skip and np.asarray(tuning[name].values).ndim == 1}}


def blackjax_nuts(target, seed: int, config: BenchConfig) -> SamplerOutput:
    """BlackJAX NUTS (Hoffman & Gelman 2014) after Stan-style window adaptation of the step
    size and a diagonal mass matrix, chains vectorised, one compiled program
    (`adaptmc_lab.baselines.nuts`). Gradients: one per chain at the start plus one per leapfrog
    step."""
    from adaptmc_lab.baselines import nuts

    starts, retries = _given_starts(target, seed, config)
    result = nuts(target, seed, num_chains=config.num_chains, num_warmup=config.num_warmup,
                  num_draws=config.num_samples, initial_positions=starts)
    return _nuts_output(result, {"step_size": float(np.mean(result.step_size))}, retries)


def _given_starts(target, seed: int, config: BenchConfig) -> tuple[np.ndarray, int]:
    """The row's starts (`bench_starts`) for a sampler they are given to, and the retries
    it is charged: the points evaluated beyond one per chain (which it evaluates itself)."""
    made = bench_starts(target, seed, config.num_chains, config.init_jitter)
    return np.asarray(made.positions), int(sum(made.retries))


def _nuts_output(result, params: dict, retries: int) -> SamplerOutput:
    """A `adaptmc_lab.baselines.NutsResult` as a bench row's output (warm-up gradients, the
    initial ones and the starts' ``retries`` included, summed over chains; divergences
    after warm-up)."""
    return SamplerOutput(result.positions, int(np.sum(result.warmup_grads)) + retries,
                         result.sampling_grads, result.wall_s, result.compile_s,
                         int(np.sum(result.divergent)), params)


def numpyro_nuts(target, seed: int, config: BenchConfig) -> SamplerOutput:
    """NumPyro NUTS (`adaptmc_lab.baselines.numpyro_nuts`): Stan-style warm-up with a diagonal
    mass matrix, chains vectorised; ``compile_s`` is NaN and ``wall_s`` includes
    compilation."""
    from adaptmc_lab.baselines import numpyro_nuts as run_numpyro

    starts, retries = _given_starts(target, seed, config)
    result = run_numpyro(target, seed, num_chains=config.num_chains,
                         num_warmup=config.num_warmup, num_draws=config.num_samples,
                         initial_positions=starts)
    return _nuts_output(result, {}, retries)


def nutpie(target, seed: int, config: BenchConfig) -> SamplerOutput:
    """nutpie's NUTS on a PyMC model of the target (`adaptmc_lab.baselines.nutpie`; optional
    extra ``nutpie``; Gaussians and logistic regressions only): the outside reference.
    ``compile_s`` is its PyMC-to-numba compilation; chains run in nutpie's threads."""
    from adaptmc_lab.baselines.nutpie import nutpie_nuts

    starts, retries = _given_starts(target, seed, config)
    result = nutpie_nuts(target, seed, num_chains=config.num_chains,
                         num_warmup=config.num_warmup, num_draws=config.num_samples,
                         initial_positions=starts)
    return _nuts_output(result, {"step_size": float(np.mean(result.step_size))}, retries)


def nutpie_on_target(low_rank: bool) -> Callable[[Any, int, BenchConfig], SamplerOutput]:
    """nutpie's NUTS on the target's own JAX log density through ``from_pyfunc``
    (`adaptmc_lab.baselines.nutpie.nutpie_pyfunc`: any target, every call of the log density
    counted), diagonal or ``low_rank`` (nutpie's ``low_rank_modified_mass_matrix``);
    ``compile_s`` is the gradient's compilation, each gradient a Python callback."""

    def sampler(target, seed: int, config: BenchConfig) -> SamplerOutput:
        from adaptmc_lab.baselines.nutpie import nutpie_pyfunc

        starts, retries = _given_starts(target, seed, config)
        run = nutpie_pyfunc(target, seed, num_chains=config.num_chains,
                            num_warmup=config.num_warmup, num_draws=config.num_samples,
                            initial_positions=starts, low_rank=low_rank)
        stats = run.idata.sample_stats
        divergent = int(np.sum(stats["diverging"])) if "diverging" in stats else 0
        return SamplerOutput(run.positions, run.warmup_grads + retries,
                             run.num_grads - run.warmup_grads,
                             run.wall_s, run.compile_s, divergent, {})

    return sampler


SAMPLERS: dict[str, Callable[[Any, int, BenchConfig], SamplerOutput]] = {
    **{row: recipe_sampler(row) for row in RECIPE_ROWS},
    "blackjax-nuts": blackjax_nuts,
    "numpyro-nuts": numpyro_nuts,
    "nutpie": nutpie,
    "nutpie-diag": nutpie_on_target(low_rank=False),
    "nutpie-low-rank": nutpie_on_target(low_rank=True),
}
