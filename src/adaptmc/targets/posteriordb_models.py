"""Eight posteriordb posteriors translated line by line from their Stan programs (the
unscaled regression, the GP and the ODE model are in `adaptmc.targets.stan_translations`).

Parameters are sampled on Stan's unconstrained space with Stan's transforms and
log-Jacobians (`adaptmc.targets.stan_transforms`). Sampling statements (``y ~ normal(...)``)
are written as full ``*_lpdf`` terms: the constants Stan drops change the log density by a
constant only. The pytree leaves are the unconstrained parameters (``log_tau``,
``theta_trans``...); ``constrain`` maps them to the quantities of the reference draws under
the reference's names (``theta`` for ``theta[1]``...).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy import stats
from jax.scipy.special import gammaln

from adaptmc.targets.stan_transforms import (
    PosteriordbModel,
    bounded,
    logit,
    ordered,
    positive,
)

Array = jax.Array


def eight_schools_noncentered(data: dict) -> PosteriordbModel:
    """``theta = theta_trans * tau + mu``; ``theta_trans ~ N(0, 1)``, ``y ~ N(theta, sigma)``,
    ``mu ~ N(0, 5)``, ``tau ~ Cauchy(0, 5)``, ``tau > 0``."""
    y, sigma = jnp.asarray(data["y"], float), jnp.asarray(data["sigma"], float)
    num_schools = int(data["J"])

    def constrain(p):
        tau = jnp.exp(p["log_tau"])
        return {"theta": p["theta_trans"] * tau + p["mu"], "mu": p["mu"], "tau": tau}

    def logdensity(p):
        tau, log_jac = positive(p["log_tau"])
        theta = p["theta_trans"] * tau + p["mu"]
        return (
            jnp.sum(stats.norm.logpdf(p["theta_trans"], 0.0, 1.0))
            + jnp.sum(stats.norm.logpdf(y, theta, sigma))
            + stats.norm.logpdf(p["mu"], 0.0, 5.0)
            + stats.cauchy.logpdf(tau, 0.0, 5.0)
            + log_jac
        )

    def unconstrain(c):
        return {
            "theta_trans": (np.asarray(c["theta"]) - c["mu"]) / c["tau"],
            "mu": np.asarray(c["mu"], float),
            "log_tau": np.log(c["tau"]),
        }

    init = {"theta_trans": jnp.zeros(num_schools), "mu": jnp.zeros(()), "log_tau": jnp.zeros(())}
    return PosteriordbModel(logdensity, init, constrain, unconstrain)


# --- arK -----------------------------------------------------------------------------------


def ar_k(data: dict) -> PosteriordbModel:
    """AR(K): ``y[t] ~ N(alpha + sum_k beta[k] y[t-k], sigma)`` for ``t > K``;
    ``alpha, beta ~ N(0, 10)``, ``sigma ~ Cauchy(0, 2.5)``, ``sigma > 0``."""
    order, y = int(data["K"]), np.asarray(data["y"], float)
    length = y.shape[0]
    # lags[t - K, k - 1] = y[t - k] (0-based t from K to T-1)
    lags = jnp.asarray(np.stack([y[order - k : length - k] for k in range(1, order + 1)], axis=1))
    response = jnp.asarray(y[order:])

    def logdensity(p):
        sigma, log_jac = positive(p["log_sigma"])
        mu = p["alpha"] + lags @ p["beta"]
        return (
            stats.norm.logpdf(p["alpha"], 0.0, 10.0)
            + jnp.sum(stats.norm.logpdf(p["beta"], 0.0, 10.0))
            + stats.cauchy.logpdf(sigma, 0.0, 2.5)
            + jnp.sum(stats.norm.logpdf(response, mu, sigma))
            + log_jac
        )

    def constrain(p):
        return {"alpha": p["alpha"], "beta": p["beta"], "sigma": jnp.exp(p["log_sigma"])}

    def unconstrain(c):
        return {
            "alpha": np.asarray(c["alpha"], float),
            "beta": np.asarray(c["beta"], float),
            "log_sigma": np.log(c["sigma"]),
        }

    init = {"alpha": jnp.zeros(()), "beta": jnp.zeros(order), "log_sigma": jnp.zeros(())}
    return PosteriordbModel(logdensity, init, constrain, unconstrain)


# --- diamonds (brms) -------------------------------------------------------------------------


def diamonds(data: dict) -> PosteriordbModel:
    """brms linear regression on centred predictors: ``b ~ N(0, 1)``,
    ``Intercept ~ student_t(3, 8, 10)``, ``sigma ~ student_t(3, 0, 10)`` truncated at 0
    (a constant), ``Y ~ normal_id_glm(Xc, Intercept, b, sigma)``."""
    x = np.asarray(data["X"], float)
    xc = jnp.asarray(x[:, 1:] - x[:, 1:].mean(axis=0))
    response = jnp.asarray(data["Y"], float)
    num_b = x.shape[1] - 1
    prior_only = bool(data["prior_only"])
    # student_t_lccdf(0 | 3, 0, 10) = log(1/2)
    truncation = -np.log(0.5)

    def logdensity(p):
        sigma, log_jac = positive(p["log_sigma"])
        lp = (
            jnp.sum(stats.norm.logpdf(p["b"], 0.0, 1.0))
            + stats.t.logpdf(p["Intercept"], 3.0, 8.0, 10.0)
            + stats.t.logpdf(sigma, 3.0, 0.0, 10.0)
            + truncation
            + log_jac
        )
        if not prior_only:
            lp = lp + jnp.sum(stats.norm.logpdf(response, p["Intercept"] + xc @ p["b"], sigma))
        return lp

    def constrain(p):
        return {"b": p["b"], "Intercept": p["Intercept"], "sigma": jnp.exp(p["log_sigma"])}

    def unconstrain(c):
        return {
            "b": np.asarray(c["b"], float),
            "Intercept": np.asarray(c["Intercept"], float),
            "log_sigma": np.log(c["sigma"]),
        }

    init = {"b": jnp.zeros(num_b), "Intercept": jnp.zeros(()), "log_sigma": jnp.zeros(())}
    return PosteriordbModel(logdensity, init, constrain, unconstrain)


# --- gp_pois_regr ----------------------------------------------------------------------------


def _gp_cholesky(x, alpha, rho):
    """Cholesky factor of ``gp_exp_quad_cov(x, alpha, rho) + 1e-10 I``."""
    sq_dist = (x[:, None] - x[None, :]) ** 2
    cov = alpha**2 * jnp.exp(-0.5 * sq_dist / rho**2) + 1e-10 * jnp.eye(x.shape[0])
    return jnp.linalg.cholesky(cov)


def gp_pois_regr(data: dict) -> PosteriordbModel:
    """Latent GP Poisson regression, non-centred: ``f = L(alpha, rho) f_tilde``,
    ``rho ~ Gamma(25, 4)`` (shape, rate), ``alpha ~ N(0, 2)``, ``f_tilde ~ N(0, 1)``,
    ``k ~ poisson_log(f)``; ``rho, alpha > 0``."""
    x = jnp.asarray(data["x"], float)
    counts = jnp.asarray(data["k"], float)
    num_points = int(data["N"])

    def latent(p):
        rho, alpha = jnp.exp(p["log_rho"]), jnp.exp(p["log_alpha"])
        return _gp_cholesky(x, alpha, rho) @ p["f_tilde"]

    def logdensity(p):
        rho, jac_rho = positive(p["log_rho"])
        alpha, jac_alpha = positive(p["log_alpha"])
        f = _gp_cholesky(x, alpha, rho) @ p["f_tilde"]
        return (
            stats.gamma.logpdf(rho, 25.0, scale=1.0 / 4.0)
            + stats.norm.logpdf(alpha, 0.0, 2.0)
            + jnp.sum(stats.norm.logpdf(p["f_tilde"], 0.0, 1.0))
            + jnp.sum(counts * f - jnp.exp(f) - gammaln(counts + 1.0))
            + jac_rho
            + jac_alpha
        )

    def constrain(p):
        return {"rho": jnp.exp(p["log_rho"]), "alpha": jnp.exp(p["log_alpha"]), "f": latent(p)}

    def unconstrain(c):
        chol = np.asarray(_gp_cholesky(x, float(c["alpha"]), float(c["rho"])))
        return {
            "log_rho": np.log(c["rho"]),
            "log_alpha": np.log(c["alpha"]),
            "f_tilde": np.linalg.solve(chol, np.asarray(c["f"], float)),
        }

    init = {"log_rho": jnp.zeros(()), "log_alpha": jnp.zeros(()), "f_tilde": jnp.zeros(num_points)}
    return PosteriordbModel(logdensity, init, constrain, unconstrain)


# --- low_dim_gauss_mix -----------------------------------------------------------------------


def low_dim_gauss_mix(data: dict) -> PosteriordbModel:
    """Two-component normal mixture with ``ordered[2] mu``: ``sigma ~ N(0, 2)``,
    ``mu ~ N(0, 2)``, ``theta ~ Beta(5, 5)``, and per point
    ``log_mix(theta, N(y | mu1, sigma1), N(y | mu2, sigma2))``."""
    y = jnp.asarray(data["y"], float)

    def logdensity(p):
        mu, jac_mu = ordered(p["mu_raw"])
        sigma, jac_sigma = positive(p["log_sigma"])
        theta, jac_theta = bounded(p["logit_theta"], 0.0, 1.0)
        first = jnp.log(theta) + stats.norm.logpdf(y, mu[0], sigma[0])
        second = jnp.log1p(-theta) + stats.norm.logpdf(y, mu[1], sigma[1])
        return (
            jnp.sum(stats.norm.logpdf(sigma, 0.0, 2.0))
            + jnp.sum(stats.norm.logpdf(mu, 0.0, 2.0))
            + stats.beta.logpdf(theta, 5.0, 5.0)
            + jnp.sum(jnp.logaddexp(first, second))
            + jac_mu
            + jnp.sum(jac_sigma)
            + jac_theta
        )

    def constrain(p):
        return {
            "mu": ordered(p["mu_raw"])[0],
            "sigma": jnp.exp(p["log_sigma"]),
            "theta": jax.nn.sigmoid(p["logit_theta"]),
        }

    def unconstrain(c):
        mu = np.asarray(c["mu"], float)
        return {
            "mu_raw": np.array([mu[0], np.log(mu[1] - mu[0])]),
            "log_sigma": np.log(np.asarray(c["sigma"], float)),
            "logit_theta": logit(c["theta"]),
        }

    init = {
        "mu_raw": jnp.zeros(2),
        "log_sigma": jnp.zeros(2),
        "logit_theta": jnp.zeros(()),
    }
    return PosteriordbModel(logdensity, init, constrain, unconstrain)


# --- garch11 -------------------------------------------------------------------------------


def garch11(data: dict) -> PosteriordbModel:
    """GARCH(1,1): ``sigma[t]^2 = alpha0 + alpha1 (y[t-1] - mu)^2 + beta1 sigma[t-1]^2`` from
    ``sigma[1] = sigma1``; ``y ~ N(mu, sigma)``; flat priors on ``mu``, ``alpha0 > 0``,
    ``0 < alpha1 < 1``, ``0 < beta1 < 1 - alpha1``."""
    y = jnp.asarray(data["y"], float)
    sigma1 = float(data["sigma1"])

    def parts(p):
        alpha0, jac0 = positive(p["log_alpha0"])
        alpha1, jac1 = bounded(p["logit_alpha1"], 0.0, 1.0)
        beta1, jac_b = bounded(p["logit_beta1"], 0.0, 1.0 - alpha1)
        return alpha0, alpha1, beta1, jac0 + jac1 + jac_b

    def logdensity(p):
        mu = p["mu"]
        alpha0, alpha1, beta1, log_jac = parts(p)

        def next_sigma(sigma_prev, y_prev):
            sigma = jnp.sqrt(alpha0 + alpha1 * (y_prev - mu) ** 2 + beta1 * sigma_prev**2)
            return sigma, sigma

        _, rest = jax.lax.scan(next_sigma, jnp.asarray(sigma1, y.dtype), y[:-1])
        sigma = jnp.concatenate([jnp.full((1,), sigma1, y.dtype), rest])
        return jnp.sum(stats.norm.logpdf(y, mu, sigma)) + log_jac

    def constrain(p):
        alpha0, alpha1, beta1, _ = parts(p)
        return {"mu": p["mu"], "alpha0": alpha0, "alpha1": alpha1, "beta1": beta1}

    def unconstrain(c):
        alpha1 = float(c["alpha1"])
        return {
            "mu": np.asarray(c["mu"], float),
            "log_alpha0": np.log(c["alpha0"]),
            "logit_alpha1": logit(alpha1),
            "logit_beta1": logit(c["beta1"] / (1.0 - alpha1)),
        }

    init = {
        "mu": jnp.zeros(()),
        "log_alpha0": jnp.zeros(()),
        "logit_alpha1": jnp.zeros(()),
        "logit_beta1": jnp.zeros(()),
    }
    return PosteriordbModel(logdensity, init, constrain, unconstrain)


# --- linear regressions: kidiq kidscore_momiq, nes1972 nes -------------------------------


def _linear_regression(design: np.ndarray, response: np.ndarray, sigma_prior_scale):
    """``response ~ N(design @ beta, sigma)`` with a flat prior on ``beta`` and
    ``sigma ~ Cauchy(0, sigma_prior_scale)`` (flat when None), ``sigma > 0``."""
    xj, yj = jnp.asarray(design), jnp.asarray(response)

    def logdensity(p):
        sigma, log_jac = positive(p["log_sigma"])
        lp = jnp.sum(stats.norm.logpdf(yj, xj @ p["beta"], sigma)) + log_jac
        if sigma_prior_scale is not None:
            lp = lp + stats.cauchy.logpdf(sigma, 0.0, sigma_prior_scale)
        return lp

    def constrain(p):
        return {"beta": p["beta"], "sigma": jnp.exp(p["log_sigma"])}

    def unconstrain(c):
        return {"beta": np.asarray(c["beta"], float), "log_sigma": np.log(c["sigma"])}

    init = {"beta": jnp.zeros(design.shape[1]), "log_sigma": jnp.zeros(())}
    return PosteriordbModel(logdensity, init, constrain, unconstrain)


def kidscore_momiq(data: dict) -> PosteriordbModel:
    """``kid_score ~ N(beta1 + beta2 mom_iq, sigma)``, ``sigma ~ Cauchy(0, 2.5)``, flat
    ``beta``."""
    mom_iq = np.asarray(data["mom_iq"], float)
    design = np.stack([np.ones_like(mom_iq), mom_iq], axis=1)
    return _linear_regression(design, np.asarray(data["kid_score"], float), 2.5)


def nes(data: dict) -> PosteriordbModel:
    """``partyid7 ~ N(X beta, sigma)`` with an intercept, ideology, race, three age dummies
    (``age_discrete`` 2, 3, 4), education, gender and income; flat priors."""
    age = np.asarray(data["age_discrete"])
    columns = [
        np.ones(age.shape[0]),
        data["real_ideo"],
        data["race_adj"],
        age == 2,
        age == 3,
        age == 4,
        data["educ1"],
        data["gender"],
        data["income"],
    ]
    design = np.stack([np.asarray(c, float) for c in columns], axis=1)
    return _linear_regression(design, np.asarray(data["partyid7"], float), None)
