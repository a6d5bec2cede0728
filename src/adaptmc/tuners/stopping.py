"""A stop rule as a tuner wrapper: tuning ends when the bandit's posterior separates its best
setting.

`stop_when_separated(inner, min_updates, tolerance, rule)` passes proposals and rewards to
the bandit ``inner`` and, after each update from the ``min_updates``-th on, measures what
freezing ``inner.best`` now would give up. It reads the bandit's GP posterior (mean ``mu``,
sd ``s`` of the normalised reward, `adaptmc.tuners.annealed.Posterior`) at the setting it
would freeze, ``x_hat`` (the measured setting of highest posterior mean,
`annealed.best_by_mean`), and over the box in force (a moving box's, as it has moved),
maximised with DIRECT (`adaptmc.tuners.optimise.direct_search`, and at least the largest
value at the measured settings). Three rules (`RULES`):

- ``"ucb-lcb"``: with probability about that of ``kappa`` standard deviations,
  ``max_x f(x) - f(x_hat) <= max_x UCB(x) - LCB(x_hat)`` (``UCB, LCB = mu +- kappa s``),
  the upper bound on the simple regret of Makarova et al. (2022, "Automatic termination for
  hyperparameter optimization", Sec. 3), here at the setting actually frozen rather than at
  the best lower bound among those tried;
- ``"ucb"``: ``max_x UCB(x) - UCB(x_hat)``, how far the bandit's most optimistic setting
  lies above the optimism at the one it would freeze: at zero, a UCB bandit with that
  ``kappa`` would pull ``x_hat`` again, so further tuning would refine the estimate of the
  frozen setting's reward but not change the choice (the "acquisition proposes a point
  already measured" test of Bayesian optimisation practice). Unlike ``ucb-lcb`` it has no
  floor of ``2 kappa s(x_hat)``: with the GP's noise of 0.1 of the observed reward range
  (`adaptmc.tuners.surrogate.NOISE_VAR`), that floor alone is a few tenths of the range
  until ``x_hat`` has been measured a dozen times;
- ``"ei"``: the largest expected improvement over the frozen setting's mean,
  ``max_x EI(x; mu(x_hat))`` (Jones, Schonlau & Welch 1998, Eq. 15), which EGO stops on once
  it falls below 1 % of the best value found.

Each is in normalised units; in the reward's own units it is ``(high - low)`` times that
(``low, high``: the raw rewards normalised to 0 and 1), and the rule compares it with the
frozen setting's predicted raw reward ``low + (high - low) mu(x_hat)``: it stops when the
ratio is at most ``tolerance`` (for an ESS-per-gradient reward, as a fraction of the
sampling phase's effective draws per gradient: how far the frozen setting may be short of
the box's best, confidently, for ``ucb-lcb``; how much more any setting may promise at
``kappa`` sd for ``ucb``; the improvement one more pull is expected to find for ``ei``). Where
the predicted reward is not positive the ratio is infinite (no stop). A bandit that compares
rewards on the log scale (`adaptmc.tuners.surrogate.GPConfig.log_rewards`) has ``low, high``
as log rewards: there ``(high - low)`` times a normalised difference is a log ratio, and the
ratio is its ``expm1``, the same fraction of the frozen setting's reward. All three ratios are
recorded after every update, whichever rule decides; DIRECT searches only the deciding
rule's acquisition, and the other is maximised over the points that search evaluated (a
lower bound: `separation`).

Choices where the papers are silent (stated, not tuned to a target):

- ``kappa = 2`` (`KAPPA`), not GP-UCB's ``sqrt(beta_i)`` (about 4-4.5 for a 2-d box in the
  first dozen steps, Srinivas et al. 2010): that union bound over every step and a
  discretised box is what GP-UCB's regret guarantee needs, and it keeps the bound above the
  whole observed reward range for any run of tens of super-transitions;
- a tolerance relative to the frozen setting's reward, since the normalised scale stretches
  whatever range was observed, noise included: a target on which every setting of the box
  is about as good (a flat reward) stops early, one whose best setting is a narrow peak does
  not until the peak is pinned;
- the rule is not consulted before ``min_updates`` updates nor before
  `SETTINGS_PER_DIM` ``* d`` distinct settings have scored: the GP's signal scale is the
  observed reward range (`adaptmc.tuners.surrogate.normalise_rewards`), which means
  something only once settings spread over the box have been measured, not repeats of one.

Once stopped, the wrapper proposes ``inner.best`` (fixed: ``inner`` is no longer updated)
and ``done(state)`` is True; the run loop (`adaptmc.run.run`) reads ``done`` and freezes
that setting at once, dropping the tuning super-transitions it no longer needs, so a run
costs fewer gradients and samples as long as planned.

State: ``{"updates": (), "stopped_at": () (-1 while adapting, else the updates seen when
the rule fired), "gaps": (n,), "leads": (n,), "eis": (n,) the three ratios after each
update (NaN where the rule was not consulted), "inner": inner state}``; ``describe``
records them (they reach the run's ``tuning.attrs["tuner_config"]``).
"""

from __future__ import annotations

import math

import numpy as np

from adaptmc.tuners import acquisition as acq
from adaptmc.tuners.annealed import Posterior, snapper
from adaptmc.tuners.base import Tuner, describe_inner
from adaptmc.tuners.optimise import direct_search

KAPPA = 2.0
"""Standard deviations of the confidence bounds (``UCB = mu + kappa sd``)."""

SETTINGS_PER_DIM = 2
"""Distinct scored settings per dimension of the box before the rule is consulted."""

RULES = ("ucb-lcb", "ucb", "ei")


def separation(posterior: Posterior | None, kappa: float = KAPPA,
               maxfun: int | None = None, rule: str = "ucb-lcb") -> tuple[float, float, float]:
    """``(gap, lead, ei)``: the ``ucb-lcb``, ``ucb`` and ``ei`` ratios of freezing the
    measured setting of highest posterior mean (see the module docstring); all ``inf``
    without a posterior, with fewer than `SETTINGS_PER_DIM` ``* d`` scored settings, or
    where the predicted reward is not positive.

    One DIRECT search, of the acquisition the ``rule`` decides by (the UCB for ``ucb-lcb``
    and ``ucb``, EI for ``ei``); the other acquisition's maximum is read at the points that
    search evaluated and at the measured settings: a lower bound, recorded beside the
    deciding ratio for comparison (a second search cost as much again as the first)."""
    if posterior is None or len(posterior.measured) < SETTINGS_PER_DIM * posterior.box.dim:
        return math.inf, math.inf, math.inf
    mu, sd = posterior.predict(posterior.measured)
    best = int(np.argmax(mu))
    span = posterior.high - posterior.low
    value = 1.0 if posterior.log else posterior.low + span * float(mu[best])
    if not value > 0:
        return math.inf, math.inf, math.inf
    incumbent = float(mu[best])

    def ucb(u):
        return acq.ucb(*posterior.predict(u), kappa**2)

    def ei(u):
        return acq.expected_improvement(*posterior.predict(u), incumbent)

    searched, other = (ei, ucb) if rule == "ei" else (ucb, ei)
    points, values = direct_search(searched, posterior.box.dim, snapper(posterior.box), maxfun)
    points = np.vstack([points, posterior.measured])
    values = np.concatenate([values, searched(posterior.measured)])
    maxima = {searched: float(np.max(values)), other: float(np.max(other(points)))}
    top, gain = maxima[ucb], maxima[ei]
    scale = span / value
    ratios = (scale * (top - (mu[best] - kappa * sd[best])),
              scale * (top - (mu[best] + kappa * sd[best])), scale * gain)
    # on the log scale a difference is a log ratio: as a fraction of the frozen reward
    return tuple(float(np.expm1(r)) for r in ratios) if posterior.log else ratios


def regret_bound(posterior: Posterior | None, kappa: float = KAPPA,
                 maxfun: int | None = None) -> float:
    """The ``ucb-lcb`` ratio of `separation`."""
    return separation(posterior, kappa, maxfun)[0]


def stop_when_separated(inner: Tuner, *, min_updates: int, tolerance: float,
                        rule: str = "ucb-lcb", kappa: float = KAPPA,
                        maxfun: int | None = None) -> Tuner:
    """Wrap the bandit ``inner`` so that it stops adapting once the ``rule``'s ratio
    (`separation`) falls to ``tolerance`` (see the module docstring).

    Parameters
    ----------
    inner
        A tuner with a ``posterior`` (the GP policies `gp_ucb`, `hedge`, `sir`, or a
        `moving_box` of one).
    min_updates, tolerance
        Updates before the rule is first consulted, ``>= 1``; the largest ratio (a
        fraction of the frozen setting's reward) at which the rule stops, ``> 0``.
    rule
        ``"ucb-lcb"`` (the regret bound), ``"ucb"`` (the UCB's lead over the frozen
        setting's) or ``"ei"`` (the largest expected improvement).
    kappa, maxfun
        Standard deviations of the confidence bounds; DIRECT's evaluation budget for
        ``max UCB`` (default ``100 d``).
    """
    min_updates = _checked(inner, min_updates, rule, tolerance, kappa)

    def init(key):
        return {"updates": np.asarray(0), "stopped_at": np.asarray(-1), "gaps": np.zeros(0),
                "leads": np.zeros(0), "eis": np.zeros(0), "inner": inner.init(key)}

    def done(state) -> bool:
        return int(state["stopped_at"]) >= 0

    def propose(key, state):
        if done(state):
            return inner.best(state["inner"]), state
        proposal, inner_state = inner.propose(key, state["inner"])
        return proposal, {**state, "inner": inner_state}

    def update(state, proposal, reward, stats):
        updates = int(state["updates"]) + 1
        if done(state):
            return {**state, "updates": np.asarray(updates)}
        inner_state = inner.update(state["inner"], proposal, reward, stats)
        measures = (math.nan,) * 3
        if updates >= min_updates:
            measures = separation(inner.posterior(inner_state), kappa, maxfun, rule)
        stopped = updates if measures[RULES.index(rule)] <= tolerance else -1
        recorded = {key: np.append(np.asarray(state[key], float), value)
                    for key, value in zip(("gaps", "leads", "eis"), measures, strict=True)}
        return {**state, **recorded, "updates": np.asarray(updates),
                "stopped_at": np.asarray(stopped), "inner": inner_state}

    def describe(state):
        return {"wrapper": "stop", "rule": rule, "min_updates": min_updates,
                "tolerance": float(tolerance), "kappa": float(kappa), "maxfun": maxfun,
                "stopped_at": int(state["stopped_at"]) if done(state) else None,
                **{key: _listed(state[key]) for key in ("gaps", "leads", "eis")},
                "inner": describe_inner(inner, state["inner"])}

    return Tuner(f"stop+{inner.name}", inner.names, init, propose, update,
                 lambda state: inner.best(state["inner"]), describe, done=done,
                 posterior=lambda state: inner.posterior(state["inner"]))


def _checked(inner: Tuner, min_updates, rule: str, tolerance: float, kappa: float) -> int:
    """`stop_when_separated`'s arguments checked (one `ValueError` each); ``min_updates``
    as an int."""
    if inner.posterior is None:
        raise ValueError(f"tuner {inner.name!r} has no posterior to read a stop rule from "
                         "(the GP bandits gp-ucb, hedge and sir have one)")
    if int(min_updates) != min_updates or min_updates < 1:
        raise ValueError(f"min_updates must be an integer >= 1, got {min_updates}")
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    if not tolerance > 0 or not kappa > 0:
        raise ValueError(f"tolerance and kappa must be positive, got {tolerance}, {kappa}")
    return int(min_updates)


def _listed(values) -> list:
    return [float(v) if math.isfinite(v) else None for v in values]
