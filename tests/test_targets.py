"""Targets: flattening, names, built-ins, logistic data, user targets."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.targets import (
    BUILTIN_TARGETS,
    get_target,
    logistic_dataset,
    make_target,
    neal_100d,
)
from adaptmc.targets.base import compiled_logdensity_and_grad


def test_pytree_target_flattens_and_names():
    def logdensity(p):
        return -0.5 * (p["mu"] ** 2 + jnp.sum(p["beta"] ** 2))

    target = make_target(logdensity, {"beta": jnp.zeros((2, 2)), "mu": jnp.asarray(1.0)})
    assert target.dim == 5
    assert target.parameter_names == ("beta[0,0]", "beta[0,1]", "beta[1,0]", "beta[1,1]", "mu")
    value, grad = target.logdensity_and_grad(jnp.arange(5.0))
    assert float(value) == pytest.approx(-0.5 * np.sum(np.arange(5.0) ** 2))
    np.testing.assert_allclose(grad, -np.arange(5.0))
    assert set(target.unravel(jnp.arange(5.0))) == {"beta", "mu"}


def test_neal_100d_standard_deviations():
    target = neal_100d()
    np.testing.assert_allclose(np.sqrt(np.diag(target.info["cov"])), np.linspace(0.01, 1, 100))


@pytest.mark.parametrize("name", sorted(BUILTIN_TARGETS))
def test_builtin_targets_are_finite_at_their_start(name):
    target = get_target(name)
    # the compiled program `get_target` made for its start check, not the model op by op
    # (which compiles each primitive on its own: seconds on the posteriordb and BNN models)
    value, grad = compiled_logdensity_and_grad(target)(target.initial_position)
    assert np.isfinite(value) and np.all(np.isfinite(grad))


def test_logistic_data_is_standardised_with_intercept():
    target = logistic_dataset("german")
    assert target.dim == 25 and target.info["n"] == 1000
    from adaptmc.datasets.logistic import load_logistic

    data = load_logistic("heart")
    np.testing.assert_allclose(data.features[:, 0], 1.0)
    np.testing.assert_allclose(data.features[:, 1:].mean(0), 0.0, atol=1e-12)
    assert set(np.unique(data.labels)) == {0.0, 1.0}


def test_logistic_gradient_matches_finite_differences():
    target = logistic_dataset("ripley")
    x = jnp.array([0.1, -0.3, 0.7])
    _, grad = target.logdensity_and_grad(x)
    eps = 1e-6
    fd = [(target.logdensity(x.at[i].add(eps)) - target.logdensity(x.at[i].add(-eps))) / (2 * eps)
          for i in range(3)]
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


def test_missing_data_file_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("ADAPTMC_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="ADAPTMC_DATA"):
        logistic_dataset("german")
    with pytest.raises(ValueError, match="unknown logistic data set"):
        logistic_dataset("nope")


def test_unknown_target_lists_builtins():
    with pytest.raises(ValueError, match="unknown target 'nope'; built-ins: .*neal-100d"):
        get_target("nope")
    with pytest.raises(ValueError, match="cannot import module"):
        get_target("no_such_module_xyz:f")


def test_user_target_from_module(tmp_path, monkeypatch):
    (tmp_path / "my_model.py").write_text(
        "import jax.numpy as jnp\n"
        "def target():\n"
        "    return (lambda p: -0.5 * jnp.sum(p['w'] ** 2), {'w': jnp.ones(3)})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    target = get_target("my_model:target")
    assert target.dim == 3 and target.name == "target"
    jax.clear_caches()


def test_make_target_constrain_takes_the_params_pytree():
    """``constrain`` is written over the same pytree as the log density; the Target keeps it
    as a function of the flat position."""
    import jax.numpy as jnp

    from adaptmc.targets import make_target

    target = make_target(lambda p: -0.5 * jnp.sum(p["mu"] ** 2) - 0.5 * p["log_s"] ** 2,
                         {"mu": jnp.zeros(2), "log_s": jnp.asarray(0.0)},
                         constrain=lambda p: {"mu": p["mu"], "s": jnp.exp(p["log_s"])})
    out = target.constrain(jnp.asarray([0.0, 1.0, 2.0]))  # flat: log_s, mu (sorted keys)
    assert float(out["s"]) == 1.0 and out["mu"].tolist() == [1.0, 2.0]
