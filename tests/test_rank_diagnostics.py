"""The vectorised rank diagnostics equal ArviZ's, column by column, on draws that reach the
estimators' edge cases: ties, constants, sparse indicators, NaN, odd and few draws, one
chain, chains that disagree, antithetic chains."""

import time
import warnings

import numpy as np
import pytest

from adaptmc import diagnostics, rank_diagnostics
from adaptmc.arviz_quiet import az, numpy_only


def _draws(chains: int, draws: int, seed: int) -> np.ndarray:
    """``(chains, draws, 8)``: AR(1) columns from antithetic to sticky, rounded (ties), a
    constant, a sparse 0/1 indicator, shifted chains, and a NaN."""
    rng = np.random.default_rng(seed)
    phis = np.array([0.0, 0.9, -0.7, 0.99, 0.5, -0.95, 0.3, 0.0])
    noise = rng.normal(size=(chains, draws, phis.size))
    x = np.zeros_like(noise)
    for t in range(draws):
        x[:, t] = (phis * x[:, t - 1] if t else 0.0) + noise[:, t]
    x[..., 4] = np.round(x[..., 4])
    x[..., 5] = np.where(rng.random((chains, draws)) < 0.03, 1.0, 0.0)
    x[..., 6] += 2.0 * np.arange(chains)[:, None]
    x[..., 7] = 3.0
    if seed % 2:
        x[0, draws // 2, 0] = np.nan
    return x


SHAPES = [(chains, draws) for chains in (1, 2, 4) for draws in (4, 5, 9, 10, 37, 74, 101, 400)]


@pytest.mark.parametrize("chains,draws", SHAPES)
@pytest.mark.parametrize("seed", [0, 1])
def test_the_rank_diagnostics_equal_arviz_column_by_column(chains, draws, seed):
    x = _draws(chains, draws, seed)
    theirs = {"bulk": lambda c: az.ess(c, method="bulk"),
              "tail": lambda c: az.ess(c, method="tail"), "rhat": az.rhat}
    ours = {"bulk": rank_diagnostics.ess_bulk, "tail": rank_diagnostics.ess_tail,
            "rhat": rank_diagnostics.rhat}
    with warnings.catch_warnings(), numpy_only():
        warnings.simplefilter("ignore")
        for name, estimate in ours.items():
            expected = [float(theirs[name](x[..., i])) for i in range(x.shape[-1])]
            np.testing.assert_allclose(estimate(x), expected, rtol=1e-9, atol=0,
                                       err_msg=name)


def test_the_rank_diagnostics_need_four_draws_and_r_hat_two_chains():
    x = np.random.default_rng(0).normal(size=(4, 3, 2))
    assert np.isnan(rank_diagnostics.ess_bulk(x)).all()
    assert np.isnan(rank_diagnostics.ess_tail(x)).all()
    assert np.isnan(rank_diagnostics.rhat(np.ones((1, 50, 2)))).all()
    assert (diagnostics.ess(x) == 0).all()  # adaptmc's convention: too few draws, no ESS


def test_the_rank_diagnostics_are_much_faster_than_arviz_on_many_quantities():
    """The reason the module exists: a run's summary of thousands of transformed
    quantities (a Stan program's generated quantities) took seconds per thousand through
    ArviZ, one quantity at a time."""
    x = np.random.default_rng(1).normal(size=(4, 200, 500))
    start = time.perf_counter()
    with warnings.catch_warnings(), numpy_only():
        warnings.simplefilter("ignore")
        [az.ess(x[..., i]) for i in range(x.shape[-1])]
    arviz_s = time.perf_counter() - start
    ours_s = float("inf")
    for _ in range(3):  # the best of three: a busy machine's stall is not the code's
        start = time.perf_counter()
        rank_diagnostics.ess_bulk(x)
        ours_s = min(ours_s, time.perf_counter() - start)
    assert ours_s < arviz_s / 5, (ours_s, arviz_s)


@pytest.mark.parametrize("chains,draws", [(1, 9), (2, 37), (4, 101), (4, 3)])
@pytest.mark.parametrize("workers", [1, 2])
def test_the_summary_in_one_pass_equals_the_estimators_one_by_one(chains, draws, workers):
    """`summary` shares the rank normalisation, skips constant columns and splits the
    columns among threads: none of it changes a number."""
    x = np.concatenate([_draws(chains, draws, seed) for seed in (0, 1)] * 10, axis=-1)
    found = rank_diagnostics.summary(x, workers=workers)
    expected = {"bulk": rank_diagnostics.ess_bulk(x), "tail": rank_diagnostics.ess_tail(x),
                "bulk_sq": rank_diagnostics.ess_bulk(x**2), "rhat": rank_diagnostics.rhat(x)}
    assert found.keys() == expected.keys()
    for name, value in expected.items():
        np.testing.assert_array_equal(found[name], value, err_msg=name)
    without = rank_diagnostics.summary(x, workers=workers, with_rhat=False)  # robust ESS's
    assert np.isnan(without["rhat"]).all()
    for name in ("bulk", "tail", "bulk_sq"):
        np.testing.assert_array_equal(without[name], expected[name], err_msg=name)


@pytest.mark.parametrize("chains,draws", [(1, 9), (2, 37), (4, 400)])
def test_the_autocorrelation_is_arviz_s_averaged_over_chains(chains, draws):
    """`diagnostics.autocorrelation` (`rank_diagnostics.autocov`, ArviZ not imported) equals
    ArviZ's ``autocorr`` averaged over chains, a constant chain counted fully correlated."""
    for column in (0, 3, 7):  # white noise, a sticky AR(1), a constant
        x = _draws(chains, draws, seed=0)[..., column]
        with numpy_only(), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            theirs = np.nan_to_num(np.mean([az.autocorr(c) for c in x], axis=0), nan=1.0)
        np.testing.assert_allclose(diagnostics.autocorrelation(x), theirs, rtol=1e-12,
                                   atol=1e-15)
        np.testing.assert_array_equal(diagnostics.autocorrelation(x, 3),
                                      diagnostics.autocorrelation(x)[:4])
