"""The SIR policy as a mixture kernel (Mahendran, Wang, Hamze & de Freitas 2012, Sec. 4).

While adapting, settings are drawn one per adoption by sampling-importance-resampling under
the GP mean (`adaptmc.tuners.sir`). When adaptation stops, ``best`` does not freeze one
setting: it resamples ``M`` settings from ``num_candidates`` uniform points of the box in
proportion to ``exp(mu(x) / temperature)`` and returns them all, ``{name: (M,) array}``. A
kernel that accepts vectors of settings (`adaptmc.kernels.discrete.saw`) then picks one of the
``M`` uniformly at every move, so the sampling kernel is the mixture
``sum_m K_{theta_m} / M``, each ``theta_m`` drawn with probability ``∝ exp(mu / T)``: a
mixture of invariant kernels with state-independent weights, itself invariant.
"""

from __future__ import annotations

import numpy as np

from adaptmc.tuners.base import Tuner
from adaptmc.tuners.box import Box, from_unit, snap_unit
from adaptmc.tuners.gp import gp_predict
from adaptmc.tuners.policies import sir
from adaptmc.tuners.schedules import Schedule
from adaptmc.tuners.surrogate import NOISE_VAR, SIGNAL_VAR, GPConfig, fit_gp


def mixture_weights(box: Box, state: dict, candidates: np.ndarray, temperature: float,
                    alpha: float, signal_var: float, noise_var: float) -> np.ndarray:
    """Resampling weights ``(M,)`` of the unit-cube ``candidates: (M, d)``, ``∝ exp(mu(x) /
    temperature)`` under the GP mean fitted to ``state`` (uniform when it is empty); they sum
    to one."""
    if len(state["rewards"]) == 0:
        return np.full(len(candidates), 1.0 / len(candidates))
    post = fit_gp(box, state, GPConfig(alpha, signal_var, noise_var))
    mu = gp_predict(post, candidates)[0] / temperature
    weights = np.exp(mu - mu.max())
    return weights / weights.sum()


def mixture_settings(box: Box, state: dict, rng: np.random.Generator, num_settings: int,
                     temperature: float, num_candidates: int, alpha: float,
                     signal_var: float, noise_var: float) -> np.ndarray:
    """``(num_settings, d)`` box points resampled from ``num_candidates`` uniform candidates
    (the generator's first draw) with `mixture_weights`."""
    candidates = snap_unit(box, rng.random((num_candidates, box.dim)))
    weights = mixture_weights(box, state, candidates, temperature, alpha, signal_var,
                              noise_var)
    picks = rng.choice(num_candidates, size=num_settings, p=weights)
    return from_unit(box, candidates[picks])


def sir_mixture(
    box: Box,
    *,
    num_settings: int = 10,
    temperature: float = 0.1,
    num_candidates: int = 1000,
    alpha: float = 0.2,
    signal_var: float = SIGNAL_VAR,
    noise_var: float = NOISE_VAR,
    schedule: Schedule | None = None,
    initial: dict | None = None,
    seed: int = 0,
) -> Tuner:
    """SIR adaptation, then the mixture of ``num_settings`` resampled settings as ``best``.

    ``best`` is deterministic given the tuner state (its generator is seeded from ``seed``
    and the number of observations), so a resumed run freezes the same mixture. Other
    parameters as in `adaptmc.tuners.sir`.
    """
    if num_settings < 1:
        raise ValueError(f"num_settings must be >= 1, got {num_settings}")
    base = sir(box, temperature=temperature, num_candidates=num_candidates, alpha=alpha,
               signal_var=signal_var, noise_var=noise_var, schedule=schedule, initial=initial)

    def best(state):
        rng = np.random.default_rng([seed, len(state["rewards"])])
        points = mixture_settings(box, state, rng, num_settings, temperature, num_candidates,
                                  alpha, signal_var, noise_var)
        return {name: points[:, k] for k, name in enumerate(box.names)}

    return Tuner("sir-mixture", box.names, base.init, base.propose, base.update, best)
