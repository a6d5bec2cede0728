"""The posteriordb posteriors as JAX log densities: `posteriordb_target` pairs a posterior's
data and reference (`adaptmc.datasets.posteriordb`) with its translated Stan program
(`adaptmc.targets.posteriordb_models`, `adaptmc.targets.stan_translations`). The draws are
stored constrained and named as the Stan program and the reference name them (``theta``,
``mu``, ``tau``, not the unconstrained ``theta_trans``, ``log_tau``), labelled 1-based as
Stan's (``theta[1]``), which is what the benchmark compares with the reference.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.datasets.posteriordb import POSTERIORS, Posterior, load_posterior
from adaptmc.targets import posteriordb_models as models
from adaptmc.targets.base import Reference, Target, make_target
from adaptmc.targets.named_draws import group_named
from adaptmc.targets.stan_transforms import PosteriordbModel
from adaptmc.targets.stan_translations import NEW_MODELS

MODELS: dict[str, Callable[[dict], PosteriordbModel]] = {
    "eight_schools-eight_schools_noncentered": models.eight_schools_noncentered,
    "arK-arK": models.ar_k,
    "diamonds-diamonds": models.diamonds,
    "gp_pois_regr-gp_pois_regr": models.gp_pois_regr,
    "low_dim_gauss_mix-low_dim_gauss_mix": models.low_dim_gauss_mix,
    "garch-garch11": models.garch11,
    "kidiq-kidscore_momiq": models.kidscore_momiq,
    "nes1972-nes": models.nes,
    **NEW_MODELS,
}
assert set(MODELS) == set(POSTERIORS)


# --- targets -------------------------------------------------------------------------------


def posteriordb_model(posterior: Posterior) -> PosteriordbModel:
    """The translated model of a loaded posterior (by the folder's name)."""
    if posterior.name not in MODELS:
        raise ValueError(
            f"no JAX translation of posteriordb posterior {posterior.name!r}; translated: "
            f"{', '.join(MODELS)}"
        )
    return MODELS[posterior.name](posterior.data)


def posteriordb_target(name_or_path: str) -> Target:
    """A `Target` for a posteriordb posterior given by name or folder path.

    ``reference`` holds the published reference's mean, sd and MCSE over the constrained
    quantities under the reference names (e.g. ``"theta[1]"``, in the reference draws'
    order; Magnusson et al. 2024). The target's ``constrain`` (also ``info["constrain"]``:
    flat unconstrained position ``(dim,)`` -> dict of constrained arrays; use
    `adaptmc.targets.named_draws.constrained_draws` for many draws) gives the posterior
    group; ``info["unconstrain"]`` is its inverse (dict -> ``(dim,)``, for ``init`` and for
    reading a run's draws back as positions); ``info["index_origin"] = 1``: Stan's labels.
    ``parameter_names`` name the unconstrained coordinates as Stan does (`program_names`:
    ``tau`` for the coordinate ``log tau``, ``theta_trans[1]``).
    """
    posterior = load_posterior(name_or_path)
    model = posteriordb_model(posterior)
    target = make_target(
        model.logdensity,
        model.initial_params,
        name=f"pdb-{posterior.name}",
        constrain=model.constrain,
        info={
            "posterior": posterior.name,
            "path": str(posterior.path),
            "index_origin": 1,
            "unconstrain": lambda values: unconstrained_position(model, values),
        },
    )
    target.info["constrain"] = target.constrain
    out = dataclasses.replace(target, reference=posterior_reference(posterior),
                              parameter_names=program_names(target.parameter_names))
    out.programs.update(target.programs)  # the same log density: its start check's program
    return out


_TRANSFORM_PREFIXES = ("logit_", "log_")  # the translations' leaf names: log_tau, mu_raw...
_TRANSFORM_SUFFIX = "_raw"


def program_names(flat_names: tuple[str, ...]) -> tuple[str, ...]:
    """The flat unconstrained coordinates named as Stan names them (its
    ``unconstrained_param_names``, as a Stan program's target): each by the program's
    parameter it represents, labelled 1-based, ``("log_tau", "theta_trans[0]", "mu_raw[1]")``
    -> ``("tau", "theta_trans[1]", "mu[2]")``."""
    out = []
    for name in flat_names:
        base, _, index = name.partition("[")
        for prefix in _TRANSFORM_PREFIXES:
            base = base.removeprefix(prefix)
        base = base.removesuffix(_TRANSFORM_SUFFIX)
        if index:
            labels = (str(int(i) + 1) for i in index.rstrip("]").split(","))
            base = f"{base}[{','.join(labels)}]"
        out.append(base)
    return tuple(out)


def unconstrained_position(model: PosteriordbModel, values: dict) -> np.ndarray:
    """The flat unconstrained position ``(dim,)`` of one draw's constrained ``values``
    (``constrain``'s dict: ``{"theta": (8,), "mu": (), "tau": ()}``), in ``ravel_pytree``
    order."""
    params = model.unconstrain({k: np.asarray(v, float) for k, v in values.items()})
    leaves = jax.tree.leaves(jax.tree.map(
        lambda ref, v: np.asarray(v, float).reshape(np.shape(ref)), model.initial_params,
        params))
    return np.concatenate([np.ravel(leaf) for leaf in leaves])


def posterior_reference(posterior: Posterior) -> Reference:
    """The published reference of ``posterior`` as a `Reference` in the reference draws'
    order (``mean_value.json``'s for a posterior published with moments only): means and
    MCSEs of ``mean_value.json``, sds of all the published reference draws."""
    names = tuple(posterior.reference_draws or posterior.reference_mean)
    sd = posterior.reference_sd
    return Reference(names, np.array([posterior.reference_mean[n] for n in names]),
                     np.array([sd[n] for n in names]),
                     np.array([posterior.reference_mcse[n] for n in names]))


def reference_position(posterior: Posterior, model: PosteriordbModel, chain: int, draw: int):
    """The flat unconstrained position ``(dim,)`` of one reference draw."""
    flat = {name: draws[chain, draw] for name, draws in posterior.reference_draws.items()}
    return jnp.asarray(unconstrained_position(model, group_named(flat)))


def posteriordb_targets() -> dict[str, Callable[[], Target]]:
    """Builders for `BUILTIN_TARGETS`: ``"pdb-<posterior>"`` for each of `POSTERIORS`."""
    return {f"pdb-{name}": (lambda name=name: posteriordb_target(name)) for name in POSTERIORS}
