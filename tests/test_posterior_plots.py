"""The posterior's figures (trace, rank, energy, pair) written by ArviZ, bounded in the
parameters shown; and the command line's run folder: plots written, a warning printed once
where the draws may be wrong and never where they are right."""

import time
import warnings

import numpy as np
import pytest

from adaptmc import posterior_plots
from adaptmc.cli import main

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import arviz as az

PNG = b"\x89PNG\r\n\x1a\n"


def _idata(rng, dim=6, chains=4, draws=400, correlated=True):
    x = rng.normal(size=(chains, draws, dim))
    if correlated:
        x[..., 1] = 0.95 * x[..., 0] + np.sqrt(1 - 0.95**2) * x[..., 1]
    for t in range(1, draws):  # parameter 3 mixes slowly: an AR(1) chain, rho 0.97
        x[:, t, 3] = 0.97 * x[:, t - 1, 3] + np.sqrt(1 - 0.97**2) * x[:, t, 3]
    energy = rng.normal(size=(chains, draws))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return az.from_dict(posterior={"a": x[..., :2], "b": x[..., 2:]},
                            sample_stats={"energy": energy})


def test_the_worst_mixing_parameter_comes_first():
    rng = np.random.default_rng(0)
    draws, names = posterior_plots.flat_draws(_idata(rng))
    assert names[:3] == ["a[0]", "a[1]", "b[0]"]
    assert posterior_plots.worst_mixing(draws, names, 2)[0] == 3


def test_the_most_correlated_pair_is_found():
    rng = np.random.default_rng(1)
    draws, names = posterior_plots.flat_draws(_idata(rng))
    order = posterior_plots.worst_mixing(draws, names, 6)
    chosen, strength = posterior_plots.correlated_parameters(draws, order, 3)
    assert sorted(chosen[:2]) == [0, 1] and len(chosen) == 3 and strength > 0.9


@pytest.mark.slow  # 8-16 s; the plots are written in the two run tests here
def test_trace_rank_energy_and_pair_plots_are_written_quickly(tmp_path):
    """Even for 2000 parameters: at most `MAX_SHOWN` are drawn."""
    rng = np.random.default_rng(2)
    written = posterior_plots.write_posterior_plots(_idata(rng), tmp_path)  # warm imports
    assert [p.name for p in written] == ["trace.png", "rank.png", "energy.png", "pair.png"]
    for path in written:
        assert path.read_bytes()[:8] == PNG and path.stat().st_size > 5000
    tick = time.perf_counter()
    many = posterior_plots.write_posterior_plots(_idata(rng, dim=2000), tmp_path / "many")
    assert time.perf_counter() - tick < 30.0  # about 1 s on an idle core
    assert many[0].name == "trace.png"
    height = int.from_bytes(many[0].read_bytes()[20:24], "big")  # the PNG header's
    assert height == int.from_bytes(written[0].read_bytes()[20:24], "big")  # 4 rows, too


def test_no_pair_plot_without_correlation_nor_energy_plot_without_energy(tmp_path):
    rng = np.random.default_rng(3)
    idata = _idata(rng, correlated=False)
    del idata.sample_stats["energy"]
    written = posterior_plots.write_posterior_plots(idata, tmp_path)
    assert [p.name for p in written] == ["trace.png", "rank.png"]


def _sample(tmp_path, capsys, *extra):
    out = tmp_path / "run"
    code = main(["sample", "--target", "gauss-2d-v1", "--chains", "4", "--out", str(out),
                 "--no-progress", *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return out, captured


def test_a_right_run_prints_no_warning_and_writes_its_plots(tmp_path, capsys):
    # HMC tuning and NUTS (MAMS, the default, has no energy: no energy.png)
    out, captured = _sample(tmp_path, capsys, "--warmup-steps", "150", "--tuning", "4",
                            "--mams", "off")
    assert "WARNING" not in captured.out and "warning" not in captured.err.lower()
    for name in ("trace.png", "rank.png", "energy.png", "tuning_trace.png"):
        assert (out / name).read_bytes()[:8] == PNG, name
    assert "not trustworthy" not in (out / "summary.txt").read_text()


def test_a_broken_run_prints_its_warning_once(tmp_path, capsys):
    """A step far past leapfrog's stability limit diverges after warm-up: one warning
    block, in the summary (and its file), not repeated on stderr."""
    _, captured = _sample(tmp_path, capsys, "--recipe", "manual", "--kernel", "hmc",
                          "--step-size", "2.5", "--num-leapfrog", "5", "--jitter", "0.5",
                          "--warmup", "2", "--budget", "100", "--draws", "200")
    assert captured.out.count("WARNING") == 1, captured.out
    assert "divergent transitions in the sampling phase" in captured.out
    assert "divergent" not in captured.err


@pytest.mark.parametrize("frozen", [1.0, 14.0])
def test_a_bound_is_never_a_warning(frozen):
    """Whether the frozen L sits on a bound it cannot cross (1) or on the box's top, the
    record gets a note and the warnings stay empty."""
    import xarray as xr

    from adaptmc import diagnostics

    rng = np.random.default_rng(4)
    idata = _idata(rng, correlated=False)
    idata.add_groups({"tuning": xr.Dataset(
        {"reward": ("super_transition", np.array([1.0, 2.0, 3.0])),
         "num_leapfrog": ("super_transition", np.array([5.0, 3.0, frozen]))},
        attrs={"objective": "lag_one_ess_per_grad"})})
    idata.sample_stats["diverging"] = (("chain", "draw"), np.zeros((4, 400), bool))
    box = {"num_leapfrog": (1.0, 14.0)}
    found = [w for w in diagnostics.convergence_warnings(idata) if "leapfrog" in w]
    assert found == []
    notes = diagnostics.tuning_notes(idata, box, integer=("num_leapfrog",))
    assert len(notes) == 1 and ("smallest possible" in notes[0]) == (frozen == 1.0)
