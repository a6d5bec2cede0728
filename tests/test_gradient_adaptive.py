"""Gradient-based adaptive MCMC (Titsias & Dellaportas 2019): the reparametrised gradients,
invariance with adaptation frozen (one step from exact draws, and chains through the run
loop in MCSE units), the learned covariance shape and the beta acceptance control."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.kernels import KERNELS, GADMALAParams, GADRWMParams
from adaptmc.kernels.gradient_adaptive import (
    _mala_proposal,
    _rwm_proposal,
    factor_matrix,
    proposal_covariance,
    scaled_covariance_error,
    speed_objective,
)
from adaptmc.run import run
from adaptmc.targets import correlated_2d, gaussian, gp_gaussian_51d
from adaptmc.tuners.warmup import switch_after_warmup
from helpers import moment_z_scores

TARGET_2D = correlated_2d(1.0)
GAD_KERNELS = ("gadrwm", "gadrwm-direct", "gadrwm-diag", "gadmala", "gadmala-direct",
               "gadmala-exact", "gadmala-diag")


def _dense_5d():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(5, 5))
    return gaussian(rng.normal(size=5), a @ a.T / 5 + 0.2 * np.eye(5), name="dense-5d")


def _random_state(kernel, target, key, scale):
    """A state at the target's mean with a random lower-triangular factor (whichever
    parametrisation the kernel's state holds)."""
    state = kernel.init(jnp.asarray(target.info["mean"]), target)
    k1, k2 = jax.random.split(key)
    factor = {"log_diag": jnp.log(scale) + 0.3 * jax.random.normal(k1, (target.dim,))}
    for name in set(state.factor) - {"log_diag"}:
        factor[name] = 0.3 * scale * jax.random.normal(k2, (target.dim, target.dim))
    return state._replace(factor=factor, beta=jnp.asarray(1.0))


def _lower_key(factor):
    (name,) = set(factor) - {"log_diag"}
    return name


def _explicit_log_ratio(factor, state, eps, target, stop_grad_y):
    """gadMALA's log M-H ratio written out with Gaussian densities, for checking."""
    chol = factor_matrix(factor)
    cov = chol @ chol.T
    x, g_x = state.position, state.logdensity_grad
    y = x + 0.5 * cov @ g_x + chol @ eps
    g_y = jax.grad(target.logdensity)(y)
    if stop_grad_y:
        g_y = jax.lax.stop_gradient(g_y)

    def log_q(a, b, g_b):
        d = jax.scipy.linalg.solve_triangular(chol, a - b - 0.5 * cov @ g_b, lower=True)
        return -0.5 * jnp.sum(d * d)

    return (target.logdensity(y) - state.logdensity + log_q(x, y, g_y) - log_q(y, x, g_x))


@pytest.mark.parametrize(("exact", "name"), [(False, "gadmala"), (True, "gadmala-exact"),
                                             (False, "gadmala-direct")])
def test_mala_objective_value_and_gradient_match_explicit_densities(exact, name):
    """The eps-form of log r equals the Gaussian-density form; the fast gradient equals
    autodiff with grad log pi(y) stopped, the exact one full autodiff."""
    target = _dense_5d()
    kernel = KERNELS[name]
    state = _random_state(kernel, target, jax.random.key(11), scale=0.4)
    key = _lower_key(state.factor)
    eps = jax.random.normal(jax.random.key(12), (target.dim,))
    beta = 0.7

    def explicit(factor):
        log_ratio = _explicit_log_ratio(factor, state, eps, target, stop_grad_y=not exact)
        return jnp.minimum(0.0, log_ratio) + beta * jnp.sum(factor["log_diag"])

    (value, aux), grad = jax.value_and_grad(speed_objective, has_aux=True)(
        state.factor, state, eps, target, beta, _mala_proposal, exact)
    ref_value, ref_grad = jax.value_and_grad(explicit)(state.factor)
    assert float(aux[3]) < 0.0  # the min(0, .) branch with a gradient through log r
    np.testing.assert_allclose(value, ref_value, rtol=1e-10)
    np.testing.assert_allclose(grad["log_diag"], ref_grad["log_diag"], rtol=1e-8, atol=1e-10)
    lower = np.tril(np.ones((5, 5)), -1).astype(bool)
    np.testing.assert_allclose(np.asarray(grad[key])[lower],
                               np.asarray(ref_grad[key])[lower], rtol=1e-8, atol=1e-10)


def test_rwm_objective_gradient_matches_autodiff():
    target = _dense_5d()
    kernel = KERNELS["gadrwm"]
    state = _random_state(kernel, target, jax.random.key(21), scale=1.0)
    key = _lower_key(state.factor)
    eps = jax.random.normal(jax.random.key(22), (target.dim,))

    def explicit(factor):
        y = state.position + factor_matrix(factor) @ eps
        log_ratio = target.logdensity(y) - state.logdensity
        return jnp.minimum(0.0, log_ratio) + 0.5 * jnp.sum(factor["log_diag"])

    grad = jax.grad(lambda f: speed_objective(f, state, eps, target, 0.5, _rwm_proposal)[0])(
        state.factor)
    ref = jax.grad(explicit)(state.factor)
    np.testing.assert_allclose(grad["log_diag"], ref["log_diag"], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.tril(grad[key], -1), np.tril(ref[key], -1),
                               rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", GAD_KERNELS)
def test_one_step_from_exact_draws_with_adaptation_frozen(name):
    """x ~ pi exactly, a random fixed L, adapt = 0: after one step the draws keep pi's mean
    and variance (|z| < 4 over 2 x dim moments), so the frozen kernel is pi-invariant."""
    target = _dense_5d()
    kernel = KERNELS[name]
    seed = GAD_KERNELS.index(name)
    chol = np.linalg.cholesky(target.info["cov"])
    n = 20_000
    z = np.asarray(jax.random.normal(jax.random.key(200 + seed), (n, target.dim)))
    draws = jnp.asarray(target.info["mean"] + z @ chol.T)
    template = _random_state(kernel, target, jax.random.key(300 + seed), scale=0.9)
    params = kernel.Params(adapt=0.0)

    def one(key, x):
        logdensity, grad = target.logdensity_and_grad(x)
        state = template._replace(position=x, logdensity=logdensity, logdensity_grad=grad)
        return kernel.step(key, state, target, params)

    keys = jax.random.split(jax.random.key(400 + seed), n)
    new, info = jax.jit(jax.vmap(one))(keys, draws)
    after = np.asarray(new.position)
    assert 0.1 < float(info.acceptance_rate.mean()) < 0.95  # big enough steps to show bias
    mean, var = target.info["mean"], np.diag(target.info["cov"])
    z_mean = (after.mean(0) - mean) / (after.std(0) / math.sqrt(n))
    sq = (after - mean) ** 2
    z_var = (sq.mean(0) - var) / (sq.std(0) / math.sqrt(n))
    assert np.max(np.abs(np.concatenate([z_mean, z_var]))) < 4.0
    # frozen: the factor does not move
    np.testing.assert_array_equal(np.asarray(new.factor["log_diag"][0]),
                                  np.asarray(template.factor["log_diag"]))


def _adapt(kernel, params, target, num_steps, num_chains, seed):
    states = jax.vmap(lambda x: kernel.init(x, target))(
        jnp.tile(target.initial_position, (num_chains, 1)))

    def one(key, state):
        def body(s, k):
            s, info = kernel.step(k, s, target, params)
            return s, info.accepted

        return jax.lax.scan(body, state, jax.random.split(key, num_steps))

    keys = jax.random.split(jax.random.key(seed), num_chains)
    return jax.jit(jax.vmap(one))(keys, states)


@pytest.mark.parametrize(("name", "seed"), [("gadrwm", 31), ("gadmala", 32)])
def test_learned_covariance_and_acceptance_on_correlated_2d(name, seed):
    """On the 2-d Gaussian with correlation 0.99, L L^T approaches the target covariance up
    to the scale beta sets (relative Frobenius error < 0.2 after the best scalar, see
    `scaled_covariance_error`), and beta brings the acceptance within 0.05 of its target."""
    kernel = KERNELS[name]
    params = kernel.Params(learning_rate=0.005)
    states, accepted = _adapt(kernel, params, TARGET_2D, 10_000, 2, seed)
    for c in range(2):
        factor = jax.tree.map(lambda a, c=c: a[c], states.factor)
        error, scale = scaled_covariance_error(proposal_covariance(factor),
                                               TARGET_2D.info["cov"])
        assert float(error) < 0.2, (c, float(error))
        assert float(scale) > 0
        rate = float(np.mean(accepted[c, 5_000:]))
        assert abs(rate - params.target_acceptance) < 0.05, (c, rate)


@pytest.mark.slow
def test_learned_covariance_on_gp_51d():
    """The 51-d squared-exponential GP Gaussian (condition number ~1.2e3): after 6 x 10^4
    adaptive steps gadMALA with the paper's direct parametrisation has learned the shape
    within 0.2 of the target covariance (the scaled default is slower here, see the module
    docstring)."""
    target = gp_gaussian_51d()
    kernel = KERNELS["gadmala-direct"]
    params = kernel.Params(learning_rate=0.002)
    states, accepted = _adapt(kernel, params, target, 60_000, 1, seed=41)
    factor = jax.tree.map(lambda a: a[0], states.factor)
    error, _ = scaled_covariance_error(proposal_covariance(factor), target.info["cov"])
    assert float(error) < 0.2
    assert abs(float(np.mean(accepted[0, 30_000:])) - params.target_acceptance) < 0.05


def test_frozen_chains_through_run_loop_recover_moments():
    """gadMALA adapts for 8 super-transitions, then `switch_after_warmup` freezes it; the
    kept draws match the 2-d Gaussian's mean and variance in MCSE units."""
    result = run(
        TARGET_2D, KERNELS["gadmala"], GADMALAParams(learning_rate=0.005),
        num_super_transitions=20, gradient_budget=1000, num_chains=4,
        tuner=switch_after_warmup(), num_warmup=8, adapt_until=8, seed=51, progress=False,
    )
    draws = np.asarray(result.idata.posterior["x"].values)
    z_mean, z_var = moment_z_scores(draws, TARGET_2D.info["mean"], np.diag(TARGET_2D.info["cov"]))
    assert np.max(np.abs(np.concatenate([z_mean, z_var]))) < 4.0
    assert result.num_grads == 4 + 4 * 20 * 1000 + 5  # and the checks (starts, fingerprint)
    kept_rate = float(result.idata.sample_stats["accepted"].mean())
    assert abs(kept_rate - 0.55) < 0.05


def test_diminishing_adaptation_keeps_learning_with_decaying_rate():
    kernel = KERNELS["gadmala-diag"]
    params = GADMALAParams(learning_rate=0.01, lr_decay=0.7)
    states, _ = _adapt(kernel, params, TARGET_2D, 400, 1, seed=61)
    assert float(states.decay_clock[0]) == 400.0
    frozen, _ = _adapt(kernel, params._replace(lr_decay=0.0), TARGET_2D, 400, 1, seed=61)
    assert float(frozen.decay_clock[0]) == 0.0
    assert not np.allclose(states.factor["log_diag"], frozen.factor["log_diag"])


def test_exact_variant_costs_two_gradients_while_adapting():
    kernel = KERNELS["gadmala-exact"]
    assert kernel.cost(GADMALAParams()) == 2
    assert kernel.cost(GADMALAParams(adapt=0.0)) == 1
    assert KERNELS["gadmala"].cost(GADMALAParams()) == 1


@pytest.mark.parametrize(
    ("params", "match"),
    [
        (GADRWMParams(step_size=-1.0), "step_size"),
        (GADRWMParams(target_acceptance=1.5), "target_acceptance"),
        (GADMALAParams(adapt=0.5), "adapt"),
        (GADMALAParams(lr_decay=2.0), "lr_decay"),
        (GADMALAParams(learning_rate=0.0), "learning_rate"),
    ],
)
def test_bad_params_raise(params, match):
    with pytest.raises(ValueError, match=match):
        KERNELS["gadmala"].check_params(params)


def test_experiment_table_has_ratio_to_nuts_and_literature_rows():
    from adaptmc_lab.experiments.gradient_adaptive import markdown_table

    row = {"time_s": 2.0, "acceptance": 0.55, "min_ess": 1000.0, "median_ess": 1500.0,
           "max_ess": 2000.0, "min_ess_per_s": 500.0, "min_ess_per_1000_grads": 25.0}
    table = markdown_table("logistic-german", [{**row, "sampler": "gadmala"},
                                               {**row, "sampler": "nuts",
                                                "min_ess_per_s": 250.0}], 20_000)
    assert "| gadmala |" in table and "2.00x" in table and "1.00x" in table
    assert "RMHMC" in table


def test_experiment_samplers_are_manual_recipes_adapting_during_burn_in():
    """Every sampler of the comparison is a plan of the manual recipe: step 0.1, adapting
    inside every step for the burn-in super-transitions, then frozen; the budget makes a
    super-transition exactly ``gcd(burn, keep)`` burn-in iterations."""
    from adaptmc.recipes import Plan
    from adaptmc_lab.experiments.gradient_adaptive import make_plan

    target = correlated_2d(1.0)
    hmc20 = make_plan("hmc-20", target, 2000, 3000)
    assert isinstance(hmc20, Plan) and hmc20.params.num_leapfrog == 20
    assert (hmc20.num_warmup, hmc20.num_super_transitions, hmc20.adapt_until) == (2, 5, 2)
    assert hmc20.gradient_budget == 20 * 1000 and hmc20.params.target_acceptance == 0.65
    exact = make_plan("gadmala-exact", target, 2000, 2000)
    assert exact.gradient_budget == 2 * 2000 and float(exact.params.step_size) == 0.1
    for name in ("gadmala", "gadrwm", "am", "mala-da"):
        plan = make_plan(name, target, 2000, 2000)
        assert plan.tuner.name == "switch-after-warmup" and plan.adapt_until == 1
        assert plan.tuner.best(plan.tuner.init(jax.random.key(0))) == {"adapt": 0.0}
    with pytest.raises(ValueError, match="unknown sampler"):
        make_plan("slice", target, 2000, 2000)


def test_experiment_measure_runs_a_recipe_and_counts_every_gradient():
    """``measure`` on a short gadMALA run: the kept draws are ``num_keep`` iterations of one
    chain, the gradients count burn-in and kept steps, ESS is the robust one (never above
    the bulk-ESS) and finite."""
    from adaptmc_lab.experiments.gradient_adaptive import measure

    jax.config.update("jax_enable_x64", True)
    row = measure(correlated_2d(1.0), "gadmala", 400, 400, 1, seed=0)
    assert 800 <= row["num_grads"] <= 810
    assert 0.2 < row["acceptance"] < 0.9
    assert 0 < row["min_ess"] <= row["median_ess"] <= row["max_ess"] <= 2 * 400
    assert np.isfinite(row["min_ess_per_s"]) and row["min_ess_per_1000_grads"] > 0


def _mala_acceptance(target, position, h, eps):
    """Mean MALA acceptance probability of proposals ``eps`` from ``position``, ``L = h I``."""
    from adaptmc.kernels.gradient_adaptive import GADState

    logdensity, grad = target.logdensity_and_grad(jnp.asarray(position))
    state = GADState(jnp.asarray(position), logdensity, grad, {}, None, None, None)
    factor = {"log_diag": jnp.full(position.shape, math.log(h))}
    log_r = jax.vmap(lambda e: _mala_proposal(factor, state, e, target, False)[3])(eps)
    return float(jnp.mean(jnp.where(jnp.isfinite(log_r), jnp.exp(jnp.minimum(0.0, log_r)),
                                    0.0)))


@pytest.mark.parametrize("sd, start", [(1.0, 0.5), (1e-4, 1.0)])
def test_initial_step_size_brackets_acceptance_one_half(sd, start):
    """Hoffman & Gelman's heuristic: the returned h has mean acceptance above 1/2 and 2h
    below, whether h must grow from 0.1 (a unit Gaussian) or shrink by orders of magnitude
    (sd 1e-4 started 1e4 sds out, where h = 0.1 rejects everything)."""
    from adaptmc.kernels.gradient_adaptive import initial_step_size

    target = gaussian(np.zeros(10), np.full(10, sd**2), name="iso")
    position = np.full(10, start)
    key = jax.random.key(5)
    h = initial_step_size(key, target, position)
    eps = jax.random.normal(key, (10, 10), jnp.float64)
    assert _mala_acceptance(target, position, h, eps) > 0.5
    assert _mala_acceptance(target, position, 2 * h, eps) <= 0.5
    if sd < 1:  # the default 0.1 accepts nothing there; the heuristic shrinks h 100-fold+
        assert _mala_acceptance(target, position, 0.1, eps) == 0.0
        assert h < 1e-3


def test_riemannian_samplers_dual_average_their_step_on_the_logistic_fisher_metric():
    """RMHMC and MSD in the comparison: the logistic set with its Fisher metric attached
    (the same log density as the plain target), the manual recipe in 50-iteration
    super-transitions: RMHMC fixed at ``L = 6``, ``eps L = pi / 2``; MSD with a
    dual-averaging tuner during burn-in, then frozen; anything but a logistic set is refused
    with one message."""
    from adaptmc.targets import get_target
    from adaptmc_lab.experiments import gradient_adaptive as ga

    plain = get_target("logistic-ripley")
    with_metric = ga.metric_target("logistic-ripley")
    q = jnp.linspace(-1.0, 1.0, plain.dim)
    assert float(plain.logdensity(q)) == pytest.approx(float(with_metric.logdensity(q)),
                                                       rel=1e-12)
    assert "metric" in with_metric.info and "metric" not in plain.info
    rmhmc = ga.make_plan("rmhmc", with_metric, 1000, 500)
    assert rmhmc.params.num_leapfrog == 6 and rmhmc.tuner.name == "fixed"
    assert float(rmhmc.params.step_size) * 6 == pytest.approx(math.pi / 2)
    assert (rmhmc.num_warmup, rmhmc.num_super_transitions) == (20, 30)
    assert rmhmc.gradient_budget == 50 * rmhmc.kernel.cost(rmhmc.params)
    msd = ga.make_plan("msd", with_metric, 1000, 500)
    assert msd.tuner.name == "dual-averaging" and msd.adapt_until == 20
    assert msd.gradient_budget == 50 * msd.kernel.cost(msd.params)
    with pytest.raises(ValueError, match="logistic sets only"):
        ga.metric_target("neal-100d")


@pytest.mark.slow
def test_riemannian_logistic_quick_reaches_its_acceptance_targets(tmp_path):
    """``adaptmc-lab reproduce riemannian-logistic --quick``: on Ripley, MSD ends its burn-in
    near its acceptance target (0.9), RMHMC's quarter-period trajectories are mostly
    accepted, and both mix (robust min ESS over 1000 kept iterations at least 200); the
    tables compare each with NUTS."""
    import json

    from adaptmc_lab.experiments.gradient_adaptive import run_riemannian_logistic

    jax.config.update("jax_enable_x64", True)
    assert run_riemannian_logistic(tmp_path / "out", quick=True) == 0
    rows = {r["sampler"]: r for r in
            json.loads((tmp_path / "out" / "results.json").read_text())["results"]
            ["logistic-ripley"]}
    assert rows["rmhmc"]["acceptance"] > 0.8
    assert abs(rows["msd"]["acceptance"] - 0.9) < 0.08
    assert rows["rmhmc"]["min_ess"] >= 200 and rows["msd"]["min_ess"] >= 200
    text = (tmp_path / "out" / "results.md").read_text()
    assert "### rmhmc against NUTS" in text and "### msd against NUTS" in text


def test_riemannian_logistic_caravan_size_is_zero_or_one(tmp_path):
    """``--set caravan=2`` is one clear error before any work."""
    from adaptmc_lab.experiments.gradient_adaptive import run_riemannian_logistic

    with pytest.raises(ValueError, match="caravan=0 or 1"):
        run_riemannian_logistic(tmp_path / "out", sizes={"caravan": "2"})
    assert not (tmp_path / "out").exists()
