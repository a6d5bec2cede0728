"""MAMS's two measured rules (`adaptmc.recipes.mams_sampling`): the trajectory length the
chains' autocorrelation asks for (`trajectory_length`) and the transitions per kept draw that
make the most effective draws per gradient of the whole run (`thinning`)."""

from __future__ import annotations

import math

import numpy as np

from adaptmc.objectives import geyer_fractions, robust_ess_per_grad, standardised

LENGTH_FACTOR = 0.4
"""``c`` of the trajectory-length rule ``L = c eps n_eff`` (`trajectory_length`):
BlackJAX's ``make_adaptation_L`` default (``l_factor``)."""

MAX_LENGTH_CHANGE = 4.0
"""The most the measured trajectory length may differ from the first, as a factor."""

MAX_THIN = 16
"""The most transitions per kept draw."""

SETTLED_ADAPT_SHARE = 0.5
"""The share of MAMS's dual-averaging transitions (`mams_sampling.ADAPT_TRANSITIONS`) run
after a warm-up that settled (`adapt_transitions`)."""

MIN_DIM = 3
"""The least dimension at which ``mams="auto"`` samples with MAMS (below it, NUTS after the
same warm-up). Our choice, from the broad bench (BENCHMARKS, "MAMS keeps its last
measurement's draws"): at dimension 3-5, with two steps at least and the measurement's
draws kept, MAMS gave 1.27x NUTS's robust ESS per gradient (geometric mean over the 35 runs
both got right; one run right with NUTS turned wrong, R-hat 1.013), at 6-10 1.48x,
11-100 1.10x, above 100 1.38x (the earlier bench, "Where MAMS samples by default"). At 2
dimensions not measured through the bench (4 runs there); at 1, MAMS's unit velocity is a
sign (`adaptmc.kernels.mams`)."""


def adapt_transitions(most: int, settled: dict | None, far: dict | None) -> int:
    """MAMS's dual-averaging transitions per chain after a warm-up whose settling test said
    ``settled`` (`adaptmc.adaptation.settled.record`) and which regrouped ``far`` chains
    (`adaptmc.adaptation.chains.regroup_far_chains`): ``most``, or `SETTLED_ADAPT_SHARE` of
    it where the warm-up ended early (its metric, step and chains settled and agreed) and no
    chain was far. The averaging's transitions are also the chains' burn-in under MAMS:
    where the warm-up ran to its end (a hierarchical posterior whose chains were still
    moving in) they need all of them; where it settled, the chains stand at the posterior
    and the averaging alone is left, from a step the warm-up already fitted. Our rule, from
    the broad bench (BENCHMARKS, "Half of MAMS's step adaptation after a warm-up that
    settled"): half the transitions on every run gave 1.05x the robust ESS per gradient
    and turned four runs wrong, all four after warm-ups that had not settled."""
    if settled and settled.get("ended_early") and not far:
        return int(round(SETTLED_ADAPT_SHARE * most))
    return int(most)


def trajectory_length(positions: np.ndarray, length: float) -> tuple[float, float]:
    """``(L', tau)``: the trajectory length the chains' autocorrelation asks for, from
    ``positions: (chains, n, dim)`` drawn at trajectory length ``length``, and ``tau``, the
    mean over coordinates of their transitions per effective draw (Geyer's initial monotone
    sequence, chains pooled: `adaptmc.objectives.geyer_fractions`).

    The MCLMC rule (Robnik, De Luca, Silverstein & Seljak 2023, "Microcanonical
    Hamiltonian Monte Carlo", its tuning of ``L``; BlackJAX's ``make_adaptation_L``, whose
    constant `LENGTH_FACTOR` = 0.4 we use) sets ``L = c eps n_eff``, ``n_eff = n tau`` the
    steps per effective draw, i.e. ``L_rule = c length tau``: its fixed point is where
    ``c tau(L) = 1``. One application from a short ``length`` overshoots: a trajectory
    short against a coordinate's scale ``s`` moves it diffusively, ``tau ~ s^2 / L^2``, so
    ``L_rule ~ s^2 / length``. We take the geometric mean of ``length`` and ``L_rule``,

        L' = length sqrt(c tau),

    the Newton step of ``log c tau(L) = 0`` in ``log L`` where ``tau ~ L^-2``: for an
    isotropic Gaussian of sd ``s`` per coordinate (in the metric's units) it lands near the
    fixed point, ``~s sqrt(d)`` times a constant (tests/test_mams_length.py: from 1.9x it; a
    length too long makes independent draws, ``tau = 1``, ``L' = 0.63 length``); with
    ``tau`` averaged over coordinates of sds ``s_i`` it is ``~sqrt(sum s_i^2)`` (from 0.6x
    it in the same tests), the trace rule the MAMS
    paper's tuning starts ``L`` from (Robnik, Cohn-Gordon & Seljak 2025; BlackJAX's
    ``adjusted_mclmc_make_L_step_size_adaptation``). Clipped to
    ``length [1 / MAX_LENGTH_CHANGE, MAX_LENGTH_CHANGE]``; ``length`` itself (and NaN) when
    the draws cannot be measured (a coordinate that did not move, or non-finite draws).
    """
    z = standardised(np.asarray(positions, dtype=float))
    if z is None or z.shape[1] < 4:
        return float(length), float("nan")
    fractions = geyer_fractions(z)
    if not np.all(fractions > 0):
        return float(length), float("nan")
    tau = float(np.mean(1.0 / fractions))
    change = min(max(math.sqrt(LENGTH_FACTOR * tau), 1.0 / MAX_LENGTH_CHANGE),
                 MAX_LENGTH_CHANGE)
    return float(length * change), tau


def thinning(r1: float, grads_per_transition: float, overhead: float,
             most: int = MAX_THIN) -> tuple[float, int]:
    """``(k*, k)``: the transitions per kept draw that make the most effective draws per
    gradient of the whole run, and ``k = clip(round(k*), 1, most)``.

    A run keeping ``N`` draws per chain, every ``k``-th transition, spends ``N (W' + k g)``
    gradients per chain: ``W'`` those before the first kept draw over ``N`` (warm-up and
    adaptation), ``g`` a transition's. With ``r1`` the effective draws per transition
    (``1 / tau``), the kept draws are modelled as ``ESS(k) = N k r1 / (1 + k r1)``: the
    ``N k r1`` of the transitions while ``k r1`` is small, ``N`` (independent draws) as it
    grows (``1 / ESS = 1 / (N k r1) + 1 / N``). The run's effective draws per gradient

        E(k) = k r1 / ((1 + k r1) (W' + k g))

    have ``d log E / dk = 1 / (k (1 + k r1)) - g / (W' + k g)``, zero where
    ``W' + k g = g k (1 + k r1)``, i.e. ``k* = sqrt(W' / (g r1))``: a costly warm-up (large
    ``W'``) is best repaid by cheap transitions thinned more; draws already independent
    (``r1 = 1``) and no warm-up keep every transition. ``r1`` not finite or not positive
    (the measurement failed): ``k = 1``, every transition kept.
    """
    if not (np.isfinite(r1) and r1 > 0 and grads_per_transition > 0):
        return float("nan"), 1
    k_star = math.sqrt(max(0.0, overhead) / (grads_per_transition * r1))
    return k_star, int(min(max(round(k_star), 1), most))


def per_transition_ess(positions: np.ndarray) -> float:
    """``r1``: the robust ESS (`adaptmc.objectives.robust_ess_per_grad`) of ``positions:
    (chains, n, dim)`` per draw (NaN when it cannot be computed)."""
    chains, n = positions.shape[:2]
    return robust_ess_per_grad(positions, {}, chains * n) / 1000.0
