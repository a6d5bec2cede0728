"""NumPyro and PyMC models as targets: the adapters' log densities against hand-written JAX
ones in the same unconstrained space, `constrain`, and `as_target`'s dispatch."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy import stats

from adaptmc.targets import Target, as_target, from_numpyro, from_pymc, get_target

# Eight schools (Rubin 1981; the Stan example's data)
Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
# A small regression: y = X beta + N(0, s^2), two coefficients, a positive noise scale
X = np.random.default_rng(20261123).normal(size=(20, 2))
Y_REG = X @ np.array([1.5, -0.5]) + 0.3 * np.random.default_rng(7).normal(size=20)


def schools_logdensity(mu, log_tau, theta_tilde):
    """Non-centred eight schools with ``tau = exp(log_tau)`` and its log-Jacobian."""
    tau = jnp.exp(log_tau)
    return (stats.norm.logpdf(mu, 0.0, 5.0) + stats.cauchy.logpdf(tau, 0.0, 5.0) + log_tau
            + jnp.sum(stats.norm.logpdf(theta_tilde))
            + jnp.sum(stats.norm.logpdf(Y, mu + tau * theta_tilde, SIGMA)))


def regression_logdensity(beta, log_s):
    s = jnp.exp(log_s)
    return (jnp.sum(stats.norm.logpdf(beta, 0.0, 2.0)) + stats.expon.logpdf(s) + log_s
            + jnp.sum(stats.norm.logpdf(Y_REG, X @ beta, s)))


def numpyro_schools(sigma, y=None):
    import numpyro
    import numpyro.distributions as dist

    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("J", len(sigma)):
        theta_tilde = numpyro.sample("theta_tilde", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(mu + tau * theta_tilde, sigma), obs=y)


def numpyro_regression(x, y):
    import numpyro
    import numpyro.distributions as dist

    beta = numpyro.sample("beta", dist.Normal(0.0, 2.0).expand([2]))
    s = numpyro.sample("s", dist.Exponential(1.0))
    numpyro.sample("y", dist.Normal(x @ beta, s), obs=y)


@pytest.fixture(scope="module")
def pymc_models():
    pm = pytest.importorskip("pymc")
    with pm.Model(name="") as schools:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        theta_tilde = pm.Normal("theta_tilde", 0.0, 1.0, shape=8)
        pm.Normal("y", mu + tau * theta_tilde, SIGMA, observed=Y)
    with pm.Model() as regression:
        beta = pm.Normal("beta", 0.0, 2.0, shape=2)
        s = pm.Exponential("s", 1.0)
        pm.Normal("y", pm.math.dot(X, beta), s, observed=Y_REG)
    return {"schools": schools, "regression": regression}


@pytest.fixture(scope="module")
def targets(pymc_models):
    pytest.importorskip("numpyro")
    return {
        ("numpyro", "schools"): from_numpyro(numpyro_schools, SIGMA, y=Y),
        ("numpyro", "regression"): from_numpyro(numpyro_regression, X, Y_REG),
        ("pymc", "schools"): from_pymc(pymc_models["schools"], name="schools"),
        ("pymc", "regression"): from_pymc(pymc_models["regression"]),
    }


# per (library, model): the hand-written density as a function of the adapter's named
# unconstrained parameters, the names `constrain` gives and their shapes
HAND = {
    ("numpyro", "schools"): lambda p: schools_logdensity(p["mu"], p["tau"], p["theta_tilde"]),
    ("pymc", "schools"): lambda p: schools_logdensity(p["mu"], p["tau_log__"], p["theta_tilde"]),
    ("numpyro", "regression"): lambda p: regression_logdensity(p["beta"], p["s"]),
    ("pymc", "regression"): lambda p: regression_logdensity(p["beta"], p["s_log__"]),
}
CONSTRAINED = {
    "schools": ({"mu": (), "tau": (), "theta_tilde": (8,)}, "tau"),
    "regression": ({"beta": (2,), "s": ()}, "s"),
}
CASES = sorted(HAND)


@pytest.mark.parametrize("case", CASES, ids="-".join)
def test_adapter_logdensity_matches_hand_written(targets, case):
    target = targets[case]
    hand = lambda position: HAND[case](target.unravel(position))
    positions = jax.random.normal(jax.random.key(11), (3, target.dim))
    ours = jax.jit(jax.vmap(jax.value_and_grad(target.logdensity)))(positions)
    theirs = jax.jit(jax.vmap(jax.value_and_grad(hand)))(positions)
    offset = ours[0] - theirs[0]  # the densities' normalising constants differ
    np.testing.assert_allclose(offset - offset[0], 0.0, atol=1e-8)
    assert np.all(np.isfinite(ours[1]))
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("case", CASES, ids="-".join)
def test_constrain_names_shapes_and_positive_scale(targets, case):
    target = targets[case]
    shapes, scale = CONSTRAINED[case[1]]
    positions = jax.random.normal(jax.random.key(12), (3, target.dim))
    constrained = jax.vmap(target.constrain)(positions)
    assert {name: value.shape[1:] for name, value in constrained.items()} == shapes
    params = jax.vmap(target.unravel)(positions)
    log_scale = params[scale] if case[0] == "numpyro" else params[f"{scale}_log__"]
    assert np.all(constrained[scale] > 0)
    np.testing.assert_allclose(constrained[scale], np.exp(log_scale), rtol=1e-12)
    unbounded = "theta_tilde" if case[1] == "schools" else "beta"
    np.testing.assert_allclose(constrained[unbounded], params[unbounded])


def test_names_start_and_source(targets):
    schools = targets[("pymc", "schools")]
    assert schools.name == "schools" and schools.dim == 10
    assert schools.parameter_names[:2] == ("mu", "tau_log__")
    assert schools.parameter_names[2:] == tuple(f"theta_tilde[{i}]" for i in range(8))
    assert float(schools.unravel(schools.initial_position)["tau_log__"]) == pytest.approx(
        np.log(5.0))  # PyMC's initial point: the HalfCauchy's support point 5
    numpyro_schools_target = targets[("numpyro", "schools")]
    assert numpyro_schools_target.name == "numpyro_schools"
    assert numpyro_schools_target.parameter_names == schools.parameter_names[:1] + (
        "tau", *schools.parameter_names[2:])
    assert {t.info["source"] for t in targets.values()} == {"numpyro", "pymc"}


def test_numpyro_init_and_fixed_start():
    again = from_numpyro(numpyro_schools, SIGMA, y=Y)
    np.testing.assert_array_equal(again.initial_position,
                                  from_numpyro(numpyro_schools, SIGMA, y=Y).initial_position)
    start = from_numpyro(numpyro_schools, SIGMA, y=Y, init={"mu": 1.0, "tau": 2.0},
                         name="eight")
    params = start.unravel(start.initial_position)
    assert start.name == "eight" and float(params["mu"]) == 1.0
    assert float(params["tau"]) == pytest.approx(np.log(2.0))


def test_discrete_latent_sites_are_refused(pymc_models):
    import numpyro
    import numpyro.distributions as dist

    def mixture():
        numpyro.sample("z", dist.Bernoulli(0.5))

    with pytest.raises(ValueError, match="'z' is a discrete latent"):
        from_numpyro(mixture)
    pm = pytest.importorskip("pymc")
    with pm.Model() as counts:
        pm.Poisson("n", 3.0)
    with pytest.raises(ValueError, match="discrete"):
        from_pymc(counts)


def test_as_target_dispatch(targets, pymc_models):
    built = targets[("numpyro", "schools")]
    assert as_target(built) is built
    assert as_target("gauss-2d-v1").dim == get_target("gauss-2d-v1").dim
    pair = as_target((lambda p: -0.5 * jnp.sum(p**2), jnp.zeros(3)), name="quad")
    assert isinstance(pair, Target) and pair.name == "quad" and pair.constrain is None
    from_model = as_target(numpyro_schools, SIGMA, y=Y)
    assert from_model.info["source"] == "numpyro" and from_model.dim == 10
    np.testing.assert_array_equal(from_model.initial_position, built.initial_position)
    pymc_target = as_target(pymc_models["regression"], name="reg")
    assert pymc_target.info["source"] == "pymc" and pymc_target.name == "reg"


def test_as_target_refuses_what_it_cannot_read():
    with pytest.raises(ValueError, match="cannot make a target from a int"):
        as_target(42)
    with pytest.raises(ValueError, match="cannot make a target"):
        as_target((1, 2, 3))
    with pytest.raises(ValueError, match="model arguments are for a NumPyro model only"):
        as_target("gauss-2d-v1", 3)
    # a bare log density is callable but no model: it fails when run without its parameters
    with pytest.raises(ValueError, match="run as a NumPyro model"):
        as_target(lambda params: -0.5 * jnp.sum(params**2))
    with pytest.raises(ValueError, match="cannot make a target from a function"):
        as_target(lambda: 0.0)  # runs, but samples nothing
