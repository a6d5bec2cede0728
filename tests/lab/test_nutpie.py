"""nutpie as the outside reference (`adaptmc_lab.baselines.nutpie`): the PyMC twin of a target
has the target's log density up to a constant (PyMC only), and nutpie's draws from it have
the target's moments with its gradients counted (skipped without the ``nutpie`` extra)."""

from __future__ import annotations

import numpy as np
import pytest

from adaptmc.targets import gaussian, get_target
from adaptmc_lab.baselines.nutpie import pymc_twin


def _twin_matches(target, points):
    pytest.importorskip("pymc")
    from adaptmc.targets import from_pymc

    twin = from_pymc(pymc_twin(target))  # PyMC's JAX log density (no C compilation)
    assert twin.parameter_names == tuple(f"x[{i}]" for i in range(target.dim))
    theirs = np.array([float(twin.logdensity(p)) for p in points])
    ours = np.array([float(target.logdensity(p)) for p in points])
    # equal up to one constant: every difference the same
    np.testing.assert_allclose(theirs - theirs[0], ours - ours[0], rtol=1e-9, atol=1e-8)


@pytest.mark.parametrize("make", [
    lambda: get_target("neal-100d"),
    lambda: gaussian(np.array([1.0, -2.0]), np.array([[1.0, 0.9], [0.9, 2.0]]), name="c2"),
    lambda: get_target("logistic-heart"),
], ids=["neal-100d", "correlated-2d", "logistic-heart"])
def test_the_pymc_twin_has_the_targets_log_density(make):
    target = make()
    rng = np.random.default_rng(0)
    start = np.asarray(target.initial_position, float)
    _twin_matches(target, [start + 0.3 * rng.normal(size=target.dim) for _ in range(4)])


def test_a_target_without_a_twin_is_refused():
    pytest.importorskip("pymc")
    with pytest.raises(ValueError, match="has none here"):
        pymc_twin(get_target("funnel-10d"))


def test_nutpie_draws_have_the_moments_and_their_gradients_are_counted():
    pytest.importorskip("nutpie")
    from adaptmc import diagnostics
    from adaptmc_lab.baselines.nutpie import nutpie_nuts

    target = gaussian(np.array([1.0, -2.0]), np.array([1.0, 0.25]), name="g2")
    result = nutpie_nuts(target, 3, num_chains=4, num_warmup=200, num_draws=500)
    draws = result.positions
    assert draws.shape == (4, 500, 2)
    ess = diagnostics.ess(draws)
    z = (draws.mean(axis=(0, 1)) - [1.0, -2.0]) / (np.array([1.0, 0.5]) / np.sqrt(ess))
    assert np.all(np.abs(z) < 4), z
    assert np.all(result.num_grads >= 1) and np.all(result.warmup_grads > 200)
    assert result.compile_s > 0 and result.wall_s > 0


@pytest.mark.parametrize("low_rank", [False, True], ids=["diag", "low-rank"])
def test_nutpie_on_a_targets_own_log_density_counts_every_gradient(low_rank):
    pytest.importorskip("nutpie")
    from adaptmc import diagnostics
    from adaptmc_lab.baselines.nutpie import nutpie_pyfunc

    mean, cov = np.array([1.0, -2.0]), np.array([[1.0, 0.45], [0.45, 0.25]])
    target = gaussian(mean, cov, name="c2")  # no PyMC twin needed
    starts = mean + np.array([[3.0, 0.0], [0.0, 3.0], [-3.0, 0.0], [0.0, -3.0]])
    run = nutpie_pyfunc(target, 5, num_chains=4, num_warmup=200, num_draws=400,
                        initial_positions=starts, low_rank=low_rank)
    assert run.positions.shape == (4, 400, 2)
    assert set(run.idata.posterior.data_vars) == {"x"}
    ess = diagnostics.ess(run.positions)
    z = (run.positions.mean(axis=(0, 1)) - mean) / (np.sqrt(np.diag(cov)) / np.sqrt(ess))
    assert np.all(np.abs(z) < 4), z
    # every leapfrog step is one call of the log density, and each chain's start one more
    steps = int(run.idata.sample_stats["n_steps"].values.sum())
    warm_steps = int(run.idata.warmup_sample_stats["n_steps"].values.sum())
    assert run.num_grads >= steps + warm_steps + 4
    assert run.warmup_grads == run.num_grads - steps
    assert run.wall_s > 0


def test_nutpie_refuses_starts_of_the_wrong_shape():
    pytest.importorskip("nutpie")
    from adaptmc_lab.baselines.nutpie import nutpie_pyfunc

    with pytest.raises(ValueError, match="initial_positions"):
        nutpie_pyfunc(gaussian(np.zeros(2), 1.0), 0, initial_positions=np.zeros((4, 3)))


def test_a_start_nutpie_refuses_is_a_clear_error_not_an_index_error():
    """nutpie asks for another start where a given one's log density is -inf; the adapter
    has one per chain and says which it refused (it raised IndexError: kronecker_gp)."""
    import jax.numpy as jnp

    pytest.importorskip("nutpie")
    from adaptmc.targets.base import make_target
    from adaptmc_lab.baselines.nutpie import nutpie_pyfunc

    target = make_target(lambda x: jnp.where(x[0] > 1.0, -jnp.inf, -0.5 * jnp.sum(x**2)),
                         jnp.zeros(2), check=False)
    starts = np.array([[0.5, 0.3], [1.5, 0.2], [-0.4, 0.1], [0.2, -0.7]])
    with pytest.raises(ValueError, match=r"nutpie refused a start .*; chain 1: log density "
                                         r"-inf$"):
        nutpie_pyfunc(target, 0, num_chains=4, num_warmup=50, num_draws=50,
                      initial_positions=starts)


@pytest.mark.parametrize("row", ["nutpie-diag", "nutpie-low-rank"])
def test_the_bench_rows_run_nutpie_on_any_target_and_count_its_gradients(row):
    """The bench's nutpie rows on a target without a PyMC twin (a posteriordb translation):
    draws of the asked shape, warm-up and sampling gradients both counted."""
    import dataclasses

    pytest.importorskip("nutpie")

    from adaptmc_lab.bench.config import BenchConfig
    from adaptmc_lab.bench.samplers import SAMPLERS

    config = dataclasses.replace(BenchConfig(), num_samples=100, num_warmup=100, num_chains=2)
    target = get_target("pdb-kidiq-kidscore_momiq")
    out = SAMPLERS[row](target, 0, config)
    assert out.positions.shape == (2, 100, target.dim)
    assert out.warmup_grads > 2 * 100 and out.sampling_grads >= 2 * 100
