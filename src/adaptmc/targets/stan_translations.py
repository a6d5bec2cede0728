"""Three more posteriordb posteriors as JAX log densities, translated as in
`adaptmc.targets.posteriordb`.

Parameters live on Stan's unconstrained space (``real<lower=0> x = exp(u)``,
``log|J| = u``; Stan Reference Manual, "Constraint transforms"); sampling statements are
written as full ``*_lpdf`` terms. ``constrain`` returns the quantities of the reference draws
under the reference's names; ``unconstrain`` is its inverse.

- ``earnings-earn_height``: ``earn ~ normal(beta[1] + beta[2] height, sigma)``, flat priors.
- ``gp_pois_regr-gp_regr``: ``y ~ multi_normal_cholesky(0, L)`` with
  ``L L^T = gp_exp_quad_cov(x, alpha, rho) + sigma I`` (``sigma``, not ``sigma^2``, on the
  diagonal, as the Stan program has it).
- ``hudson_lynx_hare-lotka_volterra``: the Lotka-Volterra ODE solved with Dormand-Prince
  (`jax.experimental.ode.odeint`) at Stan's ``integrate_ode_rk45`` tolerances, lognormal
  measurement errors (Carpenter 2018, "Predator-Prey Population Dynamics: the Lotka-Volterra
  model in Stan").
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.ode import odeint
from jax.scipy import stats

from adaptmc.targets.stan_transforms import PosteriordbModel, positive

Array = jax.Array

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def _lognormal_logpdf(y, mu, sigma):
    """``lognormal_lpdf(y | mu, sigma)``, all constants kept."""
    log_y = jnp.log(y)
    return -log_y - jnp.log(sigma) - _LOG_SQRT_2PI - 0.5 * ((log_y - mu) / sigma) ** 2


# --- earnings-earn_height ------------------------------------------------------------------


def earn_height(data: dict) -> PosteriordbModel:
    """``earn ~ N(beta[1] + beta[2] height, sigma)``, flat priors on ``beta`` and
    ``sigma > 0``.

    The posterior sd of ``beta[1]`` (about 1e4) is 70 times that of ``beta[2]`` and their
    correlation is -0.998: a hard geometry for a diagonal metric, kept as Stan has it.
    """
    earn = jnp.asarray(data["earn"], float)
    height = jnp.asarray(data["height"], float)

    def logdensity(p):
        sigma, log_jac = positive(p["log_sigma"])
        mean = p["beta"][0] + p["beta"][1] * height
        return jnp.sum(stats.norm.logpdf(earn, mean, sigma)) + log_jac

    def constrain(p):
        return {"beta": p["beta"], "sigma": jnp.exp(p["log_sigma"])}

    def unconstrain(c):
        return {"beta": np.asarray(c["beta"], float), "log_sigma": np.log(c["sigma"])}

    init = {"beta": jnp.zeros(2), "log_sigma": jnp.zeros(())}
    return PosteriordbModel(logdensity, init, constrain, unconstrain)


# --- gp_pois_regr-gp_regr ------------------------------------------------------------------


def _multi_normal_cholesky_logpdf(y, chol):
    """``multi_normal_cholesky_lpdf(y | 0, chol)``: ``y: (n,)``, ``chol: (n, n)`` lower."""
    white = jax.scipy.linalg.solve_triangular(chol, y, lower=True)
    return (
        -y.shape[0] * _LOG_SQRT_2PI
        - jnp.sum(jnp.log(jnp.diag(chol)))
        - 0.5 * jnp.sum(white**2)
    )


def gp_regr(data: dict) -> PosteriordbModel:
    """GP regression with the kernel's parameters marginal: ``rho ~ Gamma(25, 4)`` (shape,
    rate), ``alpha ~ N(0, 2)``, ``sigma ~ N(0, 1)``, all ``> 0``;
    ``y ~ N(0, alpha^2 exp(-|x_i - x_j|^2 / (2 rho^2)) + sigma I)``."""
    x = jnp.asarray(data["x"], float)
    y = jnp.asarray(data["y"], float)
    sq_dist = (x[:, None] - x[None, :]) ** 2
    eye = jnp.eye(x.shape[0])

    def logdensity(p):
        rho, jac_rho = positive(p["log_rho"])
        alpha, jac_alpha = positive(p["log_alpha"])
        sigma, jac_sigma = positive(p["log_sigma"])
        cov = alpha**2 * jnp.exp(-0.5 * sq_dist / rho**2) + sigma * eye
        return (
            stats.gamma.logpdf(rho, 25.0, scale=1.0 / 4.0)
            + stats.norm.logpdf(alpha, 0.0, 2.0)
            + stats.norm.logpdf(sigma, 0.0, 1.0)
            + _multi_normal_cholesky_logpdf(y, jnp.linalg.cholesky(cov))
            + jac_rho
            + jac_alpha
            + jac_sigma
        )

    names = ("rho", "alpha", "sigma")

    def constrain(p):
        return {name: jnp.exp(p[f"log_{name}"]) for name in names}

    def unconstrain(c):
        return {f"log_{name}": np.log(np.asarray(c[name], float)) for name in names}

    init = {f"log_{name}": jnp.zeros(()) for name in names}
    return PosteriordbModel(logdensity, init, constrain, unconstrain)


# --- hudson_lynx_hare-lotka_volterra --------------------------------------------------------

# integrate_ode_rk45(..., relative_tolerance, absolute_tolerance, max_num_steps) of model.stan
ODE_RTOL, ODE_ATOL, ODE_MAX_STEPS = 1e-5, 1e-3, 500


def _lotka_volterra_rhs(z, t, theta):
    """``dz/dt`` of model.stan's ``dz_dt``: prey ``u``, predator ``v``,
    ``theta = (alpha, beta, gamma, delta)``."""
    del t
    u, v = z[0], z[1]
    alpha, beta, gamma, delta = theta[0], theta[1], theta[2], theta[3]
    return jnp.stack([(alpha - beta * v) * u, (-gamma + delta * u) * v])


def lotka_volterra_solution(z_init: Array, theta: Array, ts: Array) -> Array:
    """``z: (N, 2)`` at the times ``ts: (N,)`` from ``z(0) = z_init``, by Dormand-Prince with
    Stan's tolerances (``rtol = 1e-5``, ``atol = 1e-3``, at most 500 steps per output
    interval); differentiable in ``z_init`` and ``theta`` (adjoint method).

    Unlike Stan, which rejects the draw, `odeint` returns an extrapolated value when it runs
    out of steps; at the posterior's scale it takes about ten steps per interval.
    """
    times = jnp.concatenate([jnp.zeros((1,), ts.dtype), ts])
    path = odeint(
        _lotka_volterra_rhs, z_init, times, theta,
        rtol=ODE_RTOL, atol=ODE_ATOL, mxstep=ODE_MAX_STEPS,
    )
    return path[1:]


def lotka_volterra(data: dict) -> PosteriordbModel:
    """Lotka-Volterra with lognormal errors: ``theta[1], theta[3] ~ N(1, 0.5)``,
    ``theta[2], theta[4] ~ N(0.05, 0.05)``, ``sigma ~ lognormal(-1, 1)``,
    ``z_init ~ lognormal(log 10, 1)``, ``y_init ~ lognormal(log z_init, sigma)``,
    ``y[:, k] ~ lognormal(log z[:, k], sigma[k])``; ``theta, z_init, sigma > 0``."""
    ts = jnp.asarray(data["ts"], float)
    y_init = jnp.asarray(data["y_init"], float)
    y = jnp.asarray(data["y"], float)
    prior_loc = jnp.array([1.0, 0.05, 1.0, 0.05])
    prior_scale = jnp.array([0.5, 0.05, 0.5, 0.05])

    def logdensity(p):
        theta, jac_theta = positive(p["log_theta"])
        z_init, jac_z = positive(p["log_z_init"])
        sigma, jac_sigma = positive(p["log_sigma"])
        z = lotka_volterra_solution(z_init, theta, ts)
        return (
            jnp.sum(stats.norm.logpdf(theta, prior_loc, prior_scale))
            + jnp.sum(_lognormal_logpdf(sigma, -1.0, 1.0))
            + jnp.sum(_lognormal_logpdf(z_init, jnp.log(10.0), 1.0))
            + jnp.sum(_lognormal_logpdf(y_init, jnp.log(z_init), sigma))
            + jnp.sum(_lognormal_logpdf(y, jnp.log(z), sigma))
            + jnp.sum(jac_theta) + jnp.sum(jac_z) + jnp.sum(jac_sigma)
        )

    names = ("theta", "z_init", "sigma")

    def constrain(p):
        return {name: jnp.exp(p[f"log_{name}"]) for name in names}

    def unconstrain(c):
        return {f"log_{name}": np.log(np.asarray(c[name], float)) for name in names}

    init = {"log_theta": jnp.zeros(4), "log_z_init": jnp.zeros(2), "log_sigma": jnp.zeros(2)}
    return PosteriordbModel(logdensity, init, constrain, unconstrain)


NEW_MODELS: dict[str, Callable[[dict], PosteriordbModel]] = {
    "earnings-earn_height": earn_height,
    "gp_pois_regr-gp_regr": gp_regr,
    "hudson_lynx_hare-lotka_volterra": lotka_volterra,
}
