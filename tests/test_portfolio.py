"""The adaptive-portfolio recipe: an equal-cost trial of adaptive HMC and gadMALA after one
NUTS warm-up, the sampling budget to the winner."""

import json

import jax
import numpy as np
import pytest

import adaptmc
from adaptmc.targets import gaussian, get_target

jax.config.update("jax_enable_x64", True)

FAST = {"warmup_steps": 150, "tuning": 4, "draws": 200}


def _portfolio(idata) -> dict:
    return json.loads(idata.attrs["portfolio"])


# measured apart (adaptive-hmc vs gradient-adaptive, seeds 0 and 1, robust min ESS per 1000
# sampling gradients): iid 10-d Gaussian gadMALA 253 and 254 vs HMC 82 and 130; banana
# HMC 3.9 and 1.2 vs gadMALA 0.17 and 0.34
@pytest.mark.parametrize("name, winner, seed", [
    # 15-17 s each: the slow tier; the fast tier runs the whole recipe in the next test
    pytest.param("iid-10d", "gadmala", 0, marks=pytest.mark.slow),
    pytest.param("banana", "hmc", 0, marks=pytest.mark.slow),
])
def test_the_portfolio_picks_the_kernel_that_wins_apart(name, winner, seed):
    """gadMALA on an iid Gaussian in 10-d, where it mixes about twice as fast per gradient
    as tuned HMC; HMC on the banana, whose curved ridge gadMALA's local moves crawl along."""
    target = gaussian(np.zeros(10), np.ones(10), name="iid-10d") if name == "iid-10d" \
        else get_target(name)
    idata = adaptmc.sample(target, recipe="adaptive-portfolio", chains=4, seed=seed,
                           progress=False, **FAST)
    record = _portfolio(idata)
    assert record["winner"] == winner, record
    assert idata.attrs["kernel"] == winner
    assert idata.attrs["recipe"] == "adaptive-portfolio"


def test_gradients_are_the_sum_of_the_phases_and_the_draws_are_right():
    """Warm-up, both trials and sampling add up to the run's total; the trials cost at most
    the same budget; the means of a Gaussian (shifted, scales 0.3 to 3) lie within 4 MCSE."""
    from adaptmc.diagnostics import summary_in_blocks

    mean, sd = np.linspace(-2.0, 2.0, 8), np.linspace(0.3, 3.0, 8)
    target = gaussian(mean, sd**2, name="g8")
    idata = adaptmc.sample(target, recipe="adaptive-portfolio", chains=4, seed=7,
                           progress=False, **FAST)
    warm = json.loads(idata.attrs["warmup"])
    record = _portfolio(idata)
    trials = [t["num_grads"] for t in record["trials"].values()]
    sampling = int(np.sum(idata.tuning["num_grads"].values))
    assert idata.attrs["total_grad_evals"] == (warm["warmup_num_grads"] + sum(trials) + sampling
                                               + idata.attrs["check_grads"])
    assert warm["num_grads"] == warm["warmup_num_grads"] + sum(trials)
    # chains x budget, + starts, + a trial run's checks (each start, the fingerprint's point)
    cap = 4 * warm["gradient_budget"] * (FAST["tuning"] + 4) + 4 + 5
    assert all(0.5 * cap < t <= cap for t in trials), (trials, cap)
    assert int(idata.sample_stats["n_grad_evals"].values.sum()) == sampling
    table = summary_in_blocks(idata)
    z = (table["mean"].to_numpy() - mean) / table["mcse_mean"].to_numpy()
    assert np.all(np.abs(z) < 4), (record["winner"], z)
    np.testing.assert_allclose(table["sd"].to_numpy(), sd, rtol=0.15)
    # the summary says which kernel won, with both trials' scores
    from adaptmc.diagnostics import format_summary

    line = [x for x in format_summary(idata).splitlines() if x.startswith("portfolio:")]
    assert line and f"{record['winner']} won" in line[0] and "hmc" in line[0] \
        and "gadmala" in line[0]


@pytest.mark.slow  # the mechanism (recipe_options): tests/test_bench.py's recipe-row test
def test_the_bench_row_makes_the_draws_of_the_command_line(tmp_path):
    """The bench's adaptmc-adaptive-portfolio row and `adaptmc sample --recipe
    adaptive-portfolio` with the same options and seed make identical draws (same warm-up,
    same trials, same winner)."""
    from types import SimpleNamespace

    import arviz as az

    from adaptmc.cli import main
    from adaptmc_lab import bench
    from adaptmc_lab.bench.quantities import run_positions
    from adaptmc_lab.bench.samplers import SAMPLERS, recipe_options

    config = bench.BenchConfig(num_chains=2, num_warmup=150, num_samples=80)
    name = "pdb-eight_schools-eight_schools_noncentered"
    output = SAMPLERS["adaptmc-adaptive-portfolio"](get_target(name), 11, config)
    options = recipe_options("adaptive-portfolio", config)
    out = tmp_path / "cli"
    code = main(["sample", "--target", name, "--recipe", "adaptive-portfolio", "--seed", "11",
                 "--chains", "2", "--warmup-steps", str(options["warmup_steps"]), "--draws",
                 str(options["draws"]), "--out", str(out), "--no-progress"])
    assert code == 0
    idata = az.from_netcdf(out / "draws.nc")
    assert "portfolio" in idata.attrs
    won = json.loads(idata.attrs["portfolio"])["winner"] == "gadmala"
    assert output.params["gadmala_won"] == float(won)
    # the posterior holds theta, mu, tau; the bench reads them back as positions
    cli = run_positions(SimpleNamespace(idata=idata), get_target(name))
    np.testing.assert_array_equal(cli, output.positions)


def test_gadmala_starts_from_the_warmup_metric_low_rank_included():
    """gadMALA's starting factor is ``eps C`` with ``C C^T`` the warm-up's inverse metric,
    for a diagonal, a dense and a low-rank-plus-diagonal one (made dense)."""
    from adaptmc.adaptation.low_rank import LowRankInverseMass, low_rank_dense
    from adaptmc.recipes.portfolio import gadmala_states

    target = gaussian(np.zeros(4), np.ones(4), name="g4")
    positions = np.zeros((2, 4))
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(4, 2)))
    low_rank = LowRankInverseMass(np.array([1.0, 2.0, 0.5, 3.0]), q, np.array([9.0, 0.1]))
    dense = low_rank_dense(low_rank)
    for metric, cov in ((np.array([1.0, 4.0, 0.25, 2.0]), np.diag([1.0, 4.0, 0.25, 2.0])),
                        (dense, dense), (low_rank, dense)):
        states = gadmala_states(target, positions, 0.3, metric)
        scale = np.exp(np.asarray(states.factor["log_diag"][1]))
        factor = (np.eye(4) + np.asarray(states.factor["unit_lower"][1])) * scale[None, :]
        np.testing.assert_allclose(factor @ factor.T, 0.09 * cov, rtol=1e-10, atol=1e-12)
