"""Predictive tuning: the bandit's reward is how well each super-transition's draws predict
held-out observations (Wang 2012, sec. 3.2; Wang & de Freitas 2011), for any model whose
likelihood is a sum over observations and that gives its pointwise log-likelihood
(``target.info["pointwise"]``: NumPyro and PyMC models).

The thesis scores a super-transition by the mean cross-validation error of the predictions
made from that super-transition's draws only (squared error for the robot arm, 0-1 error for
Dexter). For a model in general the loss here is the log score: minus the mean over held-out
observations of the log of the Monte Carlo predictive density,
``reward = (1/h) sum_i log((1/S) sum_s p(y_i | theta_s))`` over the super-transition's ``S``
draws (Vehtari, Gelman & Gabry 2017, eq. 3, on held-out data). It needs only the pointwise
log-likelihood, it is proper (it rewards draws spread as the posterior is, not only a good
mean), and for a Gaussian likelihood of fixed noise it orders settings as the squared error
of the predictive mean does to first order.

Held-out observations are a fraction of the observations chosen at random with the run's
seed (taken out of the likelihood the chains sample: the posterior is the training
posterior), or held-out data given as the model's arguments (``{"x": x_test, "y":
y_test}``, a dict or a ``.json``/``.npz`` file), with the training data the model's own.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from adaptmc.options import OptionError


def heldout_indices(num_observations: int, fraction: float, seed: int) -> np.ndarray:
    """The observations held out: ``round(fraction * n)`` of ``n`` (at least one, at most
    ``n - 1``) drawn without replacement with ``seed``, sorted."""
    count = min(num_observations - 1, max(1, round(fraction * num_observations)))
    if count < 1:
        raise OptionError("heldout", f"the model has {num_observations} observation: none "
                          "can be held out")
    rng = np.random.default_rng([seed, 0x4E1D])
    return np.sort(rng.choice(num_observations, count, replace=False))


def predictive_setup(target, heldout: Any, seed: int):
    """``(training target, objective, record)`` of predictive tuning on ``target``:
    ``heldout`` a fraction in (0, 1) or held-out data (dict or file); ``record`` says which
    observations the reward reads (``heldout_indices`` or ``heldout_data``)."""
    if isinstance(heldout, str):  # the command line's text: a fraction or a file
        try:
            heldout = float(heldout)
        except ValueError:
            pass
    if isinstance(heldout, float) and not 0.0 < heldout < 1.0:
        raise OptionError("heldout", f"must be a fraction in (0, 1), got {heldout}")
    if "stan_model" in target.info:
        return _stan_setup(target, heldout)
    pointwise = target.info.get("pointwise")
    if pointwise is None:
        raise OptionError("objective", "'predictive' needs a model with a pointwise "
                          "log-likelihood (a NumPyro, PyMC or Stan model with observed data)")
    if heldout is None:
        raise OptionError("heldout", "objective 'predictive' needs held-out observations: "
                          "a fraction (e.g. 0.2) or held-out data (a dict or a .json/.npz "
                          "file of the model's arguments)")
    if isinstance(heldout, int | float) and not isinstance(heldout, bool):
        import jax.numpy as jnp

        count = int(np.asarray(pointwise(target.initial_position)).shape[0])
        held = heldout_indices(count, float(heldout), seed)
        index = jnp.asarray(held)

        def training(position, full=target.logdensity):
            return full(position) - jnp.sum(pointwise(position)[index])

        info = {k: v for k, v in target.info.items() if k != "observations"}
        info["heldout_indices"] = held.tolist()
        train = dataclasses.replace(target, logdensity=training, info=info)
        return (train, predictive_objective(lambda p: pointwise(p)[index]),
                {"heldout_indices": held.tolist()})
    data = read_heldout(heldout)
    pointwise(target.initial_position, data)  # a wrong name or shape fails here, once
    return (target, predictive_objective(lambda p: pointwise(p, data)),
            {"heldout_data": sorted(data)})


def _stan_setup(target, heldout: Any):
    """A Stan program's predictive tuning: the same program given the held-out data (a
    dict or a ``.json`` file) computes its generated quantity ``log_lik`` at each draw's
    unconstrained point; the run samples the program with its own (training) data."""
    from adaptmc.targets.observations import STAN_LOG_LIK
    from adaptmc.targets.stan import stan_target

    if heldout is None or isinstance(heldout, int | float):
        raise OptionError("heldout", "a Stan program takes held-out data (a dict or a .json "
                          "file for its data block), not a fraction: the program's "
                          "likelihood is its own")
    data = heldout if isinstance(heldout, dict) else str(heldout)
    held = stan_target(target.info["stan_file"], data, name=f"{target.name}-heldout")
    if held.dim != target.dim:
        raise OptionError("heldout", f"the program given the held-out data has {held.dim} "
                          f"parameters, not {target.dim}: the parameters must not depend on "
                          "the data's sizes")
    if STAN_LOG_LIK not in held.constrain(held.initial_position):
        raise OptionError("objective", "'predictive' with a Stan program needs the "
                          f"generated quantity {STAN_LOG_LIK} (one entry per observation)")

    def pointwise(position):
        return held.constrain(position)[STAN_LOG_LIK].reshape(-1)

    return target, predictive_objective(pointwise), {"heldout_data": "stan data"}


def read_heldout(heldout: Any) -> dict:
    """Held-out data: a dict of arrays, or a ``.json`` / ``.npz`` file holding one."""
    if isinstance(heldout, dict):
        return {str(k): np.asarray(v) for k, v in heldout.items()}
    path = Path(str(heldout))
    if not path.is_file():
        raise OptionError("heldout", f"must be a fraction in (0, 1) or held-out data (a dict, "
                          f"a .json or .npz file); no file {str(heldout)!r}")
    if path.suffix == ".npz":
        with np.load(path) as archive:
            return {k: archive[k] for k in archive.files}
    try:
        values = json.loads(path.read_text())
    except ValueError as err:
        raise OptionError("heldout", f"{path}: not valid JSON ({err})") from None
    if not isinstance(values, dict):
        raise OptionError("heldout", f"{path}: must hold an object of the model's arguments")
    return {k: np.asarray(v) for k, v in values.items()}


def predictive_objective(heldout_pointwise):
    """The reward ``(positions, stats, num_grads) -> float``: the mean held-out log
    predictive density of the super-transition's draws (the module's definition); NaN
    after a divergence, as every objective. ``heldout_pointwise: (dim,) -> (h,)``."""
    import jax
    from scipy.special import logsumexp

    program = jax.jit(jax.vmap(heldout_pointwise))

    def predictive(positions: np.ndarray, stats: dict, num_grads: int) -> float:
        div = stats.get("is_divergent")
        if div is not None and bool(np.any(div)):
            return float("nan")
        flat = np.asarray(positions).reshape(-1, positions.shape[-1])
        count = flat.shape[0]
        rows = 1 << max(0, math.ceil(math.log2(count)))  # a few programs for any count
        padded = np.concatenate([flat, np.repeat(flat[-1:], rows - count, axis=0)])
        values = np.asarray(program(padded))[:count]
        return float(np.mean(logsumexp(values, axis=0) - np.log(count)))

    predictive.__name__ = "heldout_log_predictive_density"
    return predictive
