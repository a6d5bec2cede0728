"""Bandit and Bayesian-optimisation policies, and random search in the same interface.

Each is a surrogate (`adaptmc.tuners.surrogate`), an acquisition
(`adaptmc.tuners.acquisition`) and its optimiser (`adaptmc.tuners.optimise`) put together
under the annealed adoption rule of `adaptmc.tuners.annealed`:

- `gp_ucb`: the GP bandit of Wang (2012, Algorithm 3) with annealed adoption;
- `parametric`: RBF features, NIG model and expected improvement (Wang & de Freitas 2011,
  Algorithm 2);
- `hedge`: GP-Hedge over PI, EI and UCB (Hoffman, Brochu & de Freitas 2011; Mahendran et
  al. 2012);
- `sir`: the stochastic policy that resamples settings in proportion to ``exp(mu / T)``, so
  the kernel becomes a mixture over good settings (Mahendran et al. 2012);
- `random_search`: the baseline.

Every policy's ``describe(state)`` returns its box, schedule and surrogate hyperparameters
(`adaptmc.tuners.annealed.policy_facts`), which the run records and `adaptmc.plots` refits
with. The GP policies (`gp_ucb`, `hedge`, `sir`) also give their ``posterior``
(`adaptmc.tuners.annealed.Posterior`), which a stop rule reads
(`adaptmc.tuners.stopping`).
"""

from __future__ import annotations

import numpy as np

from adaptmc.tuners import acquisition as acq
from adaptmc.tuners.annealed import (
    ANNEAL_RATE,
    annealed_propose,
    bandit_posterior,
    base_state,
    best_by_mean,
    check_box,
    policy_facts,
    record,
    record_update,
    rng_from_key,
    snapper,
)
from adaptmc.tuners.base import Tuner
from adaptmc.tuners.box import Box, from_unit, snap_unit, to_unit
from adaptmc.tuners.gp import gp_predict, unique_points
from adaptmc.tuners.nig import latin_hypercube_centres, parametric_predict
from adaptmc.tuners.optimise import direct_maximise
from adaptmc.tuners.schedules import Schedule, constant, exponential, geometric
from adaptmc.tuners.surrogate import (
    LENGTHSCALE_FRACTION,
    NOISE_VAR,
    SIGNAL_VAR,
    GPConfig,
    NIGConfig,
    fit_gp,
    fit_nig,
    normalise_rewards,
)

HEDGE_ACQUISITIONS = ("pi", "ei", "ucb")


def _gp_best(box: Box, config: GPConfig, initial: dict | None):
    def best(state):
        if len(state["rewards"]) == 0:
            return best_by_mean(box, state, None, initial)
        post = fit_gp(box, state, config)
        return best_by_mean(box, state, lambda u: gp_predict(post, u)[0], initial)

    return best


def _gp_posterior(box: Box, config: GPConfig):
    """``Tuner.posterior`` of a GP policy: the GP it fits, over its box."""
    def posterior(state):
        if len(state["rewards"]) == 0:
            return None
        post = fit_gp(box, state, config)
        return bandit_posterior(box, state, lambda u: gp_predict(post, u),
                                config.log_rewards)

    return posterior


def gp_ucb(
    box: Box,
    *,
    alpha: float = LENGTHSCALE_FRACTION,
    signal_var: float = SIGNAL_VAR,
    noise_var: float = NOISE_VAR,
    delta: float = 0.1,
    schedule: Schedule | None = None,
    initial: dict | None = None,
    maxfun: int | None = None,
    log_rewards: bool = False,
) -> Tuner:
    """The annealed GP-UCB bandit (Wang 2012, Algorithm 3).

    After step ``i`` a new setting is taken with probability ``p_i`` (``schedule``, default
    ``exp(-ANNEAL_RATE (i - 1))``, lambda = 0.05) as the DIRECT maximiser of
    ``mu + p_i sqrt(beta_i) sd`` with ``beta_i = 2 log(d (i+1)^2 pi^2 / (3 delta))``.

    Parameters
    ----------
    box
        The search box (e.g. `adaptmc.recipes.hmc_box()`, or `box_from_tunables(kernel.tunables)`).
    alpha
        GP lengthscales as a fraction of the box widths.
    signal_var, noise_var
        GP signal and noise variances, on the ``[0, 1]`` scale of normalised rewards (see
        `adaptmc.tuners.surrogate.SIGNAL_VAR` and ``NOISE_VAR``).
    delta
        The confidence parameter of ``beta_i``.
    initial
        The first setting (default: uniform in the box).
    maxfun
        DIRECT's evaluation budget (default ``100 d``).
    log_rewards
        Normalise the rewards on the log scale (the paper: linearly; `normalise_rewards`).
    """
    box = check_box(box)
    schedule = exponential(ANNEAL_RATE) if schedule is None else schedule
    config = GPConfig(alpha, signal_var, noise_var, log_rewards)
    snap = snapper(box)

    def new_point(rng, state, i, p):
        post = fit_gp(box, state, config)
        beta = acq.ucb_beta(i, box.dim, delta)
        u, _ = direct_maximise(lambda u: acq.ucb(*gp_predict(post, u), beta, p), box.dim, snap,
                               maxfun)
        return from_unit(box, u), {}

    facts = policy_facts("gp-ucb", box, schedule, initial, surrogate="gp", **config._asdict(),
                         acquisition="ucb", delta=delta, maxfun=maxfun)
    return Tuner(
        name="gp-ucb",
        names=box.names,
        init=lambda key: base_state(box),
        propose=annealed_propose(box, schedule, initial, new_point),
        update=record_update(box),
        best=_gp_best(box, config, initial),
        describe=lambda state: facts,
        posterior=_gp_posterior(box, config),
    )


def hedge(box: Box, *, eta: float = 1.0, xi: float = 0.01, alpha: float = LENGTHSCALE_FRACTION,
          signal_var: float = SIGNAL_VAR, noise_var: float = NOISE_VAR, delta: float = 0.1,
          schedule: Schedule | None = None, initial: dict | None = None,
          maxfun: int | None = None, log_rewards: bool = False) -> Tuner:
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
    box = check_box(box)
    schedule = exponential(ANNEAL_RATE) if schedule is None else schedule
    config = GPConfig(alpha, signal_var, noise_var, log_rewards)
    snap = snapper(box)

    def new_point(rng, state, i, p):
        post = fit_gp(box, state, config)
        acquisitions = _hedge_acquisitions(box, state, post, acq.ucb_beta(i, box.dim, delta),
                                           p, xi)
        nominees = np.stack([
            direct_maximise(
                lambda u, f=acquisitions[name]: f(*gp_predict(post, u)), box.dim, snap, maxfun
            )[0]
            for name in HEDGE_ACQUISITIONS
        ])
        choice = int(rng.choice(len(nominees), p=acq.hedge_probabilities(state["gains"], eta)))
        updates = {"nominees": from_unit(box, nominees), "nominated": np.asarray(True),
                   "choice": np.asarray(choice)}
        return from_unit(box, nominees[choice]), updates

    def update(state, proposal, reward, stats):
        state = record(box, state, proposal, reward, stats)
        chosen = int(state["choice"]) if bool(state["nominated"]) else -1
        state["chosen"] = np.append(np.asarray(state["chosen"], dtype=int), chosen)
        if bool(state["nominated"]):
            post = fit_gp(box, state, config)
            gains = state["gains"] + gp_predict(post, to_unit(box, state["nominees"]))[0]
            state.update(gains=gains, nominated=np.asarray(False))
        state["choice"] = np.asarray(-1)
        return state

    extra = {"gains": np.zeros(len(HEDGE_ACQUISITIONS)),
             "nominees": np.full((len(HEDGE_ACQUISITIONS), box.dim), np.nan),
             "nominated": np.asarray(False), "choice": np.asarray(-1),
             "chosen": np.zeros(0, dtype=int)}
    facts = policy_facts("hedge", box, schedule, initial, surrogate="gp", **config._asdict(),
                         acquisition="hedge", delta=delta, eta=eta, xi=xi, maxfun=maxfun)
    return Tuner("hedge", box.names, lambda key: base_state(box, extra),
                 annealed_propose(box, schedule, initial, new_point), update,
                 _gp_best(box, config, initial), lambda state: facts,
                 posterior=_gp_posterior(box, config))


def _hedge_acquisitions(box: Box, state: dict, post, beta: float, p: float,
                        xi: float) -> dict:
    """GP-Hedge's portfolio ``{name: (mu, sd) -> value}``: PI (margin ``xi``) and EI over
    the best predicted mean of the tried settings, and UCB with ``beta`` and adoption
    probability ``p``."""
    tried = to_unit(box, unique_points(state["points"], state["rewards"])[0])
    incumbent = float(np.max(gp_predict(post, tried)[0]))
    return {"pi": lambda mu, sd: acq.probability_of_improvement(mu, sd, incumbent, xi),
            "ei": lambda mu, sd: acq.expected_improvement(mu, sd, incumbent),
            "ucb": lambda mu, sd: acq.ucb(mu, sd, beta, p)}


def sir(
    box: Box,
    *,
    temperature: float = 0.1,
    num_candidates: int = 1000,
    alpha: float = LENGTHSCALE_FRACTION,
    signal_var: float = SIGNAL_VAR,
    noise_var: float = NOISE_VAR,
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
    box = check_box(box)
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    schedule = exponential(ANNEAL_RATE) if schedule is None else schedule
    config = GPConfig(alpha, signal_var, noise_var)

    def new_point(rng, state, i, p):
        post = fit_gp(box, state, config)
        candidates = snap_unit(box, rng.random((num_candidates, box.dim)))
        mu = gp_predict(post, candidates)[0] / temperature
        weights = np.exp(mu - mu.max())
        pick = int(rng.choice(num_candidates, p=weights / weights.sum()))
        return from_unit(box, candidates[pick]), {}

    facts = policy_facts("sir", box, schedule, initial, surrogate="gp", **config._asdict(),
                         acquisition="sir", temperature=temperature,
                         num_candidates=num_candidates)
    return Tuner("sir", box.names, lambda key: base_state(box),
                 annealed_propose(box, schedule, initial, new_point), record_update(box),
                 _gp_best(box, config, initial), lambda state: facts,
                 posterior=_gp_posterior(box, config))


def parametric(
    box: Box,
    *,
    num_features: int = 20,
    widths: tuple[float, ...] = NIGConfig().widths,
    a0: float = 5.0,
    b0: float = 10.0,
    v0: float = 5.0,
    schedule: Schedule | None = None,
    initial: dict | None = None,
    maxfun: int | None = None,
) -> Tuner:
    """The Bayesian parametric bandit (Wang & de Freitas 2011, Algorithm 2).

    ``num_features`` Gaussian RBFs with Latin-hypercube centres (drawn once, from the key
    given to ``init``), the NIG model of `adaptmc.tuners.nig` with prior
    ``a0, b0, w0 = 0, V0 = v0 I``, the RBF width integrated out over ``widths`` (unit-cube
    units), and the Student-t expected improvement over the best posterior mean among the
    tried settings, maximised with DIRECT. A new setting is adopted with probability ``p``,
    ``p <- lambda p`` after each step (``schedule``, default ``geometric(0.99)``).
    Extra state: ``centres: (K, d)`` in unit coordinates (recorded by ``describe``).
    """
    box = check_box(box)
    schedule = geometric(0.99) if schedule is None else schedule
    config = NIGConfig(num_features, tuple(float(h) for h in widths), a0, b0, v0)
    snap = snapper(box)

    def new_point(rng, state, i, p):
        model = fit_nig(box, state, state["centres"], config)
        tried = to_unit(box, unique_points(state["points"], state["rewards"])[0])
        incumbent = float(np.max(parametric_predict(model, tried)[0]))
        u, _ = direct_maximise(acq.nig_mixture_ei(model, incumbent), box.dim, snap, maxfun)
        return from_unit(box, u), {}

    def best(state):
        if len(state["rewards"]) == 0:
            return best_by_mean(box, state, None, initial)
        model = fit_nig(box, state, state["centres"], config)
        return best_by_mean(box, state, lambda u: parametric_predict(model, u)[0], initial)

    def init(key):
        seed = int(rng_from_key(key).integers(2**31))
        centres = latin_hypercube_centres(num_features, box.dim, seed)
        return base_state(box, {"centres": centres})

    def describe(state):
        nig = {**config._asdict(), "widths": list(config.widths)}
        return policy_facts("parametric", box, schedule, initial, surrogate="nig", **nig,
                            acquisition="ei", maxfun=maxfun,
                            centres=np.asarray(state["centres"]).tolist())

    return Tuner("parametric", box.names, init,
                 annealed_propose(box, schedule, initial, new_point), record_update(box),
                 best, describe)


def random_search(box: Box, *, schedule: Schedule | None = None,
                  initial: dict | None = None) -> Tuner:
    """A uniform draw from the box for every super-transition (Bergstra & Bengio 2012). Its
    proposals ignore the chain, so adapting forever is a valid mixture kernel; ``best`` is the
    tried setting with the highest mean reward. ``schedule`` (default: always new) can anneal
    it like the bandits; ``initial`` is taken for the bandits' signature and not used (the
    first setting is a draw too)."""
    box = check_box(box)
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
            return best_by_mean(box, state, None, None)
        return best_by_mean(box, state, mean_reward(state), None)

    facts = policy_facts("random", box, schedule, None, surrogate=None)
    return Tuner("random", box.names, lambda key: base_state(box),
                 annealed_propose(box, schedule, None, new_point), record_update(box), best,
                 lambda state: facts)
