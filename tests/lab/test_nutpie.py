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
