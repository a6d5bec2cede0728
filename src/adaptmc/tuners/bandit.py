"""Bandit and Bayesian-optimisation tuners, and the baselines in the same interface.

Each super-transition is an arm pull: the tuner proposes a kernel setting from the box, the
run loop spends one super-transition's gradient budget with it, and the objective's reward
comes back (Wang, Mohamed & de Freitas 2013). Rewards are normalised to ``[0, 1]``
over the rewards seen so far, a failed (NaN or divergent) super-transition scoring 0, the
worst (`normalise_rewards`).

- `gp_ucb`: the GP bandit of Wang (2012, Algorithm 3) with annealed adoption;
- `parametric`: RBF features, NIG model and expected improvement (Wang & de Freitas 2011,
  Algorithm 2);
- `hedge`: GP-Hedge over PI, EI and UCB (Hoffman, Brochu & de Freitas 2011; Mahendran et
  al. 2012);
- `sir`: the stochastic policy that resamples settings in proportion to ``exp(mu / T)``, so
  the kernel becomes a mixture over good settings (Mahendran et al. 2012);
- `random_search`, `dual_averaging_tuner`: baselines.

Annealing. After super-transition ``i`` a tuner takes a new proposal with probability
``p_i = schedule(i)`` and otherwise repeats its current setting; as ``p_i -> 0`` adaptation
diminishes (Wang 2012, Algorithm 3). The GP sees each distinct setting once (`gp.gp_fit` merges
repeats), so its cost is bounded by the number of adoptions, about ``sum_i p_i``.

State (a dict of NumPy arrays, fixed keys, growing shapes; checkpointed leaf by leaf):
``points: (n, d)`` the settings run, in box units; ``rewards: (n,)`` raw rewards (NaN: failed);
``adopted: (n,)`` whether each was a new proposal; ``current: (d,)`` the setting in force;
``adopting: ()`` whether the pending proposal is new; plus per-tuner entries.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import numpy as np

from adaptmc.adaptation.dual_averaging import (
    DualAveragingState,
    da_final_step_size,
    da_init,
    da_step_size,
    da_update,
)
from adaptmc.kernels.hmc import hmc
from adaptmc.tuners import acquisition as acq
from adaptmc.tuners.base import Tuner
from adaptmc.tuners.box import (
    Box,
    as_proposal,
    box_from_tunables,
    from_proposal,
    from_unit,
    snap_unit,
    to_unit,
)
from adaptmc.tuners.gp import GPPosterior, gp_fit, gp_predict, unique_points
from adaptmc.tuners.parametric import (
    DEFAULT_WIDTHS,
    default_prior,
    fit_parametric,
    latin_hypercube_centres,
    parametric_predict,
)
from adaptmc.tuners.schedules import Schedule, constant, exponential, geometric

HEDGE_ACQUISITIONS = ("pi", "ei", "ucb")

SIGNAL_VAR = 0.1
"""Default GP signal variance on the ``[0, 1]`` scale of normalised rewards. A uniform reward
on ``[0, 1]`` has variance 1/12; with the earlier default 1.0 an unexplored setting's UCB,
``m + p_i sqrt(beta_i) * 1`` with ``sqrt(beta_i)`` about 4-5, beat the best setting by several
times the whole reward range for tens of steps, so GP-UCB kept trying the corners of the box
(e.g. the largest step size, which diverges)."""

ANNEAL_RATE = 0.05
"""Default ``lambda`` of the adoption schedule ``p_i = exp(-lambda (i - 1))`` (Wang 2012,
Algorithm 3). About ``1 / lambda`` settings are ever adopted: 20 with 0.05, of which about 15
in the first 30 super-transitions (``p_30 = 0.23``, ``p_60 = 0.05``). The earlier 0.01 still
adopted with ``p = 0.23`` after 150 super-transitions, so most of a run's draws came from
exploratory settings."""


def normalise_rewards(rewards: np.ndarray) -> np.ndarray:
    """``rewards: (n,)`` -> ``(n,)`` in ``[0, 1]``: ``(r - min) / (max - min)`` over the finite
    rewards; a non-finite reward (a failed or divergent super-transition) scores 0, the worst.
    All-equal finite rewards score 0.5."""
    rewards = np.asarray(rewards, dtype=float)
    ok = np.isfinite(rewards)
    out = np.zeros_like(rewards)
    if ok.any():
        low, high = rewards[ok].min(), rewards[ok].max()
        out[ok] = (rewards[ok] - low) / (high - low) if high > low else 0.5
    return out


def rng_from_key(key) -> np.random.Generator:
    """A NumPy generator seeded from a JAX key (typed or raw) or an integer."""
    if isinstance(key, int | np.integer):
        return np.random.default_rng(int(key))
    data = jax.random.key_data(key) if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) \
        else key
    return np.random.default_rng(np.asarray(data, dtype=np.uint32).ravel())


def _base_state(box: Box, extra: dict | None = None) -> dict:
    state = {
        "points": np.zeros((0, box.dim)),
        "rewards": np.zeros(0),
        "adopted": np.zeros(0, dtype=bool),
        "current": np.full(box.dim, np.nan),
        "adopting": np.asarray(True),
    }
    state.update(extra or {})
    return state


def _record(box: Box, state: dict, proposal: dict, reward: float, stats: dict) -> dict:
    """Append one arm pull; a divergent super-transition counts as a failure (NaN)."""
    reward = float(reward)
    if (stats or {}).get("divergences", 0) > 0:
        reward = float("nan")
    x = from_proposal(box, proposal)
    return {
        **state,
        "points": np.vstack([np.asarray(state["points"]).reshape(-1, box.dim), x[None]]),
        "rewards": np.append(np.asarray(state["rewards"], dtype=float), reward),
        "adopted": np.append(np.asarray(state["adopted"], dtype=bool), bool(state["adopting"])),
        "current": x,
    }


def _annealed_propose(box: Box, schedule: Schedule, initial: dict | None, new_point):
    """``propose`` for an annealed tuner: the first setting is ``initial`` (default: uniform
    in the box); after step ``i`` a new one ``new_point(rng, state, i, p_i) -> (x, updates)``
    is taken with probability ``p_i``, else the current one is kept."""
    first = None if initial is None else from_proposal(box, initial)

    def propose(key, state):
        rng = rng_from_key(key)
        num_done = len(state["rewards"])
        updates = {}
        if num_done == 0:
            x = from_unit(box, rng.random(box.dim)) if first is None else first
            adopt = True
        else:
            p = float(schedule(num_done))
            adopt = bool(rng.random() < p)
            if adopt:
                x, updates = new_point(rng, state, num_done, p)
            else:
                x = np.asarray(state["current"], dtype=float)
        state = {**state, **updates, "current": np.asarray(x, dtype=float),
                 "adopting": np.asarray(adopt)}
        return as_proposal(box, x), state

    return propose


def fit_gp(box: Box, state: dict, alpha: float = 0.2, signal_var: float = SIGNAL_VAR,
           noise_var: float = 0.01) -> GPPosterior:
    """The GP on the normalised rewards of ``state`` in unit coordinates, lengthscales
    ``alpha`` times the box widths (Wang 2012, Algorithm 3)."""
    return gp_fit(to_unit(box, state["points"]), normalise_rewards(state["rewards"]),
                  np.full(box.dim, alpha), signal_var, noise_var)


def _best_by_mean(box: Box, state: dict, predict_mean, initial: dict | None) -> dict:
    """The tried setting with the highest posterior mean (robust to a lucky noisy reward)."""
    if len(state["rewards"]) == 0:
        if initial is not None:
            return dict(initial)
        return as_proposal(box, from_unit(box, np.full(box.dim, 0.5)))
    points, _, _ = unique_points(state["points"], state["rewards"])
    means = predict_mean(to_unit(box, points))
    return as_proposal(box, points[int(np.argmax(means))])


def _snapper(box: Box):
    return (lambda u: snap_unit(box, u)) if box.integer.any() else None


def _check_box(box: Box | None) -> Box:
    box = box_from_tunables(hmc.tunables) if box is None else box
    if not isinstance(box, Box):
        raise TypeError(f"box must be a Box (see adaptmc.tuners.make_box), got {type(box)}")
    return box


def gp_ucb(
    box: Box | None = None,
    *,
    alpha: float = 0.2,
    signal_var: float = SIGNAL_VAR,
    noise_var: float = 0.01,
    delta: float = 0.1,
    schedule: Schedule | None = None,
    initial: dict | None = None,
    maxfun: int | None = None,
) -> Tuner:
    """The annealed GP-UCB bandit (Wang 2012, Algorithm 3).

    After step ``i`` a new setting is taken with probability ``p_i`` (``schedule``, default
    ``exp(-ANNEAL_RATE (i - 1))``, lambda = 0.05) as the DIRECT maximiser of
    ``mu + p_i sqrt(beta_i) sd`` with ``beta_i = 2 log(d (i+1)^2 pi^2 / (3 delta))``.

    Parameters
    ----------
    box
        The search box (default `hmc_box`: step size in [0.01, 1], leapfrog steps in [1, 100]).
    alpha
        GP lengthscales as a fraction of the box widths.
    signal_var, noise_var
        GP signal and noise variances, on the ``[0, 1]`` scale of normalised rewards (see
        `SIGNAL_VAR`; noise sd 0.1 is about the super-transition to super-transition spread
        of a reward measured on a few thousand gradients).
    initial
        The first setting (default: uniform in the box).
    maxfun
        DIRECT's evaluation budget (default ``100 d``).
    """
    box = _check_box(box)
    schedule = exponential(ANNEAL_RATE) if schedule is None else schedule
    snap = _snapper(box)

    def new_point(rng, state, i, p):
        post = fit_gp(box, state, alpha, signal_var, noise_var)
        beta = acq.ucb_beta(i, box.dim, delta)
        u, _ = acq.direct_maximise(
            lambda u: acq.ucb(*gp_predict(post, u), beta, p), box.dim, snap, maxfun
        )
        return from_unit(box, u), {}

    def best(state):
        post = fit_gp(box, state, alpha, signal_var, noise_var)
        return _best_by_mean(box, state, lambda u: gp_predict(post, u)[0], initial)

    return Tuner(
        name="gp-ucb",
        names=box.names,
        init=lambda key: _base_state(box),
        propose=_annealed_propose(box, schedule, initial, new_point),
        update=lambda state, proposal, reward, stats: _record(box, state, proposal, reward,
                                                              stats),
        best=best,
    )


def hedge(
    box: Box | None = None,
    *,
    eta: float = 1.0,
    xi: float = 0.01,
    alpha: float = 0.2,
    signal_var: float = SIGNAL_VAR,
    noise_var: float = 0.01,
    delta: float = 0.1,
    schedule: Schedule | None = None,
    initial: dict | None = None,
    maxfun: int | None = None,
) -> Tuner:
    """GP-Hedge: a portfolio of PI, EI and UCB (Hoffman, Brochu & de Freitas 2011; used for
    adaptive MCMC by Mahendran et al. 2012).

    Each acquisition nominates its maximiser; nominee ``j`` is run with probability
    ``exp(eta g_j) / sum_k exp(eta g_k)``; after the reward comes back the GP is refitted and
    every gain grows by the posterior mean at its nominee, ``g_j += mu(x_j)``. Adoption is
    annealed as in `gp_ucb`. Extra state: ``gains: (3,)``, ``nominees: (3, d)``,
    ``nominated: ()`` (whether the pending proposal came from fresh nominees) and
    ``chosen: (n,)`` the acquisition behind each step (-1: kept or initial).
    ``xi`` is the PI margin; other parameters as in `gp_ucb`.
    """
    box = _check_box(box)
    schedule = exponential(ANNEAL_RATE) if schedule is None else schedule
    snap = _snapper(box)

    def new_point(rng, state, i, p):
        post = fit_gp(box, state, alpha, signal_var, noise_var)
        tried = to_unit(box, unique_points(state["points"], state["rewards"])[0])
        incumbent = float(np.max(gp_predict(post, tried)[0]))
        beta = acq.ucb_beta(i, box.dim, delta)
        acquisitions = {
            "pi": lambda mu, sd: acq.probability_of_improvement(mu, sd, incumbent, xi),
            "ei": lambda mu, sd: acq.expected_improvement(mu, sd, incumbent),
            "ucb": lambda mu, sd: acq.ucb(mu, sd, beta, p),
        }
        nominees = np.stack([
            acq.direct_maximise(
                lambda u, f=acquisitions[name]: f(*gp_predict(post, u)), box.dim, snap, maxfun
            )[0]
            for name in HEDGE_ACQUISITIONS
        ])
        choice = int(rng.choice(len(nominees), p=acq.hedge_probabilities(state["gains"], eta)))
        updates = {"nominees": from_unit(box, nominees), "nominated": np.asarray(True),
                   "choice": np.asarray(choice)}
        return from_unit(box, nominees[choice]), updates

    def update(state, proposal, reward, stats):
        state = _record(box, state, proposal, reward, stats)
        chosen = int(state["choice"]) if bool(state["nominated"]) else -1
        state["chosen"] = np.append(np.asarray(state["chosen"], dtype=int), chosen)
        if bool(state["nominated"]):
            post = fit_gp(box, state, alpha, signal_var, noise_var)
            gains = state["gains"] + gp_predict(post, to_unit(box, state["nominees"]))[0]
            state.update(gains=gains, nominated=np.asarray(False))
        state["choice"] = np.asarray(-1)
        return state

    def best(state):
        post = fit_gp(box, state, alpha, signal_var, noise_var)
        return _best_by_mean(box, state, lambda u: gp_predict(post, u)[0], initial)

    extra = {
        "gains": np.zeros(len(HEDGE_ACQUISITIONS)),
        "nominees": np.full((len(HEDGE_ACQUISITIONS), box.dim), np.nan),
        "nominated": np.asarray(False),
        "choice": np.asarray(-1),
        "chosen": np.zeros(0, dtype=int),
    }
    return Tuner("hedge", box.names, lambda key: _base_state(box, extra),
                 _annealed_propose(box, schedule, initial, new_point), update, best)


def sir(
    box: Box | None = None,
    *,
    temperature: float = 0.1,
    num_candidates: int = 1000,
    alpha: float = 0.2,
    signal_var: float = SIGNAL_VAR,
    noise_var: float = 0.01,
    schedule: Schedule | None = None,
    initial: dict | None = None,
) -> Tuner:
    """The stochastic SIR policy (Mahendran, Wang, Hamze & de Freitas 2012).

    A new setting is drawn by sampling-importance-resampling: ``num_candidates`` uniform
    points of the box are resampled in proportion to ``exp(mu(x) / temperature)`` under the GP
    mean, so over time the kernel is a mixture over the settings the GP believes good. With
    normalised rewards in ``[0, 1]``, ``temperature = 1`` is the paper's ``exp(mu)`` and hardly
    discriminates; the default 0.1 makes the best setting ``e^10`` times likelier than the
    worst. Adoption is annealed as in `gp_ucb`.
    """
    box = _check_box(box)
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    schedule = exponential(ANNEAL_RATE) if schedule is None else schedule

    def new_point(rng, state, i, p):
        post = fit_gp(box, state, alpha, signal_var, noise_var)
        candidates = snap_unit(box, rng.random((num_candidates, box.dim)))
        mu = gp_predict(post, candidates)[0] / temperature
        weights = np.exp(mu - mu.max())
        pick = int(rng.choice(num_candidates, p=weights / weights.sum()))
        return from_unit(box, candidates[pick]), {}

    def best(state):
        post = fit_gp(box, state, alpha, signal_var, noise_var)
        return _best_by_mean(box, state, lambda u: gp_predict(post, u)[0], initial)

    return Tuner("sir", box.names, lambda key: _base_state(box),
                 _annealed_propose(box, schedule, initial, new_point),
                 lambda state, proposal, reward, stats: _record(box, state, proposal, reward,
                                                                stats),
                 best)


def parametric(
    box: Box | None = None,
    *,
    num_features: int = 20,
    widths: tuple[float, ...] = DEFAULT_WIDTHS,
    a0: float = 5.0,
    b0: float = 10.0,
    v0: float = 5.0,
    schedule: Schedule | None = None,
    initial: dict | None = None,
    maxfun: int | None = None,
) -> Tuner:
    """The Bayesian parametric bandit (Wang & de Freitas 2011, Algorithm 2).

    ``num_features`` Gaussian RBFs with Latin-hypercube centres (drawn once, from the key
    given to ``init``), the NIG model of `adaptmc.tuners.parametric` with prior
    ``a0, b0, w0 = 0, V0 = v0 I``, the RBF width integrated out over ``widths`` (unit-cube
    units), and the Student-t expected improvement over the best posterior mean among the
    tried settings, maximised with DIRECT. A new setting is adopted with probability ``p``,
    ``p <- lambda p`` after each step (``schedule``, default ``geometric(0.99)``).
    Extra state: ``centres: (K, d)`` in unit coordinates.
    """
    box = _check_box(box)
    schedule = geometric(0.99) if schedule is None else schedule
    prior = default_prior(num_features, a0, b0, v0)
    snap = _snapper(box)
    widths = tuple(float(h) for h in widths)

    def model_of(state):
        return fit_parametric(to_unit(box, state["points"]), normalise_rewards(state["rewards"]),
                              np.asarray(state["centres"]), widths, prior)

    def new_point(rng, state, i, p):
        model = model_of(state)
        tried = to_unit(box, unique_points(state["points"], state["rewards"])[0])
        incumbent = float(np.max(parametric_predict(model, tried)[0]))
        acquisition = _mixture_ei(model, incumbent)
        u, _ = acq.direct_maximise(acquisition, box.dim, snap, maxfun)
        return from_unit(box, u), {}

    def best(state):
        if len(state["rewards"]) == 0:
            return _best_by_mean(box, state, None, initial)
        model = model_of(state)
        return _best_by_mean(box, state, lambda u: parametric_predict(model, u)[0], initial)

    def init(key):
        seed = int(rng_from_key(key).integers(2**31))
        centres = latin_hypercube_centres(num_features, box.dim, seed)
        return _base_state(box, {"centres": centres})

    return Tuner("parametric", box.names, init,
                 _annealed_propose(box, schedule, initial, new_point),
                 lambda state, proposal, reward, stats: _record(box, state, proposal, reward,
                                                                stats),
                 best)


def _mixture_ei(model, incumbent: float) -> Callable[[np.ndarray], np.ndarray]:
    """``u: (m, d) -> (m,)``, ``sum_h weight_h EI_t(u; h)``, the EI of the width mixture, with
    the per-width posteriors stacked so that DIRECT's batches stay cheap."""
    keep = model.weights > 1e-8
    widths = model.widths[keep]
    posts = [p for p, k in zip(model.posteriors, keep, strict=True) if k]
    weights = model.weights[keep]
    w = np.stack([p.w for p in posts])
    V = np.stack([p.V for p in posts])
    phi_mean = np.stack([p.phi_mean for p in posts])
    y_mean = np.array([p.y_mean for p in posts])
    scale2 = np.array([p.b / p.a for p in posts])
    dof = np.array([2.0 * p.a for p in posts])
    inv_n = 1.0 / posts[0].n
    log_norm = acq.student_t_log_norm(dof)
    centres = model.centres

    def ei(u):
        u = np.atleast_2d(u)
        sq = np.sum((u[:, None, :] - centres[None]) ** 2, axis=2)  # (m, K)
        centred = np.exp(-0.5 * sq[None] / widths[:, None, None] ** 2) - phi_mean[:, None]
        loc = y_mean[:, None] + np.einsum("wmk,wk->wm", centred, w)
        quad = np.einsum("wmj,wmj->wm", np.einsum("wmk,wjk->wmj", centred, V), centred)
        scale = np.sqrt(scale2[:, None] * (1.0 + inv_n + quad))
        return weights @ acq._t_ei(loc, scale, dof[:, None], incumbent, log_norm[:, None])

    return ei


def random_search(box: Box | None = None, *, schedule: Schedule | None = None) -> Tuner:
    """A uniform draw from the box for every super-transition (Bergstra & Bengio 2012). Its
    proposals ignore the chain, so adapting forever is a valid mixture kernel; ``best`` is the
    tried setting with the highest mean reward. ``schedule`` (default: always new) can anneal
    it like the bandits."""
    box = _check_box(box)
    schedule = constant(1.0) if schedule is None else schedule

    def new_point(rng, state, i, p):
        return from_unit(box, rng.random(box.dim)), {}

    def mean_reward(state):
        points, means, _ = unique_points(state["points"], normalise_rewards(state["rewards"]))
        lookup = {tuple(np.round(to_unit(box, x), 12)): m for x, m in
                  zip(points, means, strict=True)}
        return lambda u: np.array([lookup[tuple(np.round(row, 12))] for row in u])

    def best(state):
        if len(state["rewards"]) == 0:
            return _best_by_mean(box, state, None, None)
        return _best_by_mean(box, state, mean_reward(state), None)

    return Tuner("random", box.names, lambda key: _base_state(box),
                 _annealed_propose(box, schedule, None, new_point),
                 lambda state, proposal, reward, stats: _record(box, state, proposal, reward,
                                                                stats),
                 best)


def dual_averaging_tuner(
    initial_step_size: float = 0.1,
    *,
    target_accept: float = 0.8,
    num_leapfrog: int | None = None,
    gamma: float = 0.05,
    t0: float = 10.0,
    kappa: float = 0.75,
) -> Tuner:
    """Dual averaging of the step size toward ``target_accept`` (Hoffman & Gelman 2014,
    Algorithm 5), one update per super-transition with its mean acceptance rate; ``L`` stays
    at the kernel's value, or at ``num_leapfrog`` when given. ``best`` is the averaged step
    size ``exp(xbar)``. State: `DualAveragingState` (arrays)."""
    if not 0 < target_accept < 1:
        raise ValueError(f"target_accept must be in (0, 1), got {target_accept}")
    if not initial_step_size > 0:
        raise ValueError(f"initial_step_size must be positive, got {initial_step_size}")
    names = ("step_size",) if num_leapfrog is None else ("step_size", "num_leapfrog")
    extra = {} if num_leapfrog is None else {"num_leapfrog": int(num_leapfrog)}

    def as_numpy(state: DualAveragingState) -> DualAveragingState:
        return DualAveragingState(*(np.asarray(v, dtype=float) for v in state))

    def propose(key, state):
        return {"step_size": float(da_step_size(state)), **extra}, state

    def update(state, proposal, reward, stats):
        rate = (stats or {}).get("acceptance_rate", float("nan"))
        if (stats or {}).get("divergences", 0) > 0:
            rate = 0.0  # a divergent super-transition counts as a rejection
        rate = rate if math.isfinite(rate) else 0.0
        return as_numpy(da_update(state, rate, target_accept, gamma, t0, kappa))

    def best(state):
        if float(state.step) == 0:
            return {"step_size": float(da_step_size(state)), **extra}
        return {"step_size": float(da_final_step_size(state)), **extra}

    return Tuner("dual-averaging", names, lambda key: as_numpy(da_init(initial_step_size)),
                 propose, update, best)
