"""What a model observed, and the pointwise log-likelihood of its draws: the InferenceData
groups ``log_likelihood``, ``observed_data`` and ``constant_data`` that ``az.loo`` and
``az.compare`` read (Vehtari, Gelman & Gabry 2017, PSIS-LOO), for NumPyro models (as
``az.from_numpyro`` makes them), PyMC models (as ``pm.compute_log_likelihood``), Stan
programs (the generated quantity ``log_lik``, ArviZ's convention) and JAX log densities
given a pointwise function.

A target carries them as ``info["observations"]``, an `Observations`; the run's
InferenceData gets its groups from `observation_groups`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

STAN_LOG_LIK = "log_lik"
"""The Stan generated quantity holding the pointwise log-likelihood (ArviZ's and loo's
convention)."""
STAN_REPLICATE_SUFFIX = "_rep"
"""Stan generated quantities ``<y>_rep`` are replicated data: ``posterior_predictive``."""


class Observations(NamedTuple):
    """A model's observations.

    Attributes
    ----------
    log_likelihood
        ``posterior: {name: (chains, draws, ...)} -> {observed name: (chains, draws, n...)}``,
        the log density of each observation given each draw; None: the target has none.
    observed, constant
        The observed data and the other data, ``{name: array}``.
    moved
        Posterior variables that belong to another group, ``{variable: group}`` (a Stan
        program's ``log_lik`` and ``y_rep``).
    """

    log_likelihood: Callable[[dict], dict] | None
    observed: dict[str, np.ndarray]
    constant: dict[str, np.ndarray]
    moved: dict[str, str] = {}


def observation_groups(target: Any, groups: dict) -> dict:
    """``groups`` (`az.from_dict`'s keywords: ``posterior``, ``sample_stats``, warm-up
    groups) with the target's observations added: ``log_likelihood`` (pointwise, of the kept
    draws), ``observed_data``, ``constant_data``, and moved variables in their groups."""
    observations = getattr(target, "info", {}).get("observations")
    if observations is None:
        return groups
    groups = {k: dict(v) for k, v in groups.items()}
    for prefix in ("", "warmup_"):
        posterior = groups.get(prefix + "posterior")
        if posterior is None:
            continue
        for variable, group in observations.moved.items():
            if variable in posterior:
                groups.setdefault(prefix + group, {})[variable] = posterior.pop(variable)
    if observations.log_likelihood is not None and "log_likelihood" not in groups:
        posterior = {k: np.asarray(v) for k, v in groups["posterior"].items()}
        groups["log_likelihood"] = {k: np.asarray(v) for k, v in
                                    observations.log_likelihood(posterior).items()}
    if observations.observed:
        groups["observed_data"] = dict(observations.observed)
    if observations.constant:
        groups["constant_data"] = dict(observations.constant)
    return groups


def numpyro_observations(model: Callable, args: tuple, kwargs: dict,
                         trace: dict) -> Observations:
    """A NumPyro model's observed sites (``trace``: the model run once), its array
    arguments as constant data (named by its signature), and ``numpyro.infer.
    log_likelihood`` of the posterior's latent sites, as ``az.from_numpyro`` computes it."""
    import inspect

    observed = {name: np.asarray(site["value"]) for name, site in trace.items()
                if site["type"] == "sample" and site["is_observed"]}
    try:
        bound = inspect.signature(model).bind(*args, **kwargs).arguments
    except TypeError:
        bound = {}
    constant = {}
    for name, value in bound.items():
        if isinstance(value, np.ndarray | list) or hasattr(value, "__jax_array__") \
                or type(value).__module__.startswith("jax"):
            array = np.asarray(value)
            if array.dtype.kind in "biuf" and array.ndim and not any(
                    array.shape == o.shape and np.array_equal(array, o)
                    for o in observed.values()):
                constant[name] = array
    latent = [name for name, site in trace.items()
              if site["type"] == "sample" and not site["is_observed"]]

    def log_likelihood(posterior: dict) -> dict:
        from numpyro.infer import log_likelihood as numpyro_log_likelihood

        samples = {k: posterior[k] for k in latent if k in posterior}
        return numpyro_log_likelihood(model, samples, *args, batch_ndims=2, **kwargs)

    return Observations(log_likelihood, observed, constant)


def pymc_observations(model: Any) -> Observations:
    """A PyMC model's observed and constant data (PyMC's own ``find_observations`` and
    ``find_constants``) and ``pm.compute_log_likelihood`` of the posterior."""
    from pymc.backends.arviz import find_constants, find_observations

    observed = {k: np.asarray(v) for k, v in find_observations(model).items()}
    constant = {k: np.asarray(v) for k, v in find_constants(model).items()}

    def log_likelihood(posterior: dict) -> dict:
        import arviz as az
        import pymc as pm

        idata = az.from_dict(posterior=posterior)
        with model:
            found = pm.compute_log_likelihood(idata, extend_inferencedata=False,
                                              progressbar=False)
        return {k: found[k].values for k in found.data_vars}

    return Observations(log_likelihood if model.observed_RVs else None, observed, constant)


def stan_observations(variables: list, data: dict) -> Observations:
    """A Stan program's ``log_lik`` to ``log_likelihood`` and its ``<y>_rep`` to
    ``posterior_predictive`` (``variables``: the program's `Variable`s); of its data,
    ``<y>`` of each ``<y>_rep`` is observed, the rest constant."""
    generated = [v.name for v in variables if v.block == "generated quantities"]
    moved = {name: "log_likelihood" for name in generated if name == STAN_LOG_LIK}
    replicated = [n for n in generated if n.endswith(STAN_REPLICATE_SUFFIX)]
    moved.update({name: "posterior_predictive" for name in replicated})
    stems = {n[:-len(STAN_REPLICATE_SUFFIX)] for n in replicated}
    arrays = {k: np.asarray(v) for k, v in data.items()}
    observed = {k: v for k, v in arrays.items() if k in stems}
    constant = {k: v for k, v in arrays.items() if k not in stems}
    return Observations(None, observed, constant, moved)


def pointwise_observations(log_likelihood: Callable, observed: dict | None = None,
                           constant: dict | None = None) -> Observations:
    """A JAX model's observations: ``log_likelihood(draw) -> {name: (n,)}`` (or one array,
    named ``"y"``), ``draw`` one draw's posterior variables as the run stores them (the
    target's ``constrain`` output, else its parameters by name), vectorised over chains
    and draws."""
    import jax

    def pointwise(posterior: dict) -> dict:
        values = jax.vmap(jax.vmap(log_likelihood))(posterior)
        return values if isinstance(values, dict) else {"y": values}

    return Observations(pointwise, dict(observed or {}), dict(constant or {}))


def numpyro_pointwise(model: Callable, args: tuple, kwargs: dict, constrain: Callable):
    """``(position, data=None) -> (n,)``: the log density of every observation of the NumPyro
    model given one unconstrained position, observed sites flattened in trace order;
    ``data`` (``{argument: value}``) replaces the model's arguments of those names (the
    held-out observations)."""
    import inspect

    import jax.numpy as jnp
    from numpyro.infer import log_likelihood

    try:
        bound = dict(inspect.signature(model).bind(*args, **kwargs).arguments)
        call_args: tuple = ()
    except TypeError:
        bound, call_args = dict(kwargs), tuple(args)

    def pointwise(position, data: dict | None = None):
        values = log_likelihood(model, constrain(position), *call_args, batch_ndims=0,
                                **{**bound, **(data or {})})
        return jnp.concatenate([jnp.ravel(v) for v in values.values()])

    return pointwise


def pymc_pointwise(model: Any, order: list[str], unravel: Callable):
    """``position -> (n,)``: the elementwise log density of the PyMC model's observed
    variables given one unconstrained position (``model.logp(vars=observed, sum=False)``
    through PyTensor's JAX backend)."""
    import jax.numpy as jnp
    from pymc.sampling.jax import get_jaxified_graph

    graph = get_jaxified_graph(inputs=list(model.value_vars),
                               outputs=model.logp(vars=model.observed_RVs, sum=False))

    def pointwise(position, data: dict | None = None):
        if data:
            raise ValueError("held-out data for a PyMC model: give a fraction (set pm.Data "
                             "for other data)")
        params = unravel(position)
        return jnp.concatenate([jnp.ravel(v) for v in graph(*(params[n] for n in order))])

    return pointwise
