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
import warnings
from pathlib import Path
from typing import Any

import jax
import numpy as np

from adaptmc import io
from adaptmc.option_values import check_data, check_structured
from adaptmc.options import RUN_OPTIONS, OptionError, check_options, check_resources, check_value
from adaptmc.recipes import DEFAULT_RECIPE, Plan, build
from adaptmc.run import RunOptions, RunResult, run, run_keys, starting_positions
from adaptmc.run.faults import telling_target_errors

HELDOUT = next(o for o in RUN_OPTIONS if o.name == "heldout")


def run_plan(target, plan: Plan, *, chains: int = 4, seed: int = 0,
             initial_positions: np.ndarray | None = None, output_dir: str | Path | None = None,
             force: bool = False, resume: bool = False, checkpoint_every: int = 10,
             thin: int | None = None, progress: bool = True,
             config: dict | None = None, stop_after: int | None = None,
             init_jitter: float = 0.5) -> RunResult:
    """Run ``plan`` (a recipe's `Plan`, its warm-up stage included: from
    ``initial_positions``, default the run's own starts, jittered by ``init_jitter`` and
    retried where not finite, `adaptmc.run.starts`) on ``target`` with ``chains`` chains
    (`adaptmc.run.run` with `run_options`)."""
    return run(target, plan, options=run_options(
        plan, chains=chains, seed=seed, initial_positions=initial_positions,
        output_dir=output_dir, force=force, resume=resume, checkpoint_every=checkpoint_every,
        thin=thin, progress=progress, config=config, stop_after=stop_after,
        init_jitter=init_jitter))


def run_options(plan: Plan, *, chains: int = 4, config: dict | None = None,
                **options) -> RunOptions:
    """The `RunOptions` of a recipe's run: its config records the recipe and its options
    (``thin`` None: the plan's)."""
    config = {"recipe": plan.name, "options": plan.options, **(config or {})}
    return RunOptions(num_chains=chains, config=json.loads(json.dumps(config, default=io.jsonable)),
                      **options)


def warmup_key(seed: int):
    """The key of a plan's warm-up stage, independent of the run's keys."""
    return run_keys(seed, "warmup")


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
        ``model_kwargs`` are its data), a PyMC model or a ``.stan`` file.
    recipe, chains, seed, thin
        One of `adaptmc.recipes.RECIPES` (default: adaptive HMC); chains run in parallel;
        the run's seed; keep every ``thin``-th draw.
    data
        A Stan program's data (a dict, a ``.json`` or ``.json.zip`` file); for a NumPyro
        model, its keyword argument ``data``.
    output_dir, force, progress
        Write a run folder (resumable, `adaptmc.run.run`); show progress and the summary.
    init, init_jitter
        Where the chains start: a dict of named values in the model's own (constrained)
        space, ``{"tau": 2.0}`` (`adaptmc.targets.initial`), or in the unconstrained space
        (`adaptmc.run.starting_positions`): None (the target's start, retried as Stan does if
        not finite: `adaptmc.run.starts`) or a ``(dim,)`` point, each plus ``U(-init_jitter,
        init_jitter)`` per chain and coordinate; or ``(chains, dim)`` points, as they are.
    compile_cache
        Keep compiled programs on disk (`adaptmc.compile_cache.use_compile_cache`, as the
        command line does); it takes effect if nothing was compiled before in the process.
    float32
        Single precision. By default float64 whatever JAX's global flag (``sample`` turns
        ``jax_enable_x64`` on for the process); PyMC models and Stan programs refuse it.
    heldout
        With ``objective="predictive"``, the observations the reward predicts
        (`adaptmc.heldout`): a fraction held out with ``seed`` (``0.2``) or held-out data.
    **options
        The recipe's options (``draws``, ``metric``, ...); one it does not take: `ValueError`.
    """
    check_data(data)
    checked = check_sample_args(dict(
        recipe=recipe, chains=chains, seed=seed, thin=thin, init_jitter=init_jitter,
        output_dir=output_dir, force=force, progress=progress, compile_cache=compile_cache,
        float32=float32, model_kwargs=model_kwargs, init=init), options)
    chains, seed, thin, init_jitter, init, options = (checked[k] for k in (
        "chains", "seed", "thin", "init_jitter", "init", "options"))
    _before_any_work(compile_cache, output_dir, force, float32)
    with telling_target_errors(), one_chain_quiet(chains):
        made = in_precision(_make_target(target, model_args, model_kwargs, data), float32)
        check_resources(options, made.dim, chains, output_dir,
                        made.initial_position.dtype.itemsize)
        made, options, heldout_record = predictive_options(made, options, heldout, seed)
        init = _named_init(made, init)
        plan = build(recipe, made, seed=seed, **options)
        starts = None if init is None else np.asarray(
            starting_positions(made, chains, seed, init, init_jitter, check=False))
        result = run_plan(made, plan, chains=chains, seed=seed, initial_positions=starts,
                          output_dir=output_dir, force=force, thin=thin, progress=progress,
                          init_jitter=init_jitter)  # None: the run's own starts
        return _reported(result.idata, plan.name, heldout_record, progress)


def _named_init(target, init):
    """``init`` as a point of ``target``'s unconstrained space when it is a dict of named,
    constrained values (`adaptmc.targets.initial`); else as it is."""
    if not isinstance(init, dict):
        return init
    from adaptmc.targets.initial import unconstrained_point

    try:
        return unconstrained_point(target, init)
    except ValueError as err:
        raise OptionError("init", str(err).removeprefix("init").lstrip(": ")) from None


def _reported(idata, recipe: str, heldout_record: dict | None, progress: bool):
    """``idata`` with the recipe (and held-out observations) in its attributes; its
    summary printed when ``progress``."""
    idata.attrs["recipe"] = recipe
    if heldout_record is not None:
        idata.attrs["heldout"] = json.dumps(heldout_record)
    if progress:
        from adaptmc.diagnostics import format_summary

        print(format_summary(idata))
    return idata


def _before_any_work(compile_cache: bool, output_dir, force: bool, float32: bool) -> None:
    """Set JAX's precision (before the target's arrays are made), turn its compile cache on
    (`adaptmc.compile_cache`) and refuse an output folder that may not be written
    (`adaptmc.io.prepare_output_dir`), before any work."""
    jax.config.update("jax_enable_x64", not float32)
    if compile_cache:
        from adaptmc.compile_cache import use_compile_cache

        use_compile_cache()
    if output_dir is not None:
        from adaptmc.io import prepare_output_dir

        prepare_output_dir(output_dir, force=force)


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
    run_options = {o.name: o for o in RUN_OPTIONS}
    for name in ("chains", "seed", "thin", "init_jitter"):
        out[name] = check_value(run_options[name], args[name])
    for name in ("force", "progress", "compile_cache", "float32"):
        if not isinstance(args[name], bool | np.bool_):
            raise OptionError(name, f"must be True or False, got {args[name]!r}")
    if args["output_dir"] is not None and not isinstance(args["output_dir"], str | Path):
        raise OptionError("output_dir", f"must be a folder's path, got {args['output_dir']!r}")
    if args["model_kwargs"] is not None and not isinstance(args["model_kwargs"], dict):
        raise OptionError("model_kwargs", "must be a dict of the model's keyword arguments")
    out["init"] = _check_init(args["init"])
    out["options"] = check_options(options)
    check_structured(out["options"])  # box, grid, inverse_mass (adaptmc.option_values)
    return out


def predictive_options(target, options: dict, heldout, seed: int):
    """``objective="predictive"``: the training target and the held-out reward
    (`adaptmc.heldout.predictive_setup`) in place of the name; else everything as it is."""
    if heldout is not None:
        check_value(HELDOUT, heldout)
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
