"""Diagnostics: the robust min ESS and the convergence warnings, each produced by a run that
deserves it and absent from one that does not."""

import warnings

import numpy as np
import pytest
import xarray as xr

from adaptmc import diagnostics

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import arviz as az


def _idata(x, diverging=None, rewards=None, objective="esjd", tuning_params=None,
           energy=None):
    chains, draws = x.shape[:2]
    stats = {"diverging": np.zeros((chains, draws), bool) if diverging is None else diverging,
             "acceptance_rate": np.full((chains, draws), 0.8)}
    if energy is not None:
        stats["energy"] = energy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = az.from_dict(posterior={"x": x}, sample_stats=stats)
    if rewards is not None:
        data = {"reward": ("super_transition", np.asarray(rewards, float))}
        for name, values in (tuning_params or {}).items():
            data[name] = ("super_transition", np.asarray(values, float))
        idata.add_groups({"tuning": xr.Dataset(data, attrs={"objective": objective})})
    return idata


def test_robust_ess_does_not_credit_antithetic_draws():
    """An antithetic chain (x_t = -0.9 x_{t-1} + noise) has bulk-ESS of x above the number of
    draws, but not of x^2: the robust ESS takes the smaller."""
    rng = np.random.default_rng(0)
    x = np.zeros((4, 2000))
    for t in range(1, 2000):
        x[:, t] = -0.9 * x[:, t - 1] + np.sqrt(1 - 0.81) * rng.normal(size=4)
    positions = x[..., None]
    bulk = diagnostics.ess(positions)[0]
    robust = diagnostics.robust_ess(positions)[0]
    assert bulk > 8000 > 4 * 2000 / 2
    assert robust < 0.5 * bulk and robust <= diagnostics.ess(positions**2)[0] + 1e-9


def test_a_converged_run_has_no_warning():
    rng = np.random.default_rng(1)
    idata = _idata(rng.normal(size=(4, 1000, 2)), rewards=[0.1, 0.2, 0.3])
    assert diagnostics.convergence_warnings(idata) == []
    assert "WARNING" not in diagnostics.format_summary(idata)


@pytest.mark.parametrize("case, message", [
    ("rhat", "max R-hat"), ("divergent", "divergent transitions in the sampling phase"),
    ("ess", "robust min ESS"), ("nan", "every tuning reward was NaN"),
    ("bfmi", "E-BFMI below 0.3 in chain 2"),
])
def test_each_warning_is_produced_by_a_run_that_deserves_it(case, message):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4, 1000, 2))
    kwargs = {"rewards": [0.1, 0.2, 0.3]}
    if case == "rhat":
        x[0] += 3.0
    elif case == "divergent":
        kwargs["diverging"] = np.zeros((4, 1000), bool)
        kwargs["diverging"][1, 5] = True
    elif case == "ess":
        x = np.cumsum(x, axis=1) * 0.01 + rng.normal(size=(1, 1, 2))  # a random walk
    elif case == "nan":
        kwargs["rewards"] = [np.nan] * 3
    energy = rng.normal(size=(4, 1000))  # independent energies: E-BFMI about 2
    if case == "bfmi":  # a slow random walk in energy: E-BFMI about 0.01
        energy[2] = np.cumsum(rng.normal(size=1000))
    kwargs["energy"] = energy
    found = diagnostics.convergence_warnings(_idata(x, **kwargs))
    assert any(message in w for w in found), found
    assert len(found) == 1 or case in ("rhat", "ess"), found


def test_where_tuning_ended_is_a_note_never_a_warning():
    """A frozen setting at a box edge says nothing about the draws: it is a tuning note
    (the run's record and a quiet line of the summary), and a bound that cannot be crossed
    (num_leapfrog = 1) says so; a setting inside the box has no note."""
    import json

    rng = np.random.default_rng(6)
    idata = _idata(rng.normal(size=(4, 1000, 2)), rewards=[0.1, 0.2, 0.3],
                   tuning_params={"step_size": [0.5, 0.2, 0.0101],
                                  "num_leapfrog": [4.0, 2.0, 1.0]})
    box = {"step_size": (0.01, 1.0), "num_leapfrog": (1.0, 14.0)}
    assert diagnostics.convergence_warnings(idata) == []
    notes = diagnostics.tuning_notes(idata, box, integer=("num_leapfrog",))
    assert len(notes) == 2
    assert "step_size = 0.0101 ended at an edge" in notes[0]
    assert "num_leapfrog = 1, its smallest possible value" in notes[1]
    idata.attrs["tuning_notes"] = json.dumps(notes)
    text = diagnostics.format_summary(idata)
    assert "WARNING" not in text and text.count("note: ") == 2
    inside = {"step_size": (0.001, 1.0), "num_leapfrog": (1.0, 14.0)}
    idata.tuning["num_leapfrog"] = ("super_transition", np.array([4.0, 5.0, 6.0]))
    assert diagnostics.tuning_notes(idata, inside, integer=("num_leapfrog",)) == []


def test_ebfmi_of_independent_energies_is_about_two_and_absent_without_energy():
    """Independent energies: E[(E_n - E_{n-1})^2] = 2 Var(E), so E-BFMI is about 2; no
    energy recorded (MALA, RWM) or a NaN column: None, and no line in the summary."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(2, 4000, 1))
    fractions = diagnostics.ebfmi(_idata(x, energy=rng.normal(size=(2, 4000))))
    np.testing.assert_allclose(fractions, 2.0, atol=0.15)
    assert diagnostics.ebfmi(_idata(x)) is None
    assert diagnostics.ebfmi(_idata(x, energy=np.full((2, 4000), np.nan))) is None
    assert "E-BFMI" not in diagnostics.format_summary(_idata(x))


def test_nan_rewards_without_an_objective_are_no_warning():
    rng = np.random.default_rng(3)
    idata = _idata(rng.normal(size=(4, 1000, 2)), rewards=[np.nan] * 3, objective="none")
    assert diagnostics.convergence_warnings(idata) == []


def test_summary_of_many_draws_takes_seconds():
    import time

    rng = np.random.default_rng(4)
    idata = _idata(rng.normal(size=(4, 20000, 40)))
    tick = time.perf_counter()
    text = diagnostics.format_summary(idata)
    assert time.perf_counter() - tick < 20.0
    assert "robust min ESS" in text


def _phased_idata(warmup, tuning, sampling):
    """A run record: ``warmup`` divergences in the recipe's warm-up attr, then two tuning
    super-transitions and two sampling ones with the given divergence counts."""
    import json

    rng = np.random.default_rng(5)
    idata = _idata(rng.normal(size=(4, 1000, 2)), rewards=[0.1, 0.2, 0.3, 0.3])
    idata.tuning["divergences"] = ("super_transition", np.array([*tuning, *sampling]))
    idata.tuning["warmup"] = ("super_transition", np.array([True, True, False, False]))
    idata.posterior.attrs["warmup"] = json.dumps({"divergences": warmup, "step_size": 0.1})
    return idata


def test_divergences_are_counted_and_reported_per_phase():
    idata = _phased_idata(3, [2, 1], [0, 4])
    assert diagnostics.divergences_by_phase(idata) == {"warmup": 3, "tuning": 3, "sampling": 4}
    found = diagnostics.convergence_warnings(idata)
    assert any("4 divergent transitions in the sampling phase" in w and "had 3 and 3" in w
               for w in found), found
    assert "divergences: warmup 3  tuning 3  sampling 4" in diagnostics.format_summary(idata)


def test_divergences_before_sampling_are_no_warning():
    """The bandit tries settings that diverge and never freezes on them; a warm-up diverges
    while it finds its step: neither makes the kept draws suspect."""
    idata = _phased_idata(7, [5, 0], [0, 0])
    assert diagnostics.divergences_by_phase(idata) == {"warmup": 7, "tuning": 5, "sampling": 0}
    assert diagnostics.convergence_warnings(idata) == []


def test_a_run_records_its_divergences_per_phase():
    """A run whose step is unstable for half its trajectories (eps = 2 on N(0, 1), jittered
    by +-50%: leapfrog is unstable above eps = 2) diverges in every phase; the counts in
    ``attrs["divergences"]`` are the tuning record's, split by its warm-up flags."""
    import json

    from adaptmc.kernels import HMCParams, hmc
    from adaptmc.run import run
    from adaptmc.targets import gaussian

    result = run(gaussian(np.zeros(2), np.eye(2)), hmc,
                 HMCParams(step_size=2.0, num_leapfrog=5, jitter=0.5),
                 num_super_transitions=4, gradient_budget=100, num_chains=2, num_warmup=2,
                 seed=6, progress=False, attrs={"warmup": json.dumps({"divergences": 9})})
    counts = json.loads(result.idata.attrs["divergences"])
    record = result.idata.tuning
    tuned = np.asarray(record["warmup"].values, bool)
    divergent = np.asarray(record["divergences"].values)
    assert counts == {"warmup": 9, "tuning": int(divergent[tuned].sum()),
                      "sampling": int(divergent[~tuned].sum())}
    assert counts["tuning"] > 0 and counts["sampling"] > 0
    assert any("in the sampling phase" in w for w in json.loads(result.idata.attrs["warnings"]))


def test_a_parameter_no_chain_moved_has_no_effective_draws():
    """ArviZ gives a constant array the number of draws as its ESS; a sampler that rejected
    every proposal has given no effective draw, so 0, while a moving parameter is unchanged."""
    rng = np.random.default_rng(0)
    x = np.ones((2, 500, 2))
    x[0, :, 1], x[1, :, 1] = rng.normal(size=500), rng.normal(size=500)
    x[1, :, 0] = 3.0  # each chain constant, at different values
    moving = diagnostics.robust_ess(x[..., 1:])
    out = diagnostics.robust_ess(x)
    assert out[0] == 0.0 and out[1] == moving[0] > 100


def test_a_quantity_constant_in_every_draw_is_a_known_constant_unless_nothing_moved():
    """A transformed parameter computed from data alone (dogs' ``n_avoid``) is the same in
    every draw: no ESS (NaN, as Stan's summary), not judged, no warning; when nothing moved
    at all, the sampler is stuck and the run is told so (robust min ESS 0)."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=(4, 1000, 2)), np.full((4, 1000, 1), 7.0)], axis=-1)
    idata = _idata(x)
    table = diagnostics.summary_in_blocks(idata)
    assert list(table["judged"]) == [True, True, False]
    assert table[["ess_bulk", "ess_tail", "ess_robust", "r_hat"]].iloc[2].isna().all()
    assert diagnostics.convergence_warnings(idata, table) == []
    assert "WARNING" not in diagnostics.format_summary(idata)
    stuck = _idata(np.full((4, 1000, 2), 7.0))
    warned = diagnostics.convergence_warnings(stuck, diagnostics.summary_in_blocks(stuck))
    assert any(w.startswith("robust min ESS 0 <") for w in warned), warned


def test_hmc_records_the_energy_of_each_draw():
    """HMC's ``sample_stats.energy`` is the Hamiltonian of the chain's state with the momentum
    it ends with: on a standard normal with identity mass, ``E = -log p(x) + |p|^2 / 2`` has
    mean ``dim`` (plus the constant), and a well-tuned run's E-BFMI is near 1, far above 0.3."""
    from adaptmc.kernels import HMCParams, hmc
    from adaptmc.run import run
    from adaptmc.targets import gaussian

    dim = 5
    result = run(gaussian(np.zeros(dim), np.eye(dim)), hmc,
                 HMCParams(step_size=0.4, num_leapfrog=4, jitter=0.2),
                 num_super_transitions=6, gradient_budget=400, num_chains=2, num_warmup=1,
                 seed=3, progress=False)
    energy = np.asarray(result.idata.sample_stats["energy"].values)
    lp = np.asarray(result.idata.sample_stats["lp"].values)
    kinetic = energy + lp  # |p|^2 / 2 at each draw: mean dim / 2
    assert np.all(kinetic >= 0)
    assert abs(kinetic.mean() - dim / 2) < 0.3
    assert np.all(diagnostics.ebfmi(result.idata) > 0.6)


def test_one_chain_gets_a_note_not_a_warning_nor_a_leaked_message(caplog, recwarn):
    """R-hat needs two chains: one chain gets NaN and a note, and neither NumPy nor
    ArviZ's logger says anything."""
    rng = np.random.default_rng(8)
    with caplog.at_level("WARNING"):
        text = diagnostics.format_summary(_idata(rng.normal(size=(1, 2000, 2))))
    assert "note: R-hat needs two chains" in text and "WARNING" not in text
    assert not caplog.records and not [w for w in recwarn if "NaN" in str(w.message)]


@pytest.mark.parametrize("flag", [False, True])
def test_diagnostics_run_on_numpy_and_leave_arviz_numba_flag_as_it_was(flag, monkeypatch):
    """Inside `numpy_only` ArviZ uses NumPy's variance (no Numba compilation on the first
    call of a process); a user's flag is restored after, also when the block raises; the
    R-hat and ESS are ArviZ's own."""
    from adaptmc.arviz_quiet import az, numpy_only

    monkeypatch.setattr(az.Numba, "numba_flag", flag)
    x = np.random.default_rng(0).normal(size=(4, 101, 3))
    with numpy_only():
        assert az.Numba.numba_flag is False
    assert az.Numba.numba_flag is flag
    with pytest.raises(RuntimeError), numpy_only():
        raise RuntimeError
    assert az.Numba.numba_flag is flag
    expected = [az.rhat(x[..., i]) for i in range(3)]
    np.testing.assert_allclose(diagnostics.rhat(x), expected, rtol=1e-12)
    np.testing.assert_allclose(diagnostics.ess(x), [az.ess(x[..., i]) for i in range(3)],
                               rtol=1e-12)
    assert az.Numba.numba_flag is flag
