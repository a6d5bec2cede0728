"""`adaptmc reproduce hmc-sensitivity`: the leapfrog path, output-folder handling and the
quick reproduction."""

from __future__ import annotations

import json

import numpy as np
import pytest

from adaptmc.cli import main
from adaptmc.experiments import EXPERIMENTS
from adaptmc.experiments.hmc_sensitivity import leapfrog_path


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


def test_refuses_a_non_empty_output_folder(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("x")
    assert main(["reproduce", "hmc-sensitivity", "--quick", "--out", str(tmp_path)]) == 2
    assert "already exists" in capsys.readouterr().err


@pytest.mark.slow
def test_quick_reproduction_writes_figures_and_summary(tmp_path):
    out = tmp_path / "hs"
    assert main(["reproduce", "hmc-sensitivity", "--quick", "--out", str(out)]) == 0
    for name in ("trajectories.png", "traces.png", "autocorrelations.png", "summary.md"):
        assert (out / name).is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["settings"]) == 6 and len(summary["tuners"]) == 12
    for row in summary["tuners"]:
        if row["tuner"] != "dual-averaging":
            assert 0.01 <= row["best"]["step_size"] <= 0.3
            assert 5 <= row["best"]["num_leapfrog"] <= 8
