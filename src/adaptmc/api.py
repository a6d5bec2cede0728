"""The one-call API: ``adaptmc.sample(target, recipe="adaptive-hmc", chains=4, seed=0)``.

``target`` may be a `Target`, a built-in name or ``module:function``, a pair
``(logdensity_fn, initial_params)`` of a JAX log density over a pytree, a NumPyro model (with
its data as further arguments) or a PyMC model (`adaptmc.targets.as_target`). Draws come
back as ArviZ InferenceData, in the model's constrained space and with its variable names
when the target knows them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import jax
import numpy as np

from adaptmc.options import DECLARED, OptionError, check_options, check_resources, check_value
from adaptmc.recipes import DEFAULT_RECIPE, Plan, build, check_plan
from adaptmc.run import RunResult, default_positions, run, starting_positions
from adaptmc.run.compile_clock import compile_seconds
from adaptmc.run.faults import telling_target_errors


def run_plan(target, plan: Plan, *, chains: int = 4, seed: int = 0,
             initial_positions: np.ndarray | None = None, output_dir: str | Path | None = None,
             force: bool = False, resume: bool = False, checkpoint_every: int = 10,
             thin: int | None = None, progress: bool = True,
             config: dict | None = None) -> RunResult:
    """Run ``plan`` (a recipe's `Plan`) on ``target`` with ``chains`` chains: first its
    ``prepare`` step, if any (a warm-up from ``initial_positions``, default the run's own
    starts, with a key of its own), whose gradients count in the run's total; ``thin``
    (default: the plan's) keeps every ``thin``-th draw. The warm-up's seconds and its
    compilation (`adaptmc.run.compile_clock`) count in the result's."""
    prior_grads, attrs, initial_states = 0, {}, None
    if plan.prepare is not None:
        if progress:
            print(f"{plan.name}: warm-up ...", flush=True)
        started, compile_before = time.perf_counter(), compile_seconds()
        starts = default_positions(target, chains, seed) if initial_positions is None \
            else initial_positions
        prepared = plan.prepare(target, np.asarray(starts), warmup_key(seed))
        plan, initial_positions = prepared.plan, prepared.positions
        if prepared.states is not None:  # continue the chains, kernel state included
            initial_positions, initial_states = None, prepared.states
        prior_grads = prepared.num_grads
        attrs = {"warmup": json.dumps(prepared.record, default=_jsonable),
                 "prior_wall_s": time.perf_counter() - started,
                 "prior_compile_s": compile_seconds() - compile_before}
        if "portfolio" in prepared.record:
            attrs["portfolio"] = json.dumps(prepared.record["portfolio"], default=_jsonable)
        check_plan(plan)
        if progress:
            print(f"{plan.name}: warm-up done ({prior_grads:,} gradients); tuning in the box "
                  f"{prepared.record.get('box')}", flush=True)
    config = {"recipe": plan.name, "options": plan.options, **(config or {})}
    return run(
        target, plan.kernel, plan.params,
        num_super_transitions=plan.num_super_transitions,
        gradient_budget=plan.gradient_budget, num_chains=chains, tuner=plan.tuner,
        objective=plan.objective, num_warmup=plan.num_warmup, adapt_until=plan.adapt_until,
        seed=seed, initial_positions=initial_positions, initial_states=initial_states,
        output_dir=output_dir, force=force,
        resume=resume, checkpoint_every=checkpoint_every,
        thin=plan.thin if thin is None else thin, progress=progress,
        config=json.loads(json.dumps(config, default=_jsonable)), prior_grads=prior_grads,
        attrs=attrs, num_draws=plan.draws,
    )


def warmup_key(seed: int):
    """The key of a plan's ``prepare`` step, independent of the run's keys."""
    return jax.random.fold_in(jax.random.key(seed), 2**31 - 1)


def sample(target: Any, *model_args, recipe: str = DEFAULT_RECIPE, chains: int = 4,
           seed: int = 0, output_dir: str | Path | None = None, force: bool = False,
           thin: int | None = None, progress: bool = True, model_kwargs: dict | None = None,
           init=None, init_jitter: float = 0.5, data=None, compile_cache: bool = True,
           float32: bool = False, heldout=None, **options):
    """Draw from ``target`` with the named ``recipe`` and return ArviZ InferenceData.

    Parameters
    ----------
    target
        A `Target`, a built-in target name or ``module:function``, a pair
        ``(logdensity_fn, initial_params)``, a NumPyro model (``model_args`` and
        ``model_kwargs`` are its data) or a PyMC model.
    recipe
        One of `adaptmc.recipes.RECIPES` (default: the README's adaptive HMC).
    chains, seed, thin
        Chains run in parallel, the run's seed, keep every ``thin``-th draw.
    data
        A Stan program's data (``target`` a ``.stan`` file): a dict, or a ``.json`` or
        ``.json.zip`` file; for a NumPyro model, its keyword argument ``data``.
    output_dir, force
        Write a run folder (resumable, see `adaptmc.run.run`).
    init, init_jitter
        Where the chains start: a dict of named values in the model's own (constrained)
        space, ``{"tau": 2.0}`` (`adaptmc.targets.initial`; parameters left out start
        where the target starts), or in the target's unconstrained space (`adaptmc.run.
        starting_positions`): ``None`` (the target's initial position) or a ``(dim,)``
        point, each plus ``U(-init_jitter, init_jitter)`` per chain and coordinate; or
        ``(chains, dim)`` points, used as they are.
    progress
        Show a progress bar and print the summary at the end.
    compile_cache
        Keep compiled programs on disk and load them when the same model runs again at the
        same sizes (`adaptmc.compile_cache.use_compile_cache`, as the command line does);
        ``False`` compiles afresh. It takes effect if nothing was compiled before in the
        process (JAX decides once).
    float32
        Compute in single precision. By default the run is float64 whatever JAX's global
        flag was, as on the command line: `sample` turns on ``jax_enable_x64`` (a setting of
        the whole process) unless ``float32=True``, which a target computing in float64 (a
        PyMC model, a Stan program) refuses.
    heldout
        With ``objective="predictive"``: the observations the bandit's reward predicts
        (`adaptmc.heldout`), a fraction held out at random with ``seed`` (``0.2``) or
        held-out data as the model's arguments (a dict or a ``.json``/``.npz`` file).
    **options
        The recipe's options (e.g. ``super_transitions``, ``budget``, ``tuner``,
        ``metric``); an option the recipe does not take is a `ValueError`.
    """
    checked = check_sample_args(dict(recipe=recipe, chains=chains, seed=seed, thin=thin,
                                     init_jitter=init_jitter, output_dir=output_dir,
                                     force=force, progress=progress,
                                     compile_cache=compile_cache, float32=float32,
                                     model_kwargs=model_kwargs, init=init), options)
    chains, seed, thin, init_jitter, init = (checked[k] for k in (
        "chains", "seed", "thin", "init_jitter", "init"))
    options = checked["options"]
    jax.config.update("jax_enable_x64", not float32)  # before the target's arrays are made
    if compile_cache:
        from adaptmc.compile_cache import use_compile_cache

        use_compile_cache()
    if output_dir is not None:
        from adaptmc.io import prepare_output_dir

        prepare_output_dir(output_dir, force=force)  # refuse before any work
    with telling_target_errors(), one_chain_quiet(chains):
        made = in_precision(_make_target(target, model_args, model_kwargs, data), float32)
        check_resources(options, made.dim, chains, output_dir,
                        made.initial_position.dtype.itemsize)
        if heldout is not None:
            check_value(DECLARED["heldout"], heldout)
        made, options, heldout_record = predictive_options(made, options, heldout, seed)
        if isinstance(init, dict):
            from adaptmc.targets.initial import unconstrained_point

            try:
                init = unconstrained_point(made, init)
            except ValueError as err:
                problem = str(err).removeprefix("init").lstrip(": ")
                raise OptionError("init", problem) from None
        plan = build(recipe, made, seed=seed, **options)
        starts = None if init is None and init_jitter == 0.5 else \
            np.asarray(starting_positions(made, chains, seed, init, init_jitter))
        result = run_plan(made, plan, chains=chains, seed=seed, initial_positions=starts,
                          output_dir=output_dir, force=force, thin=thin, progress=progress)
        idata = result.idata
        idata.attrs["recipe"] = plan.name
        if heldout_record is not None:
            idata.attrs["heldout"] = json.dumps(heldout_record)
        if progress:
            from adaptmc.diagnostics import format_summary

            print(format_summary(idata))
    return idata


ONE_CHAIN_NOTE = "note: one chain: R-hat compares chains and needs at least 2; it is not computed"


@contextlib.contextmanager
def one_chain_quiet(chains: int):
    """With one chain, R-hat cannot be computed: `ONE_CHAIN_NOTE` is printed once, and
    NumPy's and ArviZ's warnings about it (an all-NaN column, a shape below two chains)
    are not."""
    if chains != 1:
        yield
        return
    print(ONE_CHAIN_NOTE, file=sys.stderr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz
    logger = getattr(arviz, "_log", logging.getLogger("arviz"))  # ArviZ's own logger object
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="All-NaN", category=RuntimeWarning)
            warnings.filterwarnings("ignore", message=".*chains", category=UserWarning)
            yield
    finally:
        logger.setLevel(level)


def check_sample_args(args: dict, options: dict) -> dict:
    """`sample`'s keywords checked by their declarations (`adaptmc.options`), each bad
    one an `OptionError` naming it; returns them (``options``: the recipe's) as checked."""
    from adaptmc.recipes import RECIPES

    if not isinstance(args["recipe"], str) or args["recipe"] not in RECIPES:
        raise OptionError("recipe", f"must be one of {', '.join(RECIPES)}, got "
                          f"{args['recipe']!r}")
    out = dict(args)
    for name in ("chains", "seed", "thin", "init_jitter"):
        out[name] = check_value(DECLARED[name], args[name])
    for name in ("force", "progress", "compile_cache", "float32"):
        if not isinstance(args[name], bool | np.bool_):
            raise OptionError(name, f"must be True or False, got {args[name]!r}")
    if args["output_dir"] is not None and not isinstance(args["output_dir"], str | Path):
        raise OptionError("output_dir", f"must be a folder's path, got {args['output_dir']!r}")
    if args["model_kwargs"] is not None and not isinstance(args["model_kwargs"], dict):
        raise OptionError("model_kwargs", "must be a dict of the model's keyword arguments")
    out["init"] = _check_init(args["init"])
    out["options"] = check_options(options)
    return out


def predictive_options(target, options: dict, heldout, seed: int):
    """``objective="predictive"``: the training target and the held-out reward
    (`adaptmc.heldout.predictive_setup`) in place of the name; else everything as it is."""
    if options.get("objective") != "predictive":
        if heldout is not None:
            raise OptionError("heldout", "is for objective='predictive'")
        return target, options, None
    from adaptmc.heldout import predictive_setup

    target, objective, record = predictive_setup(target, heldout, seed)
    return target, {**options, "objective": objective}, record


def in_precision(target, float32: bool):
    """``target`` computing in the asked precision: a target made in float32 (before
    `sample` turned float64 on) starts from its start in float64; ``float32`` with a target
    that computes in float64 is an `OptionError`."""
    import dataclasses

    import jax.numpy as jnp

    itemsize = target.initial_position.dtype.itemsize
    if float32 and (itemsize > 4 or jax.config.read("jax_enable_x64")
                    or target.info.get("stan_model") is not None
                    or target.info.get("source") == "pymc"):
        raise OptionError("float32", f"the target {target.name!r} computes in float64 (a "
                          "PyMC model, a Stan program or float64 arrays); drop float32=True")
    if not float32 and itemsize < 8:
        return dataclasses.replace(target, initial_position=jnp.asarray(
            target.initial_position, jnp.float64))
    return target


def _check_init(init):
    """``init`` as a float array (None stays None), or `OptionError` naming it."""
    if init is None:
        return None
    if isinstance(init, dict):  # named constrained values: mapped once the target is made
        if not all(isinstance(k, str) for k in init):
            raise OptionError("init", "a dict must map parameter names to values")
        return init
    if isinstance(init, str | bytes):
        raise OptionError("init", "must be a dict of named values or an array of numbers, "
                          "the unconstrained point (dim,) or points (chains, dim), got a "
                          f"{type(init).__name__}")
    try:
        values = np.asarray(init, dtype=float)
    except (TypeError, ValueError) as err:
        raise OptionError("init", f"must be an array of numbers ({err})") from None
    if not np.all(np.isfinite(values)):
        raise OptionError("init", "must hold finite numbers")
    return values


def _make_target(target, model_args: tuple, model_kwargs: dict | None, data=None):
    """`adaptmc.targets.as_target`, saying what is missing when a model function's data
    was not passed."""
    import inspect

    from adaptmc.targets import as_target

    try:
        return as_target(target, *model_args, **(model_kwargs or {}),
                         **({} if data is None else {"data": data}))
    except (ValueError, TypeError) as err:
        if not callable(target) or model_args or model_kwargs:
            raise
        try:
            needed = [p.name for p in inspect.signature(target).parameters.values()
                      if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                                                             p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            raise err from None
        if not needed:
            raise
        raise ValueError(
            f"target: the model {getattr(target, '__name__', 'function')}"
            f"({', '.join(needed)}) was called without its data; pass it after the model, "
            f"adaptmc.sample(model, {', '.join(needed)}, ...), or as model_kwargs "
            f"({err})") from None


def _jsonable(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return repr(value)
