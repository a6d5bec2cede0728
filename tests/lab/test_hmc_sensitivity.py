"""`adaptmc-lab reproduce hmc-sensitivity`: the leapfrog path, output-folder handling and the
quick reproduction."""

from __future__ import annotations

import json

import numpy as np
import pytest

from adaptmc_lab.cli import main
from adaptmc_lab.experiments import EXPERIMENTS
from adaptmc_lab.experiments.hmc_sensitivity import (
    MAX_LAG,
    NUM_ITERATIONS,
    fixed_setting_run,
    format_summary,
    leapfrog_path,
    tuner_run,
)

COV_V1 = np.array([[1.0, 0.99], [0.99, 1.0]])
# the box of the full reproduction: eps in [0.01, 0.3], L in [1, 100]
ORACLE_GRID = [(eps, num_leapfrog) for eps in np.linspace(0.01, 0.3, 30)
               for num_leapfrog in (1, 2, 3, 4, 6, 8, 11, 13, 16, 19, 22, 32, 45, 64, 100)]


def test_registered():
    assert "hmc-sensitivity" in EXPERIMENTS


def test_leapfrog_path_is_reversible_and_nearly_conserves_energy():
    cov = np.array([[1.0, 0.99], [0.99, 1.0]])
    prec = np.linalg.inv(cov)
    start, momentum = np.array([1.0, -1.0]), np.array([-1.0, 1.0])
    path = leapfrog_path(cov, start, momentum, 0.15, 50)
    assert path.shape == (51, 2)
    np.testing.assert_allclose(path[0], start)
    # final momentum from the last two positions is not needed: reverse via a second path
    # started at the end with the negated end momentum comes back to the start
    end_momentum = _end_momentum(path, prec, 0.15)
    back = leapfrog_path(cov, path[-1], -end_momentum, 0.15, 50)
    np.testing.assert_allclose(back[-1], start, atol=1e-9)
    energy = lambda x, p: 0.5 * x @ prec @ x + 0.5 * p @ p  # noqa: E731
    assert abs(energy(path[-1], end_momentum) - energy(start, momentum)) < 0.5


def _end_momentum(path, prec, eps):
    # x_L = x_{L-1} + eps p_{L-1/2}, p_L = p_{L-1/2} - eps/2 grad U(x_L)
    half = (path[-1] - path[-2]) / eps
    return half - 0.5 * eps * prec @ path[-1]


def stationary_esjd_per_grad(cov, eps, num_leapfrog, num_draws=20000, seed=0):
    """ESJD per gradient of one HMC transition (unit mass, no jitter) started in
    stationarity: ``E[a(x, p) |x' - x|^2] / L`` over exact draws ``x ~ N(0, cov)``,
    ``p ~ N(0, I)``, with ``a`` the Metropolis acceptance probability: the reward the tuner
    estimates from its chains, without their noise."""
    rng = np.random.default_rng(seed)
    prec = np.linalg.inv(cov)
    x0 = rng.standard_normal((num_draws, 2)) @ np.linalg.cholesky(cov).T
    p0 = rng.standard_normal((num_draws, 2))
    x, p = x0.copy(), p0 - 0.5 * eps * x0 @ prec
    for t in range(num_leapfrog):
        x = x + eps * p
        p = p - (eps if t < num_leapfrog - 1 else 0.5 * eps) * x @ prec

    def energy(x, p):
        return 0.5 * np.einsum("ij,jk,ik->i", x, prec, x) + 0.5 * np.sum(p * p, axis=1)

    accept = np.exp(np.minimum(0.0, energy(x0, p0) - energy(x, p)))
    return float(np.mean(accept * np.sum((x - x0) ** 2, axis=1)) / num_leapfrog)


def test_gp_ucb_pick_is_near_the_grid_oracle_and_its_row_is_complete(tmp_path, monkeypatch):
    """GP-UCB, as the full reproduction runs it on gauss-2d-v1 (60 super-transitions of 1000
    gradients, 4 chains), freezes on a setting whose ESJD per gradient is at least half the
    best of a 30 x 15 grid over the same box (both measured exactly in stationarity; seeds
    0-2 gave 0.72, 0.63, 0.60 of the oracle, whose best is near eps = 0.19, L = 16, at the
    leapfrog's stability edge 2 * 0.1 for the short axis); the tuner's table row has the
    eight promised columns, all finite."""
    monkeypatch.setattr("adaptmc.plots.write_tuning_plots", lambda *args, **kwargs: None)
    row = tuner_run(1.0, "gp-ucb", False, 0, tmp_path / "run")
    oracle = max(stationary_esjd_per_grad(COV_V1, eps, n, num_draws=4000)
                 for eps, n in ORACLE_GRID)
    best = row["best"]
    tuned = stationary_esjd_per_grad(COV_V1, best["step_size"], int(best["num_leapfrog"]),
                                     num_draws=4000)
    assert tuned >= 0.5 * oracle, (best, tuned / oracle)
    # super-transitions past the stability edge diverge and have no reward (counted)
    assert row["failed"] < row["super_transitions"] and np.isfinite(row["mean_reward"])
    table = format_summary({"num_iterations": 0, "seed": 0, "quick": False, "settings": [],
                            "tuners": [row]})
    cells = table.strip().splitlines()[-1].strip("|").split("|")
    assert len(cells) == 8 and cells[1].strip() == "gp-ucb"
    assert all(np.isfinite(float(c.split("/")[0])) for c in cells[2:])


@pytest.mark.slow  # 7 s
def test_the_settings_swap_places_between_the_two_gaussians():
    """Wang (2012, Sec. 2.2): a small change of (eps, L) changes HMC's efficiency by an order of
    magnitude, and which setting is good depends on the target. At the thesis' 1000
    iterations, (0.16, 40) mixes well on [[1, .99], [.99, 1]] and (0.16, 50) badly; on
    [[2, .99], [.99, 2]] (correlation 0.495) it is the other way round (seeds 0-2: min ESS
    404-519 against 61-72 on v1, 7-62 against 670-975 on v2; a factor 3 is asked). The
    autocorrelations reach lag 100 as in the thesis' figures."""
    ess = {(v, steps): fixed_setting_run(v, 0.16, steps, NUM_ITERATIONS, seed=3)
           for v in (1.0, 2.0) for steps in (40, 50)}
    assert NUM_ITERATIONS == 1000 and MAX_LAG == 100
    assert ess[(1.0, 40)]["acf"].shape == (2, MAX_LAG + 1)
    assert ess[(1.0, 40)]["min_ess"] > 3 * ess[(1.0, 50)]["min_ess"], ess
    assert ess[(2.0, 50)]["min_ess"] > 3 * ess[(2.0, 40)]["min_ess"], ess


def test_refuses_a_non_empty_output_folder(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("x")
    assert main(["reproduce", "hmc-sensitivity", "--quick", "--out", str(tmp_path)]) == 2
    assert "already exists" in capsys.readouterr().err


@pytest.mark.slow
def test_quick_reproduction_writes_figures_and_summary(tmp_path):
    out = tmp_path / "hs"
    assert main(["reproduce", "hmc-sensitivity", "--quick", "--out", str(out)]) == 0
    for name in ("fig2_1_gauss-2d-v1.png", "fig2_2_gauss-2d-v1_acf.png",
                 "fig2_3_gauss-2d-v2.png", "fig2_4_gauss-2d-v2_acf.png", "summary.md"):
        assert (out / name).is_file()
    # the fixed settings run the thesis' 1000 iterations in quick mode too
    assert summary_iterations(out) == NUM_ITERATIONS
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["settings"]) == 6 and len(summary["tuners"]) == 12
    for row in summary["settings"]:
        assert all(np.isfinite(row[k]) for k in ("acceptance_rate", "esjd", "min_ess",
                                                 "autocorrelation_score", "h_window",
                                                 "trajectory_end_distance"))
    # the markdown: a row per setting (nine columns) and per tuner (eight), all finite
    rows = [line for line in (out / "summary.md").read_text().splitlines()
            if line.startswith("| gauss-2d")]
    assert len(rows) == 6 + 12
    for k, line in enumerate(rows):
        cells = line.strip("|").split("|")
        assert len(cells) == (9 if k < 6 else 8)
        assert all(np.isfinite(float(c.split("/")[0])) for c in cells[2:]), line
    for row in summary["tuners"]:
        if row["tuner"] != "dual-averaging":
            assert 0.01 <= row["best"]["step_size"] <= 0.3
            assert 5 <= row["best"]["num_leapfrog"] <= 8


def summary_iterations(out) -> int:
    return json.loads((out / "summary.json").read_text())["num_iterations"]
