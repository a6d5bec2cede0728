"""``draws`` means kept draws per chain, exactly, for every recipe: the super-transitions
follow from it (the last one cut short), and a request no recipe can honour is refused
before any warm-up."""

import jax
import numpy as np
import pytest

from adaptmc import recipes
from adaptmc.api import run_plan
from adaptmc.cli import main
from adaptmc.datasets.posteriordb import default_posteriordb_dir
from adaptmc.targets import get_target

jax.config.update("jax_enable_x64", True)

OPTIONS = {
    "manual": {"warmup": 3, "budget": 200},
    "hmc-da": {"warmup": 3, "budget": 200},
    "gradient-adaptive": {"warmup": 3, "budget": 200, "kernel": "gadmala-diag"},
    "bandit-hmc": {"warmup": 5, "mass_warmup": 3, "adapt_until": 5, "budget": 200},
    "hmc-grid": {"warmup": 3, "budget": 200},
    "adaptive-hmc": {"warmup_steps": 150, "tuning": 3},
    "adaptive-portfolio": {"warmup_steps": 150, "tuning": 3, "audition": 2},
}


@pytest.mark.parametrize("name", [  # the portfolio: 15-17 s, its own test_portfolio is fast
    pytest.param(n, marks=pytest.mark.slow) if n == "adaptive-portfolio" else n
    for n in sorted(recipes.RECIPES)])
def test_every_recipe_keeps_exactly_the_draws_asked_for(name):
    """37 is no multiple of any setting's draws per super-transition: the last one is cut
    short; 250 spans several; the tuning record's kept draws add up to the same."""
    assert set(OPTIONS) == set(recipes.RECIPES)
    target = get_target("gauss-2d-v1")
    for draws in (37, 250):
        plan = recipes.build(name, target, draws=draws, **OPTIONS[name])
        idata = run_plan(target, plan, chains=2, seed=0, progress=False).idata
        assert idata.posterior.sizes["draw"] == draws
        assert idata.sample_stats.sizes["draw"] == draws
        tuning = idata.tuning
        kept = np.asarray(tuning["num_draws"].values)[~np.asarray(tuning["warmup"].values,
                                                                   dtype=bool)]
        assert int(kept.sum()) == draws and np.all(kept[:-1] >= kept[-1])
        assert idata.attrs["num_super_transitions"] == len(tuning["reward"])
        assert np.all(np.isfinite(idata.posterior["x"].values))


def test_the_python_api_keeps_the_draws_asked_for():
    import adaptmc

    idata = adaptmc.sample("gauss-2d-v1", recipe="hmc-da", chains=2, draws=77, warmup=3,
                           budget=200, progress=False)
    assert idata.posterior.sizes["draw"] == 77


def test_a_tuner_still_adapting_keeps_the_draws_too():
    """A bandit that never freezes changes L (and so draws per super-transition) in every
    sampling super-transition; the run still stops at the draws asked for."""
    target = get_target("gauss-2d-v1")
    plan = recipes.manual(target, kernel="hmc", tuner="gp-ucb", warmup=2, budget=200,
                          draws=123, box={"step_size": (0.05, 1.0), "num_leapfrog": (1, 20)})
    idata = run_plan(target, plan, chains=2, seed=1, progress=False).idata
    assert idata.posterior.sizes["draw"] == 123
    assert len(set(np.asarray(idata.tuning["num_leapfrog"].values).tolist())) > 1


def test_many_draws_of_the_default_recipe_are_kept_not_refused():
    """Far more draws than a super-transition makes (the old sizing thinned and then
    refused a box corner after the warm-up)."""
    target = get_target("gauss-2d-v1")
    plan = recipes.adaptive_hmc(target, warmup_steps=150, tuning=3, draws=20_000)
    result = run_plan(target, plan, chains=2, seed=0, progress=False)
    assert result.idata.posterior.sizes["draw"] == 20_000
    assert result.idata.attrs["thin"] == 1


def test_draws_resume_to_the_same_draws(tmp_path):
    """A run sized by draws, killed and resumed, keeps the same draws as an uninterrupted
    one (the draws still to keep are read from the checkpointed record)."""
    from adaptmc.run import run

    target = get_target("gauss-2d-v1")
    plan = recipes.manual(target, kernel="hmc", num_leapfrog=7, warmup=2, budget=100, draws=45)
    kwargs = dict(num_super_transitions=plan.num_super_transitions,
                  gradient_budget=plan.gradient_budget, num_chains=2,
                  num_warmup=plan.num_warmup, num_draws=plan.draws, progress=False)
    whole = run(target, plan.kernel, plan.params, **kwargs).idata
    run(target, plan.kernel, plan.params, output_dir=tmp_path / "r", checkpoint_every=1,
        stop_after=4, **kwargs)
    resumed = run(target, plan.kernel, plan.params, output_dir=tmp_path / "r",
                  checkpoint_every=1, resume=True, **kwargs).idata
    np.testing.assert_array_equal(whole.posterior["x"].values, resumed.posterior["x"].values)
    assert resumed.posterior.sizes["draw"] == 45


@pytest.mark.parametrize("name, options, message", [
    ("manual", {"draws": 100, "super_transitions": 10}, "not both"),
    ("hmc-da", {"draws": 0}, "draws must be an integer"),
    ("adaptive-hmc", {"draws": 0}, "draws must be an integer"),
    ("adaptive-portfolio", {"draws": 2.5}, "draws must be an integer"),
])
def test_requests_that_cannot_be_honoured_are_refused_before_the_warmup(name, options,
                                                                        message):
    with pytest.raises(ValueError, match=message):
        recipes.build(name, get_target("gauss-2d-v1"), **options)


@pytest.mark.skipif(not (default_posteriordb_dir()
                         / "eight_schools-eight_schools_noncentered").is_dir(),
                    reason="posteriordb data not found (../shared/posteriordb or "
                           "$ADAPTMC_POSTERIORDB)")
@pytest.mark.slow  # 11 s
def test_a_posteriordb_target_from_the_command_line_keeps_500_draws(tmp_path, capsys):
    import arviz as az

    out = tmp_path / "run"
    code = main(["sample", "--target", "pdb-eight_schools-eight_schools_noncentered",
                 "--draws", "500", "--warmup-steps", "150", "--tuning", "4", "--chains", "2",
                 "--out", str(out), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    assert az.from_netcdf(out / "draws.nc").posterior.sizes["draw"] == 500
