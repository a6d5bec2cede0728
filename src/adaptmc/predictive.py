"""Posterior predictive draws of adaptmc's output: new data drawn from the model at each
kept draw (Gelman et al. 2013, BDA3 sec. 6.3), into the InferenceData's
``posterior_predictive`` group, for a NumPyro model (``numpyro.infer.Predictive`` on the
constrained draws) or a PyMC model (``pm.sample_posterior_predictive``, which reads
adaptmc's InferenceData as its own). A Stan program's replicated data are generated
quantities ``<y>_rep``: they are in ``posterior_predictive`` already.
"""

from __future__ import annotations

import sys
from typing import Any


def sample_posterior_predictive(idata, model: Any, *model_args, seed: int = 0,
                                **model_kwargs):
    """Add ``posterior_predictive`` to ``idata`` (a run's InferenceData) and return it.

    Parameters
    ----------
    idata
        What `adaptmc.sample` returned (or `adaptmc.io.read_run`'s draws).
    model
        The model that was sampled: a NumPyro model function or a ``pymc.Model``; a Stan
        program (``.stan``) has its ``<y>_rep`` generated quantities there already.
    *model_args, **model_kwargs
        A NumPyro model's arguments *without* the observations (``y=None``), so that its
        observed sites are drawn: as for ``numpyro.infer.Predictive``.
    seed
        Seed of the draws.

    Returns
    -------
    InferenceData
        ``idata`` with the group ``posterior_predictive``: one draw of each observed site
        per kept draw, ``(chain, draw, *observed shape)``.
    """
    if str(model).endswith(".stan"):
        if "posterior_predictive" not in idata.groups():
            raise ValueError("a Stan program's replicated data are generated quantities "
                             "named <y>_rep (e.g. `array[N] real y_rep = normal_rng(mu, "
                             "sigma);`); this run has none")
        return idata
    pymc = sys.modules.get("pymc")
    if pymc is not None and isinstance(model, pymc.Model):
        if model_args or model_kwargs:
            raise ValueError("a PyMC model takes no arguments here (set its pm.Data)")
        with model:
            return pymc.sample_posterior_predictive(idata, random_seed=seed,
                                                    extend_inferencedata=True,
                                                    progressbar=False)
    if callable(model) and sys.modules.get("numpyro") is not None:
        return _numpyro_predictive(idata, model, model_args, model_kwargs, seed)
    raise ValueError(f"cannot draw posterior predictive data from a {type(model).__name__}: "
                     "give the NumPyro model function or the pymc.Model that was sampled")


def _numpyro_predictive(idata, model, model_args: tuple, model_kwargs: dict, seed: int):
    """``numpyro.infer.Predictive`` over the posterior's ``(chain, draw)`` draws; the sites
    kept are the observed data's (when the run has them), else every drawn site that is not
    a posterior variable."""
    import jax
    import numpy as np
    from numpyro.infer import Predictive

    posterior = {k: np.asarray(v) for k, v in idata.posterior.data_vars.items()}
    predictive = Predictive(model, posterior_samples=posterior, batch_ndims=2)
    drawn = predictive(jax.random.key(seed), *model_args, **model_kwargs)
    observed = set(idata.observed_data.data_vars) if "observed_data" in idata.groups() \
        else None
    kept = {k: np.asarray(v) for k, v in drawn.items() if k not in posterior
            and (observed is None or k in observed)}
    if not kept:
        raise ValueError("the model drew no observed site: pass its arguments without the "
                         "observations (e.g. y=None) so that Predictive draws them")
    import arviz as az

    idata.extend(az.from_dict(posterior_predictive=kept), join="right")
    return idata


def target_posterior_predictive(idata, target: Any, seed: int = 0):
    """`sample_posterior_predictive` with the model a `Target` was made from (a run folder's
    target on the command line): a NumPyro model is called with its arguments, those equal
    to its observed data set to None; a PyMC model as it is; a Stan program's ``<y>_rep``
    are in ``idata`` already."""
    info = getattr(target, "info", {})
    if "stan_model" in info:
        return sample_posterior_predictive(idata, info.get("stan_file", "model.stan"))
    if info.get("source") == "pymc":
        return sample_posterior_predictive(idata, info["model"], seed=seed)
    if info.get("source") != "numpyro":
        raise ValueError(f"the target {getattr(target, 'name', '?')!r} is not a NumPyro, PyMC "
                         "or Stan model: it has no model to draw data from")
    import inspect

    import numpy as np

    model, observed = info["model"], info["observations"].observed.values()
    bound = inspect.signature(model).bind(*info["model_args"], **info["model_kwargs"])
    arguments = {name: None if any(np.shape(value) == np.shape(o) and np.array_equal(
        np.asarray(value), o) for o in observed) else value
        for name, value in bound.arguments.items()}
    return sample_posterior_predictive(idata, model, seed=seed, **arguments)
