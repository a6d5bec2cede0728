"""Discrete targets: the intra-cluster move and Kawasaki exchange against exact enumeration of
S_n on small models, incremental energies, and checkpoint/resume of a discrete run."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats as scistats

from adaptmc.kernels import discrete
from adaptmc.kernels.discrete import KawasakiParams, SAWParams, kawasaki, saw
from adaptmc.run import run
from adaptmc.targets import correlated_2d
from adaptmc.tuners import make_box, random_search
from adaptmc_lab.experiments.energy_objective import (
    energy_autocorrelation,
    windowed_autocorrelation,
)
from adaptmc_lab.experiments.sir_mixture import sir_mixture
from adaptmc_lab.models import ising


def _dense(graph):
    m = graph.num_sites
    couplings = np.zeros((m, m))
    rows = np.repeat(np.arange(m), graph.neighbours.shape[1])
    np.add.at(couplings, (rows, np.asarray(graph.neighbours).ravel()),
              np.asarray(graph.couplings).ravel())
    return couplings, np.asarray(graph.bias)


def _np_energy(couplings, bias, x):
    x = np.asarray(x, float)
    return -0.5 * x @ couplings @ x - bias @ x


def _shell(graph):
    """Every state of S_n(c = 0), as (S, M) int8."""
    m, n = graph.num_sites, graph.distance
    states = []
    for ones in itertools.combinations(range(m), n):
        x = np.zeros(m, np.int8)
        x[list(ones)] = 1
        states.append(x)
    return np.array(states)


def _exact_pi(graph, states):
    couplings, bias = _dense(graph)
    logp = -graph.beta * np.array([_np_energy(couplings, bias, x) for x in states])
    p = np.exp(logp - logp.max())
    return p / p.sum()


def _paths(x, length):
    """All (up, down) site sequences of the move from x (c = 0)."""
    out = []
    for up in itertools.permutations(np.flatnonzero(x == 0), length):
        y = x.copy()
        y[list(up)] = 1
        out.extend((up, down) for down in itertools.permutations(np.flatnonzero(y == 1), length))
    return np.array([u for u, _ in out]), np.array([d for _, d in out])


def _np_walk_log_prob(couplings, bias, x, sites, gamma, up):
    """Brute force: every candidate's energy recomputed from scratch."""
    x, total = x.copy(), 0.0
    for s in sites:
        allowed = np.flatnonzero(x == 0) if up else np.flatnonzero(x == 1)
        e0 = _np_energy(couplings, bias, x)
        lw = []
        for i in allowed:
            z = x.copy()
            z[i] = 1 - z[i]
            lw.append(np.clip(-gamma * (_np_energy(couplings, bias, z) - e0), -60, 60))
        lw = np.array(lw)
        total += lw[list(allowed).index(s)] - np.log(np.exp(lw).sum())
        x[s] = 1 - x[s]
    return total


@pytest.mark.parametrize("length, gamma", [(1, 0.0), (2, 0.6),
                                           pytest.param(3, 1.5, marks=pytest.mark.slow)])
def test_move_satisfies_detailed_balance_exactly(length, gamma):
    target = ising.small_model(8, 3, beta=0.8, seed=1)
    graph = target.info["graph"]
    states = _shell(graph)
    index = {x.tobytes(): k for k, x in enumerate(states)}
    pi = _exact_pi(graph, states)
    couplings, bias = _dense(graph)

    @jax.jit
    def moves(x, ups, downs):
        state = discrete.spin_init(x, target)
        return jax.vmap(lambda u, d: discrete.move_log_ratio(graph, state, gamma, u, d))(ups,
                                                                                        downs)

    transition = np.zeros((len(states), len(states)))
    for k, x in enumerate(states):
        ups, downs = _paths(x, length)
        proposal, log_fwd, log_ratio = moves(jnp.asarray(x), jnp.asarray(ups), jnp.asarray(downs))
        prob = np.exp(np.asarray(log_fwd))
        np.testing.assert_allclose(prob.sum(), 1.0, rtol=1e-12)
        if k < 3:  # the kernel's path probabilities are the definition's
            for p in range(0, len(ups), 7):
                y = x.copy()
                y[ups[p]] = 1
                expected = (_np_walk_log_prob(couplings, bias, x, ups[p], gamma, True)
                            + _np_walk_log_prob(couplings, bias, y, downs[p], gamma, False))
                np.testing.assert_allclose(float(log_fwd[p]), expected, rtol=1e-10)
        accept = prob * np.minimum(1.0, np.exp(np.asarray(log_ratio)))
        for row, a in zip(np.asarray(proposal.position), accept, strict=True):
            transition[k, index[row.tobytes()]] += a
        transition[k, k] += 1.0 - accept.sum()
    flow = pi[:, None] * transition
    np.testing.assert_allclose(flow, flow.T, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(pi @ transition, pi, rtol=1e-10)
    assert np.all(transition >= 0) and np.allclose(transition.sum(1), 1.0)


def _visit_counts(target, kernel, params, num_chains, num_steps, seed):
    graph = target.info["graph"]
    states = _shell(graph)
    pi = _exact_pi(graph, states)
    rng = np.random.default_rng(seed)
    starts = jnp.asarray(states[rng.choice(len(states), num_chains, p=pi)])

    @jax.jit
    def final(keys, starts):
        def one(key, x):
            state = kernel.init(x, target)
            body = lambda t, s: kernel.step(jax.random.fold_in(key, t), s, target, params)[0]  # noqa: E731
            return jax.lax.fori_loop(0, num_steps, body, state).position
        return jax.vmap(one)(keys, starts)

    positions = np.asarray(final(jax.random.split(jax.random.key(seed), num_chains), starts))
    index = {x.tobytes(): k for k, x in enumerate(states)}
    counts = np.bincount([index[row.tobytes()] for row in positions], minlength=len(states))
    return counts, pi


@pytest.mark.parametrize("kernel, params", [
    # the walks' moves: 16-23 s each, the slow tier; the fast tier keeps their detailed
    # balance by exact enumeration above (lengths 1 and 2) and Kawasaki's frequencies here
    pytest.param(saw, SAWParams(2, 0.7), marks=pytest.mark.slow),
    pytest.param(saw, SAWParams(jnp.array([1.0, 3.0]), jnp.array([0.2, 1.2]), True),
                 marks=pytest.mark.slow),  # mixture, random L
    (kawasaki, KawasakiParams()),
])
def test_long_run_visit_frequencies_match_the_exact_distribution(kernel, params):
    """20000 independent chains started from exact draws of pi run 60 moves each; their
    final states are chi-square tested against pi computed by enumerating S_n (56 states):
    any error in the sampled walks (not only in the acceptance) shows up here."""
    target = ising.small_model(8, 3, beta=0.8, seed=2)
    counts, pi = _visit_counts(target, kernel, params, 20000, 60, seed=3)
    expected = counts.sum() * pi
    rare = expected < 5  # pooled into one cell, as the chi-square approximation needs
    counts = np.append(counts[~rare], counts[rare].sum())
    expected = np.append(expected[~rare], expected[rare].sum())
    assert scistats.chisquare(counts, expected).pvalue > 1e-3


@pytest.mark.parametrize("make", [lambda: ising.spin_glass_3d(side=5, distance=60),
                                  lambda: ising.rbm(64, 40, distance=50),
                                  lambda: ising.ferromagnet_2d(side=12, distance=72)])
@pytest.mark.parametrize("kernel, params", [(saw, SAWParams(6, 0.15)),
                                            (kawasaki, KawasakiParams())])
def test_incremental_energies_equal_recomputation(make, kernel, params):
    target = make()
    graph = target.info["graph"]
    state = kernel.init(target.initial_position, target)

    @jax.jit
    def advance(key, state):
        body = lambda t, s: kernel.step(jax.random.fold_in(key, t), s, target, params)[0]  # noqa: E731
        return jax.lax.fori_loop(0, 300, body, state)

    state = advance(jax.random.key(4), state)
    assert not np.array_equal(np.asarray(state.position), np.asarray(target.initial_position))
    assert int(np.sum(state.position != graph.reference)) == graph.distance
    np.testing.assert_allclose(float(state.energy), float(discrete.energy(graph, state.position)),
                               rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(np.asarray(state.field),
                               np.asarray(discrete.local_fields(graph, state.position)),
                               rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(float(state.logdensity),
                               float(target.logdensity(state.position)), rtol=1e-10)


def test_spin_energies_match_the_spin_hamiltonian():
    target = ising.ferromagnet_2d(side=6, distance=18)
    x = np.asarray(target.initial_position)
    s = (2 * x - 1).reshape(6, 6)
    spin_energy = -np.sum(s * np.roll(s, 1, 0)) - np.sum(s * np.roll(s, 1, 1))
    graph = target.info["graph"]
    assert float(discrete.energy(graph, x)) + target.info["energy_offset"] == spin_energy


def _energy_fn(target):
    graph = target.info["graph"]
    fn = jax.jit(jax.vmap(jax.vmap(lambda x: discrete.energy(graph, x))))
    return lambda positions: np.asarray(fn(jnp.asarray(positions)))


# slow cases: saw without a tuner is held by kawasaki without one (the untuned discrete run)
# and saw with random search (the same kernel); sir-mixture's state through a checkpoint by
# test_tuners.py::test_tuner_state_round_trips_through_a_checkpoint
@pytest.mark.parametrize("kernel, params, tuner", [
    pytest.param(saw, SAWParams(4, 0.8), None, marks=pytest.mark.slow),
    (kawasaki, KawasakiParams(), None),
    (saw, SAWParams(4, 0.8), "random"),
    pytest.param(saw, SAWParams(4, 0.8), "sir-mixture", marks=pytest.mark.slow),
])
def test_discrete_run_checkpoints_and_resumes_bit_identically(tmp_path, kernel, params, tuner):
    target = ising.spin_glass_3d(side=4, distance=30)
    box = make_box({"walk_length": (1, 10), "gamma": (0.0, 1.6)}, integer=("walk_length",))
    tuners = {None: lambda: None, "random": lambda: random_search(box),
              "sir-mixture": lambda: sir_mixture(box, num_settings=4, num_candidates=200)}
    kwargs = dict(num_super_transitions=6, gradient_budget=120, num_chains=2, seed=5,
                  progress=False, checkpoint_every=1, num_warmup=1,
                  initial_positions=ising.random_states(target.info["graph"], 2, 6),
                  objective=energy_autocorrelation(_energy_fn(target), (1, 30)),
                  adapt_until=4)
    whole = run(target, kernel, params, tuner=tuners[tuner](), **kwargs)
    out = tmp_path / "run"
    partial = run(target, kernel, params, tuner=tuners[tuner](), output_dir=out, stop_after=3,
                  **kwargs)
    assert partial.idata is None
    resumed = run(target, kernel, params, tuner=tuners[tuner](), output_dir=out, resume=True,
                  **kwargs)
    x = resumed.idata.posterior.x.values
    assert x.dtype == np.int8 and x.shape[-1] == 64
    np.testing.assert_array_equal(x, whole.idata.posterior.x.values)
    np.testing.assert_array_equal(resumed.idata.sample_stats.lp.values,
                                  whole.idata.sample_stats.lp.values)
    np.testing.assert_array_equal(resumed.idata.tuning.reward.values,
                                  whole.idata.tuning.reward.values)
    assert resumed.num_grads == whole.num_grads
    # flips counted exactly: every step reports what it flipped; beside them the initial
    # points and the run's checks of the starts and fingerprint (``check_grads``)
    flips = int(whole.idata.sample_stats.n_grad_evals.sum()
                + whole.idata.warmup_sample_stats.n_grad_evals.sum())
    assert flips == whole.num_grads - 2 - int(whole.idata.attrs["check_grads"])


def test_windowed_autocorrelation_is_in_cost_units():
    rng = np.random.default_rng(7)
    noise = rng.normal(size=(4, 4000))
    ar = np.zeros_like(noise)
    for t in range(1, noise.shape[1]):
        ar[:, t] = 0.9 * ar[:, t - 1] + noise[:, t]
    # an AR(1) draw every 10 flips vs the same chain thinned by 10 at 100 flips a draw
    h_fine = windowed_autocorrelation(ar, 10.0, (100.0, 300.0))
    h_coarse = windowed_autocorrelation(ar[:, ::10], 100.0, (100.0, 300.0))
    assert abs(h_fine - h_coarse) < 0.05
    assert windowed_autocorrelation(noise, 1.0, (1.0, 20.0)) > 0.95
    assert windowed_autocorrelation(ar, 1.0, (1.0, 5.0)) < 0.4


def test_windowed_autocorrelation_with_a_known_variance():
    """With the stationary variance given, ``h`` is the semivariogram over the variance:
    it matches the analytic AR(1) value, and it does not reward a trace whose fast
    fluctuations hide a slow part that the segment cannot see (the within-segment
    estimate does)."""
    rng = np.random.default_rng(8)
    phi, n = 0.9, 20_000

    def ar1(phi, size):
        x = np.zeros(size)
        x[:, 0] = rng.normal(size=size[0]) / np.sqrt(1 - phi**2)
        for t in range(1, size[1]):
            x[:, t] = phi * x[:, t - 1] + rng.normal(size=size[0])
        return x

    ar = ar1(phi, (8, n))
    exact = 1.0 - np.mean(phi ** np.linspace(1.0, 5.0, 32))  # integer lags at the ends
    h = windowed_autocorrelation(ar, 1.0, (1.0, 5.0), variance=1 / (1 - phi**2))
    assert abs(h - exact) < 0.02
    # fast AR(1) fluctuations (phi 0.5, variance 4/3) around a level that the segment never
    # sees move (N(0, 10^2) per chain): each chain's own ACF looks short
    slow = 10.0 * rng.normal(size=(8, 1)) + ar1(0.5, (8, 2000))
    assert windowed_autocorrelation(slow, 1.0, (10.0, 50.0)) > 0.9
    known = 100.0 + 4.0 / 3.0
    assert windowed_autocorrelation(slow, 1.0, (10.0, 50.0), variance=known) < 0.05
    with pytest.raises(ValueError, match="variance"):
        windowed_autocorrelation(ar, 1.0, (1.0, 5.0), variance=0.0)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="walk_length"):
        saw.check_params(SAWParams(0, 0.5))
    with pytest.raises(ValueError, match="gamma"):
        saw.check_params(SAWParams(3, -1.0))
    with pytest.raises(ValueError, match="equal length"):
        saw.check_params(SAWParams(np.array([1, 2]), np.array([0.1, 0.2, 0.3])))
    with pytest.raises(ValueError, match="SpinGraph"):
        saw.init(jnp.zeros(2), correlated_2d(2.0))


@pytest.mark.slow
def test_reproduce_ising_quick_writes_tables_and_figures(tmp_path, monkeypatch):
    """``adaptmc-lab reproduce ising --quick`` (under a minute on one core). Every tuning reward
    divides by the energy variance of its model's burn-in, recorded in ``results.json``."""
    import json

    from adaptmc_lab.cli import main
    from adaptmc_lab.experiments import ising as experiment

    variances = []

    def recording(trace, cost, window, variance=None):
        variances.append(variance)
        return windowed_autocorrelation(trace, cost, window, variance)

    monkeypatch.setattr(experiment, "windowed_autocorrelation", recording)
    out = tmp_path / "ising"
    assert main(["reproduce", "ising", "--quick", "--out", str(out)]) == 0
    recorded = json.loads((out / "results.json").read_text())["energy_variance"]
    assert all(v is not None and v > 0 for v in recorded.values())
    tuned = 3 * experiment.QUICK["rbm"].tune  # three tuners per model, models in order
    assert variances == [recorded[model] for model in recorded for _ in range(tuned)]
    for name in ("table.md", "parameters.md", "results.json", "acf_rbm.png",
                 "surface_spin-glass-3d.png"):
        assert (out / name).is_file(), name
    table = (out / "table.md").read_text()
    assert all(method in table for method in ("gp-hedge", "sir-mixture", "random", "expert",
                                              "kawasaki"))


def test_sizes_replace_every_models_budget_and_bad_ones_are_refused(tmp_path):
    from adaptmc_lab.experiments import ising as experiment

    budgets = experiment.budgets_with(experiment.FULL, {"measure": 30.0, "chains": 8})
    assert {b.measure for b in budgets.values()} == {30}
    assert {b.chains for b in budgets.values()} == {8}
    assert budgets["rbm"].flips == experiment.FULL["rbm"].flips
    out = tmp_path / "ising"
    for sizes, match in (({"sweeps": 3}, "not a size"), ({"measure": 2.5}, "positive"),
                         ({"chains": 0}, "positive")):
        with pytest.raises(ValueError, match=match):
            experiment.run_ising(out, quick=True, sizes=sizes)
        assert not out.exists()


def test_tau_of_chains_that_never_moved_is_the_measured_length():
    """ESS 0 (no chain moved) gives tau = chains x flips, a lower bound; a moving trace gets
    ``chains x flips / ESS`` with its own ESS, not floored."""
    from adaptmc_lab.experiments.ising import tau_in_flips

    tau, ess = tau_in_flips(np.stack([np.full(100, 3.0), np.full(100, 5.0)]), 50.0)
    assert (tau, ess) == (100.0, 0.0)
    moving = np.random.default_rng(0).normal(size=(2, 100))
    tau, ess = tau_in_flips(moving, 50.0)
    assert ess > 50 and tau == 100.0 / ess


def test_sir_mixture_weights_sum_to_one_and_its_draws_follow_them():
    """The SIR mixture (Mahendran et al. 2012, Sec. 4): candidates are resampled with weights
    ``∝ exp(mu / T)`` under the GP mean; the weights sum to one, match that formula, and the
    resampled settings' counts pass a chi-square test against them (p > 0.001)."""
    import math

    from scipy import stats

    from adaptmc import tuners
    from adaptmc.tuners.box import from_unit, snap_unit
    from adaptmc.tuners.gp import gp_predict
    from adaptmc.tuners.surrogate import fit_gp
    from adaptmc_lab.experiments.sir_mixture import mixture_settings, mixture_weights

    box = make_box({"step_size": (0.01, 0.3), "num_leapfrog": (1, 100)})
    state = {"points": np.array([[0.05, 10.0], [0.2, 50.0], [0.25, 90.0]]),
             "rewards": np.array([0.1, 0.9, 0.4]), "failed": np.zeros(3, bool)}
    state = {**tuners.gp_ucb(box).init(None), **state}
    num_candidates, num_draws, temperature = 6, 20000, 0.3
    candidates = snap_unit(box, np.random.default_rng(3).random((num_candidates, 2)))
    weights = mixture_weights(box, state, candidates, temperature, 0.2, 0.1, 0.01)
    assert math.isclose(weights.sum(), 1.0, rel_tol=1e-12)
    mu = gp_predict(fit_gp(box, state), candidates)[0] / temperature
    np.testing.assert_allclose(weights, np.exp(mu) / np.exp(mu).sum(), rtol=1e-10)
    assert weights.max() / weights.min() > 2  # not uniform: the test can tell them apart

    draws = mixture_settings(box, state, np.random.default_rng(3), num_draws, temperature,
                             num_candidates, 0.2, 0.1, 0.01)
    points = from_unit(box, candidates)
    index = np.argmin(np.abs(draws[:, None, :] - points[None]).sum(-1), axis=1)
    np.testing.assert_allclose(draws, points[index])
    counts = np.bincount(index, minlength=num_candidates)
    assert stats.chisquare(counts, num_draws * weights).pvalue > 1e-3
    # a wrong weighting (uniform) is rejected by the same test
    assert stats.chisquare(counts, np.full(num_candidates, num_draws / num_candidates)
                           ).pvalue < 1e-3
