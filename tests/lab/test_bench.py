"""The benchmark suite: seeds fixed by cell coordinates, identical results serially and on a
2-worker local Dask cluster, a killed worker's cell retried, and the report."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from adaptmc import io
from adaptmc.cli import main
from adaptmc_lab import bench
from adaptmc_lab.bench import references
from adaptmc_lab.bench.quantities import run_positions
from adaptmc_lab.cli import main as lab_main
from adaptmc_lab.targets import get_target

# a cell small enough for CI: 2 chains, 20 warm-up and 40 sampling draws
TINY = bench.BenchConfig(num_chains=2, num_warmup=20, num_samples=40)
TINY_TARGET = "pdb-eight_schools-eight_schools_noncentered"


def test_cell_seed_depends_only_on_target_and_seed_index():
    a = bench.cell_seed("std-normal-10d", 0)
    assert a == bench.cell_seed("std-normal-10d", 0)
    assert a != bench.cell_seed("std-normal-10d", 1)
    assert a != bench.cell_seed("funnel-10d", 0)
    assert 0 <= a < 2**31
    cells = bench.make_cells(["t1", "t2"], ["s1", "s2"], 2)
    assert len(cells) == 8 and cells[0] == bench.Cell("t1", "s1", 0)
    assert cells[1].key == "t1__s1__s1"


def test_evaluate_exact_draws_are_accurate():
    target = get_target("std-normal-10d")
    rng = np.random.default_rng(3)
    draws = rng.standard_normal((4, 2000, 10))
    output = bench.SamplerOutput(draws, 100, 8000, 1.0, 0.5, 0, {})
    result = bench.evaluate(target, output)
    assert result["max_err_sd"] < 0.1
    # exact draws: errors in MCSE units are |N(0, 1)|-sized, max over 10 below 4.5
    assert result["max_err_mcse"] < 4.5
    assert result["min_ess"] > 4000
    assert result["min_ess_per_1k_grads"] == pytest.approx(1000 * result["min_ess"] / 8100)
    assert result["max_rhat"] < 1.01


def test_a_quantity_constant_in_every_draw_is_left_out_of_the_ess():
    """A structural constant (a Cholesky factor's zero, a unit diagonal up to rounding: one
    value in every draw of every chain) has no ESS: the min is the moving quantities';
    chains stuck at their different starts still get ESS 0."""
    from adaptmc.diagnostics import robust_ess
    from adaptmc.targets import make_target

    target = make_target(lambda x: -0.5 * (x @ x), np.zeros(3), check=False)
    rng = np.random.default_rng(4)
    draws = rng.standard_normal((4, 2000, 3))
    draws[..., 1] = 0.0
    draws[..., 2] = 1.0 + 1e-15 * rng.standard_normal((4, 2000))  # 1 up to rounding
    fixed = bench.evaluate(target, bench.SamplerOutput(draws, 100, 8000, 1.0, 0.5, 0, {}))
    assert fixed["num_constant"] == 2
    assert fixed["min_ess"] == pytest.approx(robust_ess(draws[..., :1]).min())
    assert fixed["min_ess"] > 4000
    draws[..., 1] = np.arange(4)[:, None]  # every chain stuck where it started
    stuck = bench.evaluate(target, bench.SamplerOutput(draws, 100, 8000, 1.0, 0.5, 0, {}))
    assert stuck["num_constant"] == 1 and stuck["min_ess"] == 0.0


def test_evaluate_posteriordb_uses_reference_names():
    target = get_target(TINY_TARGET)
    draws = np.zeros((2, 10, target.dim))
    result = bench.evaluate(target, bench.SamplerOutput(draws, 1, 1, 1.0, 0.0, 0, {}))
    # all zeros unconstrained: tau = 1, theta = mu = 0; worst error is theta[7] or mu
    assert result["num_quantities"] == 10 and result["worst"] is not None
    ref = bench.reference(target)
    expected = np.max(np.abs(np.r_[np.zeros(9), 1.0] - ref.mean) / ref.sd)
    assert result["max_err_sd"] == pytest.approx(expected)


def _fake(target, sampler, seed, ess_rate, err):
    return {"cell": {"target": target, "sampler": sampler, "seed_index": seed},
            "warmup_grads": 1000, "sampling_grads": 4000, "wall_s": 1.0, "compile_s": 2.0,
            "min_ess": ess_rate * 5, "median_ess": ess_rate * 6,
            "min_ess_per_1k_grads": ess_rate, "min_ess_per_s": 10.0, "max_rhat": 1.01,
            "divergences": 1, "max_err_sd": err, "max_err_mcse": None if err is None else 2.0}


def test_markdown_table_ratio_and_report(tmp_path):
    results = [
        _fake("a", "blackjax-nuts", 0, 4.0, 0.1), _fake("a", "blackjax-nuts", 1, 6.0, 0.2),
        _fake("a", "adaptmc-hmc-da", 0, 2.5, 0.3), _fake("a", "adaptmc-hmc-da", 1, 2.5, 0.1),
        _fake("b", "adaptmc-hmc-da", 0, 1.0, None),
    ]
    rows = {(r["target"], r["sampler"]): r for r in bench.aggregate(results)}
    assert rows["a", "adaptmc-hmc-da"]["ratio_to_nuts"] == pytest.approx(0.5)  # 2.5 / median 5
    assert rows["a", "adaptmc-hmc-da"]["max_err_sd"] == 0.3  # worst over seeds
    assert rows["b", "adaptmc-hmc-da"]["ratio_to_nuts"] is None
    text = bench.markdown_table(results)
    assert "| a | adaptmc-hmc-da | 2 |" in text and "| 0.50 |" in text
    assert "| b | adaptmc-hmc-da | 1 |" in text and "—" in text
    md = bench.write_report(results, tmp_path, "adaptmc-lab bench --quick")
    assert "adaptmc-lab bench --quick" in md.read_text()
    assert (tmp_path / "ess_per_grad.png").stat().st_size > 1000
    assert len(json.loads((tmp_path / "results.json").read_text())["cells"]) == 5


def test_unknown_sampler_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="unknown samplers"):
        bench.run_bench(["std-normal-10d"], ["nope"], 1, TINY, tmp_path, log=None)


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0")
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def test_cli_serial_cell_matches_two_worker_cluster(tmp_path, client):
    out = tmp_path / "serial"
    code = lab_main(["bench", "--targets", TINY_TARGET, "--samplers", "adaptmc-hmc-da",
                 "--seeds", "1", "--budget", "40", "--chains", "2", "--workers", "1",
                 "--out", str(out)])
    assert code == 0
    serial = json.loads((out / "results.json").read_text())["cells"][0]
    assert "| pdb-eight_schools" in (out / "results.md").read_text()
    config = bench.BenchConfig(num_chains=2, num_warmup=20, num_samples=40)
    cell = bench.Cell(TINY_TARGET, "adaptmc-hmc-da", 0)
    (clustered,) = bench.run_cells([cell], config, tmp_path / "cluster", client=client)
    serial = json.loads(json.dumps(bench.deterministic_part(serial)))
    clustered = json.loads(json.dumps(bench.deterministic_part(clustered),
                                      default=io.json_default))
    assert clustered == serial
    # a rerun reuses the finished cell without computing it
    again = bench.run_cells([cell], config, tmp_path / "cluster", client=None)
    assert bench.deterministic_part(again[0])["min_ess"] == clustered["min_ess"]


@pytest.mark.slow
def test_killed_worker_cell_is_retried_and_run_completes(tmp_path, client):
    # slow: the nanny respawns the worker, which re-imports JAX and recompiles the cell
    cells = [bench.Cell("std-normal-10d", "blackjax-nuts", i) for i in range(3)]
    config = bench.BenchConfig(num_chains=2, num_warmup=100, num_samples=200)
    box: dict = {}
    runner = threading.Thread(
        target=lambda: box.setdefault("results", bench.run_cells(cells, config, tmp_path,
                                                                 client=client)))
    runner.start()
    pids = client.run(os.getpid)
    killed = None
    deadline = time.time() + 60
    while killed is None and time.time() < deadline:
        busy = [addr for addr, tasks in client.processing().items() if tasks]
        if busy:
            time.sleep(1.0)  # let the cell get going
            killed = pids[busy[0]]
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.1)
    assert killed is not None, "no task started within 60 s"
    runner.join(timeout=240)
    assert not runner.is_alive()
    results = box["results"]
    assert [r["key"] for r in results] == [c.key for c in cells]
    assert all(np.isfinite(r["min_ess"]) and r["min_ess"] > 0 for r in results)
    assert killed not in client.run(os.getpid).values()  # the nanny restarted the worker


# slow (12 s each): in the fast tier the rows' common path (`recipe_sampler` running the
# adaptive-hmc recipe) is held by `test_a_recipe_row_makes_the_draws_of_the_command_line`, and
# each bandit inside the recipe's run loop by test_tuners.py (`test_run_end_to_end_with_each_tuner`)
@pytest.mark.parametrize("sampler", [
    pytest.param("adaptmc-adaptive-hmc-hedge", marks=pytest.mark.slow),
    pytest.param("adaptmc-adaptive-hmc-parametric", marks=pytest.mark.slow),
    pytest.param("adaptmc-adaptive-hmc-sir", marks=pytest.mark.slow),
])
def test_every_bandit_tuner_is_a_bench_sampler(sampler):
    """Each bandit of `adaptmc.tuners` runs as a bench cell of the adaptive-hmc recipe:
    warm-up and tuning gradients counted apart from sampling, the frozen setting reported,
    draws of the configured shape."""
    config = bench.BenchConfig(num_chains=2, num_warmup=150, num_samples=60)
    rows = bench.run_cells([bench.Cell("std-normal-10d", sampler, 0)], config)
    row = rows[0]
    assert row["cell"]["sampler"] == sampler
    assert row["warmup_grads"] > 0 and row["sampling_grads"] > 0 and row["finite"]
    assert row["params"]["num_leapfrog"] >= 1 and row["params"]["step_size"] > 0


def test_a_recipe_row_makes_the_draws_of_the_command_line(tmp_path):
    """The bench's adaptive-HMC row and `adaptmc sample` with the same recipe options and
    seed make identical draws (same starts, same warm-up, same tuning)."""
    import arviz as az

    from adaptmc_lab.bench.samplers import SAMPLERS, recipe_options

    config = bench.BenchConfig(num_chains=2, num_warmup=150, num_samples=80)
    target = get_target(TINY_TARGET)
    output = SAMPLERS["adaptmc-adaptive-hmc"](target, 11, config)
    options = recipe_options("adaptive-hmc", config)
    out = tmp_path / "cli"
    code = main(["sample", "--target", TINY_TARGET, "--seed", "11", "--chains", "2",
                 "--warmup-steps", str(options["warmup_steps"]), "--draws",
                 str(options["draws"]), "--out", str(out), "--no-progress"])
    assert code == 0
    idata = az.from_netcdf(out / "draws.nc")
    assert set(idata.posterior.data_vars) == {"theta", "mu", "tau"}  # constrained, as Stan's
    cli = run_positions(SimpleNamespace(idata=idata), target)
    np.testing.assert_array_equal(cli, output.positions)


@pytest.mark.skipif(importlib.util.find_spec("httpstan") is None
                    or shutil.which(os.environ.get("CXX", "g++")) is None,
                    reason="needs httpstan and a C++ compiler")
def test_a_stan_program_run_is_read_back_as_its_positions():
    """A Stan program's run stores its quantities constrained, transformed parameters and
    generated quantities beside the parameters; the bench maps each draw back to Stan's
    unconstrained space, so what it compares (`quantities`) is what the run stored. (It
    once read every stored variable as a coordinate: errors of 130 reference sd on arK, a
    failed reshape on diamonds.)"""
    from adaptmc.kernels import HMCParams, hmc
    from adaptmc.run import run
    from adaptmc_lab.bench.quantities import quantities

    target = get_target("stan-eight_schools-eight_schools_noncentered")
    result = run(target, hmc, HMCParams(0.3, 6), num_super_transitions=4, gradient_budget=120,
                 num_chains=2, seed=4, progress=False)
    posterior = result.idata.posterior
    assert {"theta", "theta_trans", "mu", "tau"} <= set(posterior.data_vars)
    positions = run_positions(result, target)
    assert positions.shape == (2, posterior.sizes["draw"], target.dim)
    names, values = quantities(target, positions)
    for i, name in enumerate(names):
        variable, _, index = name.partition("[")
        stored = posterior[variable].values
        if index:
            stored = stored[..., int(index.rstrip("]")) - 1]
        np.testing.assert_allclose(values[..., i], stored, rtol=1e-9, atol=1e-12)


def test_a_posteriordb_run_stored_constrained_keeps_its_accuracy():
    """A posteriordb target's posterior group holds the Stan program's quantities (``theta``,
    ``mu``, ``tau``), not the unconstrained leaves (``theta_trans``, ``log_tau``) it held
    before; the bench reads them back as positions (`run_positions`), so the accuracy of a
    run is the one the same run had stored the old way (the target without ``constrain``),
    to rounding."""
    import dataclasses

    from adaptmc.kernels import HMCParams, hmc
    from adaptmc.run import run

    target = get_target(TINY_TARGET)
    before = dataclasses.replace(target, constrain=None)  # draws stored as positions
    settings = dict(num_super_transitions=6, gradient_budget=300, num_chains=2, seed=4,
                    progress=False)
    now, old = (run(t, hmc, HMCParams(0.3, 6), **settings) for t in (target, before))
    assert set(old.idata.posterior.data_vars) == {"theta_trans", "mu", "log_tau"}
    assert set(now.idata.posterior.data_vars) == {"theta", "mu", "tau"}
    assert now.idata.posterior.attrs["index_origin"] == 1
    positions = run_positions(now, target)
    np.testing.assert_allclose(positions, run_positions(old, before), rtol=1e-12, atol=1e-12)
    accuracy = [bench.evaluate(target, bench.SamplerOutput(p, 1, 1, 1.0, 0.0, 0, {}))
                for p in (positions, run_positions(old, before))]
    assert accuracy[0]["worst"] == accuracy[1]["worst"]
    for column in ("max_err_sd", "max_err_mcse", "min_ess", "median_ess", "max_rhat"):
        assert accuracy[0][column] == pytest.approx(accuracy[1][column], rel=1e-9), column


def test_nuts_reference_recovers_a_gaussian_and_is_cached(tmp_path):
    """The long-NUTS reference (used for logistic regression) is right on a known Gaussian, in
    MCSE units, and is computed once: the second call reads the cached JSON."""
    from adaptmc.targets import gaussian

    target = gaussian(np.array([1.0, -2.0, 0.5]), np.array([1.0, 4.0, 0.25]), name="g3")
    kwargs = dict(num_chains=4, num_warmup=200, num_draws=1000, seed=3, directory=tmp_path)
    ref = references.nuts_reference(target, **kwargs)
    z = (ref.mean - [1.0, -2.0, 0.5]) / ref.mcse
    assert np.all(np.abs(z) < 4), z
    np.testing.assert_allclose(ref.sd, [1.0, 2.0, 0.5], rtol=0.1)
    assert len(list(tmp_path.glob("reference-g3-*.json"))) == 1
    again = references.nuts_reference(target, **kwargs)
    np.testing.assert_array_equal(again.mean, ref.mean)
    assert again.names == ref.names == target.parameter_names


def test_bnn_quantities_are_invariant_to_the_networks_symmetries():
    """Permuting hidden units and flipping the sign of a tanh unit's weights leave the
    network's function, hence every BNN quantity, unchanged, while the weights change."""
    import jax
    from jax.flatten_util import ravel_pytree

    from adaptmc_lab.models import bnn

    target = get_target("bnn-robot-arm")
    model = target.info["bnn"]
    pos = bnn.unravel(model, jax.random.normal(jax.random.key(0), (target.dim,)))
    w = {k: np.asarray(v) for k, v in pos.weights.items()}
    perm = np.array([3, 0, 7, 1, 6, 2, 5, 4])
    sign = np.array([1, -1, 1, 1, -1, 1, -1, 1], dtype=float)
    moved = dict(w)
    moved["input_hidden"] = w["input_hidden"][:, perm] * sign
    moved["hidden_bias"] = w["hidden_bias"][perm] * sign
    moved["hidden_output"] = w["hidden_output"][perm] * sign[:, None]
    a = np.asarray(ravel_pytree(pos)[0])
    b = np.asarray(ravel_pytree(bnn.BNNPosition(moved, pos.log_precisions))[0])
    assert np.max(np.abs(a - b)) > 0.1
    names, values = bench.quantities(target, np.stack([a, b])[:, None, :])
    assert names == ["mse(train)", "mse(test)", "log_precision.noise"]
    np.testing.assert_allclose(values[0], values[1], rtol=1e-12, atol=1e-12)
    x_test, y_test = target.info["test"]
    assert x_test.shape == (400, 2)
    residual = np.asarray(bnn.forward(model.spec, pos.weights, x_test)) - y_test
    np.testing.assert_allclose(values[0, 0, 1], np.mean(np.sum(residual**2, axis=1)),
                               rtol=1e-12)
    np.testing.assert_allclose(values[0, 0, 2], float(pos.log_precisions["noise"]))


@pytest.mark.slow  # a refused reference's handling: test_a_refused_reference_means_no_accuracy_...
def test_bnn_reference_refuses_chains_that_disagree(tmp_path):
    """A Gibbs-within-HMC run far too short to mix (2 chains, 2 super-transitions) is no
    reference: refused for its R-hat; only its diagnostics are kept, not a reference."""
    target = get_target("bnn-robot-arm")
    with pytest.raises(RuntimeError, match="R-hat"):
        references.bnn_reference(target, directory=tmp_path, num_chains=2,
                            num_super_transitions=2, budget=200, num_leapfrog=20)
    kept = list(tmp_path.glob("*.json"))
    assert [p.name.endswith(".refused.json") for p in kept] == [True]
    assert len(json.loads(kept[0].read_text())["rhat"]) == 3
    # a second call refuses at once instead of running the chains again
    tick = time.perf_counter()
    with pytest.raises(RuntimeError, match="diagnostics in"):
        references.bnn_reference(target, directory=tmp_path, num_chains=2,
                            num_super_transitions=2, budget=200, num_leapfrog=20)
    assert time.perf_counter() - tick < 1.0


def test_a_refused_reference_means_no_accuracy_not_a_crash(tmp_path, monkeypatch):
    """`reference` (and so a bench cell) goes on without accuracy when the reference was
    refused, and says why."""
    monkeypatch.setenv("ADAPTMC_CACHE", str(tmp_path))
    target = get_target("bnn-robot-arm")
    key = f"{references.bnn_reference_key()}-{references.bench_target_digest(target)}"
    path = tmp_path / f"reference-{target.name}-{key}.refused.json"
    path.write_text(json.dumps({"names": ["a"], "rhat": [1.2]}))
    said = []
    assert bench.reference(target, log=said.append) is None
    assert "1.200" in said[0]


def test_evaluate_bnn_compares_its_quantities_with_the_cached_reference(tmp_path, monkeypatch):
    """The BNN row of the bench is scored on `bnn_quantities` against `bnn_reference`, read
    from the cache: draws whose quantities are the reference's own have zero error."""
    monkeypatch.setenv("ADAPTMC_CACHE", str(tmp_path))
    target = get_target("bnn-robot-arm")
    rng = np.random.default_rng(0)
    positions = 0.3 * rng.standard_normal((8, 400, target.dim))
    names, values = bench.quantities(target, positions)
    references.cached_reference(target, references.bnn_reference_key(), tmp_path,
                            lambda: (names, values))
    result = bench.evaluate(target, bench.SamplerOutput(positions, 1, 1, 1.0, 0.0, 0, {}))
    assert result["num_quantities"] == 3
    assert result["worst"] in names and result["max_err_sd"] < 1e-9


def test_jax_compile_seconds_count_every_program_a_call_compiles():
    """JAX's own account of tracing, lowering and compilation (`jax.monitoring`) grows by a
    new program's compilation and not at all when the same program runs again; the speed
    table shows it beside the sampler's own compile column."""
    import jax
    import jax.numpy as jnp

    from adaptmc.run.compile_clock import compile_seconds as jax_compile_seconds
    from adaptmc_lab.bench.report import speed_table

    program = jax.jit(lambda x: jnp.cumsum(jnp.sin(x) * 3.0))
    before = jax_compile_seconds()
    program(jnp.arange(7.0)).block_until_ready()
    compiled_once = jax_compile_seconds()
    program(jnp.arange(7.0)).block_until_ready()
    assert compiled_once > before and jax_compile_seconds() == compiled_once
    rows = [{**_fake("a", "blackjax-nuts", 0, 4.0, 0.1), "host_s": 0.0, "jax_compile_s": 2.5}]
    table = speed_table(rows)
    assert "all JAX compile s" in table and "| 2.00 | 2.50 |" in table


@pytest.mark.parametrize("row", ["adaptmc-adaptive-hmc", "adaptmc-mams"])
def test_a_recipe_rows_gradients_are_those_a_counter_sees(row):
    """The adaptive-HMC row's gradients (before the first kept draw and after it) are every
    evaluation of the log density the row makes: the run's record, its checks included;
    a thinned (MAMS) row's sampling gradients are every step of its kept super-transitions,
    the transitions thinned away included, and every step of MAMS's last measurement,
    whose every ``k``-th transition is the first block (150 of them, as many as ``150 // k``
    draws a chain: the transitions after its last kept one are counted too)."""
    import jax
    import jax.numpy as jnp

    from adaptmc.targets import make_target
    from adaptmc_lab.bench.samplers import SAMPLERS
    from helpers import counting_gaussian

    logdensity, count = counting_gaussian(jnp.array([0.5, 1.0, 2.0]))
    target = make_target(logdensity, jnp.zeros(3), name="counting-3d", check=False)
    config = bench.BenchConfig(num_chains=2, num_warmup=100, num_samples=60)
    output = SAMPLERS[row](target, 3, config)
    jax.effects_barrier()
    assert output.warmup_grads + output.sampling_grads == count[0]
    if row == "adaptmc-mams":
        from adaptmc.recipes.mams_sampling import MEASURE_TRANSITIONS

        k, steps = int(output.params["mams_thin"]), output.params["mams_num_leapfrog"]
        first = min(MEASURE_TRANSITIONS // k, 60)  # draws a chain of the measurement
        assert output.sampling_grads == 2 * steps * (MEASURE_TRANSITIONS + (60 - first) * k)


def test_a_cached_cell_is_reused_only_under_the_rows_options(tmp_path, monkeypatch):
    """A cell file is reused when the bench's config, the target's definition and the row's
    options (`row_options`: a recipe row's defaults included) are those it was computed
    with: after a recipe's default changes, its cells are computed again; a peer's stay."""
    from dataclasses import asdict

    from adaptmc_lab.bench import distributed
    from adaptmc_lab.bench.config import BenchConfig, Cell
    from adaptmc_lab.bench.samplers import row_options

    monkeypatch.setattr(distributed, "_digest_or_none", lambda name: "d")
    config = BenchConfig()
    cells = [Cell("t", "adaptmc-adaptive-hmc", 0), Cell("t", "nutpie-low-rank", 0)]
    for cell in cells:
        body = {"config": asdict(config), "target_digest": "d",
                "sampler_options": row_options(cell.sampler)}
        (tmp_path / f"{cell.key}.json").write_text(json.dumps(body))
    done, todo = distributed._cached_cells(cells, config, tmp_path, False, lambda s: None)
    assert len(done) == 2 and not todo
    old = {**row_options("adaptmc-adaptive-hmc"), "tuning": 12, "nuts": "off"}
    path = tmp_path / f"{cells[0].key}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "sampler_options": old}))
    peer = tmp_path / f"{cells[1].key}.json"  # a peer's cell from before the field existed
    peer.write_text(json.dumps({k: v for k, v in json.loads(peer.read_text()).items()
                                if k != "sampler_options"}))
    done, todo = distributed._cached_cells(cells, config, tmp_path, False, lambda s: None)
    assert list(done) == [cells[1].key] and todo == [cells[0]]


@pytest.mark.parametrize("row", ["adaptmc-adaptive-hmc", "nutpie-low-rank"])
def test_a_rows_starts_are_retried_where_not_finite_and_their_gradients_counted(row):
    """On a target with log density -inf for ``x[0] > 1``, where one of seed 0's default
    starts lies (0.9 + U(-0.5, 0.5): 0.4 a chain), both rows start from the row's retried
    starts (`bench_starts`) and count every evaluation: the adaptmc run its own, nutpie its
    calls and the retries."""
    import jax
    import jax.numpy as jnp

    from adaptmc.targets import make_target
    from adaptmc_lab.bench.config import bench_starts
    from adaptmc_lab.bench.samplers import SAMPLERS

    if row.startswith("nutpie"):
        pytest.importorskip("nutpie")
    count = [0]

    def add(_):
        count[0] += 1

    def logdensity(x):
        jax.debug.callback(add, x)
        return jnp.where(x[0] > 1.0, -jnp.inf, -0.5 * jnp.sum(x**2))

    target = make_target(logdensity, jnp.full(3, 0.9), name="walled-3d", check=False)
    config = bench.BenchConfig(num_chains=4, num_warmup=100, num_samples=60)
    made = bench_starts(target, 0, config.num_chains, config.init_jitter)
    assert sum(made.retries) > 0 and np.all(np.asarray(made.positions)[:, 0] <= 1.0)
    count[0] = 0
    output = SAMPLERS[row](target, 0, config)
    jax.effects_barrier()
    assert np.all(output.positions[..., 0] <= 1.0)
    counted = output.warmup_grads + output.sampling_grads
    if row.startswith("nutpie"):  # its counter's calls (not the one compiling the gradient,
        # nor the starts made here), charged the retries
        assert counted == count[0] - made.evaluations - 1 + sum(made.retries)
    else:
        assert counted == count[0]
