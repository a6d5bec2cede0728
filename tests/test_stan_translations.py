"""The three translations of `adaptmc.targets.stan_translations`: finite log density and
gradient, ``constrain`` inverting ``unconstrain`` on reference draws, log-density differences
against an independent NumPy/SciPy version of each Stan program, the ODE solution against
`scipy.integrate.solve_ivp` at tight tolerance, and (slow) BlackJAX NUTS means against the
reference means."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree
from scipy import integrate, stats

from adaptmc.datasets.posteriordb import load_posterior
from adaptmc.targets.named_draws import group_named
from adaptmc.targets.posteriordb import reference_position
from adaptmc.targets.stan_translations import (
    NEW_MODELS,
    ODE_ATOL,
    ODE_RTOL,
    lotka_volterra_solution,
)

# (chain, draw) of the reference draws at which the log densities are compared
POINTS = ((0, 0), (1, 17), (3, 25), (6, 51), (9, 99))


def _load(name):
    posterior = load_posterior(name)
    return posterior, NEW_MODELS[name](posterior.data)


def _constrained(posterior, chain, draw):
    return group_named({k: v[chain, draw] for k, v in posterior.reference_draws.items()})


def _flat_logdensity(model):
    _, unravel = ravel_pytree(model.initial_params)
    return jax.jit(jax.value_and_grad(lambda x: model.logdensity(unravel(x))))


# --- independent log densities: constrained parameters c, data d ---------------------------


def lp_earn_height(c, d):
    mean = c["beta"][0] + c["beta"][1] * np.asarray(d["height"], float)
    return stats.norm.logpdf(d["earn"], mean, c["sigma"]).sum() + np.log(c["sigma"])


def lp_gp_regr(c, d):
    x = np.asarray(d["x"], float)
    rho, alpha, sigma = float(c["rho"]), float(c["alpha"]), float(c["sigma"])
    cov = alpha**2 * np.exp(-((x[:, None] - x[None, :]) ** 2) / (2 * rho**2))
    cov += sigma * np.eye(len(x))
    return (
        stats.gamma.logpdf(rho, 25, scale=1 / 4)
        + stats.norm.logpdf(alpha, 0, 2)
        + stats.norm.logpdf(sigma, 0, 1)
        + stats.multivariate_normal.logpdf(d["y"], np.zeros(len(x)), cov)
        + np.log(rho) + np.log(alpha) + np.log(sigma)
    )


def lotka_volterra_exact(c, d):
    """``z: (N, 2)`` by DOP853 at ``rtol = atol = 1e-12``."""
    a, b, g, e = c["theta"]

    def rhs(t, z):
        return [(a - b * z[1]) * z[0], (-g + e * z[0]) * z[1]]

    ts = np.asarray(d["ts"], float)
    sol = integrate.solve_ivp(rhs, (0.0, ts[-1]), c["z_init"], method="DOP853", t_eval=ts,
                              rtol=1e-12, atol=1e-12)
    assert sol.success
    return sol.y.T


def lp_lotka_volterra(c, d, z):
    theta, sigma, z_init = c["theta"], c["sigma"], c["z_init"]
    y = np.asarray(d["y"], float)
    return (
        stats.norm.logpdf(theta[[0, 2]], 1, 0.5).sum()
        + stats.norm.logpdf(theta[[1, 3]], 0.05, 0.05).sum()
        + stats.lognorm.logpdf(sigma, 1, scale=np.exp(-1)).sum()
        + stats.lognorm.logpdf(z_init, 1, scale=10).sum()
        + stats.lognorm.logpdf(d["y_init"], sigma, scale=z_init).sum()
        + stats.lognorm.logpdf(y, sigma[None, :], scale=z).sum()
        + np.log(theta).sum() + np.log(z_init).sum() + np.log(sigma).sum()
    )


# --- fast tier -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(NEW_MODELS))
def test_finite_at_initial_point_and_reference_draws(name):
    posterior, model = _load(name)
    value_and_grad = _flat_logdensity(model)
    positions = [ravel_pytree(model.initial_params)[0]]
    positions += [reference_position(posterior, model, c, d) for c, d in POINTS]
    for position in positions:
        value, grad = value_and_grad(position)
        assert np.isfinite(value) and np.all(np.isfinite(grad)), (name, position)


@pytest.mark.parametrize("name", list(NEW_MODELS))
def test_constrain_inverts_unconstrain_on_reference_draws(name):
    posterior, model = _load(name)
    for chain, draw in POINTS:
        expected = _constrained(posterior, chain, draw)
        params = jax.tree.map(jnp.asarray, model.unconstrain(expected))
        got = model.constrain(params)
        assert set(got) == set(expected)
        for key, value in expected.items():
            np.testing.assert_allclose(np.asarray(got[key]), value, rtol=1e-10, atol=0)


@pytest.mark.parametrize(
    ("name", "independent"),
    [("earnings-earn_height", lp_earn_height), ("gp_pois_regr-gp_regr", lp_gp_regr)],
)
def test_log_density_differences_match_independent(name, independent):
    posterior, model = _load(name)
    value_and_grad = _flat_logdensity(model)
    ours, theirs = [], []
    for chain, draw in POINTS:
        ours.append(float(value_and_grad(reference_position(posterior, model, chain, draw))[0]))
        theirs.append(float(independent(_constrained(posterior, chain, draw), posterior.data)))
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    np.testing.assert_allclose(ours[1:] - ours[0], theirs[1:] - theirs[0], rtol=1e-7, atol=1e-7)


def test_lotka_volterra_ode_matches_solve_ivp():
    """Dormand-Prince at Stan's rtol 1e-5, atol 1e-3 against DOP853 at 1e-12: the global
    error measured on these draws is at most 2.2e-3 relative (0.07 in populations of 1-80)."""
    posterior = load_posterior("hudson_lynx_hare-lotka_volterra")
    ts = jnp.asarray(posterior.data["ts"], float)
    assert (ODE_RTOL, ODE_ATOL) == (1e-5, 1e-3)
    for chain, draw in POINTS:
        c = _constrained(posterior, chain, draw)
        z = lotka_volterra_solution(jnp.asarray(c["z_init"]), jnp.asarray(c["theta"]), ts)
        np.testing.assert_allclose(np.asarray(z), lotka_volterra_exact(c, posterior.data),
                                   rtol=5e-3)


def test_lotka_volterra_log_density_matches_independent():
    """Given the same ODE solution, the log density differences agree to rounding; with the
    exact solution they agree to the solver's error (at most 0.044 measured over 200
    reference draws, against log-density spreads of about 3)."""
    name = "hudson_lynx_hare-lotka_volterra"
    posterior, model = _load(name)
    value_and_grad = _flat_logdensity(model)
    ts = jnp.asarray(posterior.data["ts"], float)
    ours, same_ode, exact_ode = [], [], []
    for chain, draw in POINTS:
        c = _constrained(posterior, chain, draw)
        ours.append(float(value_and_grad(reference_position(posterior, model, chain, draw))[0]))
        z = np.asarray(lotka_volterra_solution(jnp.asarray(c["z_init"]),
                                               jnp.asarray(c["theta"]), ts))
        same_ode.append(lp_lotka_volterra(c, posterior.data, z))
        exact = lotka_volterra_exact(c, posterior.data)
        exact_ode.append(lp_lotka_volterra(c, posterior.data, exact))
    ours, same_ode, exact_ode = (np.asarray(v) for v in (ours, same_ode, exact_ode))
    np.testing.assert_allclose(ours[1:] - ours[0], same_ode[1:] - same_ode[0], rtol=1e-7,
                               atol=1e-7)
    np.testing.assert_allclose(ours[1:] - ours[0], exact_ode[1:] - exact_ode[0], atol=0.1)


def test_models_are_keyed_by_folder_names():
    for name, build in NEW_MODELS.items():
        posterior = load_posterior(name)
        model = build(posterior.data)
        assert posterior.name == name
        names = set(group_named({k: 0.0 for k in posterior.reference_draws}))
        assert set(model.constrain(model.initial_params)) == names


# --- slow tier: BlackJAX NUTS against the reference ----------------------------------------


def nuts_constrained_means(model, starts, seed, num_warmup=500, num_samples=500):
    """Constrained means (reference names, flat) of BlackJAX NUTS after window adaptation
    (dense metric), one chain from each of ``starts: (chains, dim)``."""
    import blackjax

    from adaptmc.targets.named_draws import flatten_named

    _, unravel = ravel_pytree(model.initial_params)

    def logdensity(x):
        return model.logdensity(unravel(x))

    def one_chain(key, start):
        warm_key, sample_key = jax.random.split(key)
        adaptation = blackjax.window_adaptation(blackjax.nuts, logdensity,
                                                is_mass_matrix_diagonal=False)
        (state, params), _ = adaptation.run(warm_key, start, num_steps=num_warmup)
        step = blackjax.nuts(logdensity, **params).step

        def body(state, key):
            state, _ = step(key, state)
            return state, model.constrain(unravel(state.position))

        _, draws = jax.lax.scan(body, state, jax.random.split(sample_key, num_samples))
        return draws

    keys = jax.random.split(jax.random.key(seed), starts.shape[0])
    draws = jax.jit(jax.vmap(one_chain))(keys, starts)
    flat = flatten_named(jax.tree.map(np.asarray, draws), batch_ndim=2)
    return {k: float(np.mean(v)) for k, v in flat.items()}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(NEW_MODELS))
def test_nuts_means_match_reference(name):
    """Four chains start from the first draws of four reference chains: the test is of the
    density, not of the warm-up's search. (From the zero initial point, which for
    Lotka-Volterra is the ODE's equilibrium, one chain of four ended a 500-step warm-up
    unconverged, with 98 divergences in 500 draws; from reference draws none diverged.)"""
    posterior, model = _load(name)
    starts = jnp.stack([reference_position(posterior, model, chain, 0) for chain in range(4)])
    start = time.perf_counter()
    means = nuts_constrained_means(model, starts, seed=20261123)
    elapsed = time.perf_counter() - start
    sd = posterior.reference_sd
    z = {k: (means[k] - posterior.reference_mean[k]) / sd[k] for k in posterior.reference_mean}
    print(f"{name}: max |z| = {max(map(abs, z.values())):.3f} reference sd, {elapsed:.1f} s", z)
    assert max(map(abs, z.values())) < 0.25, z
