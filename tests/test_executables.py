"""The sampler's executables kept on disk: a second process loads them without tracing."""

import json
import os
import pickle
import subprocess
import sys

import pytest

RUN = """
import hashlib, json, sys, warnings
import numpy as np
import jax
import jax.numpy as jnp
from jax import monitoring

traced = []
monitoring.register_event_duration_secs_listener(
    lambda event, seconds, **kw: traced.append(kw.get("fun_name"))
    if event == "/jax/core/compile/jaxpr_trace_duration" else None)
jax.config.update("jax_enable_x64", True)
import adaptmc

data = np.linspace(-1.0, 1.0, 40) + float(sys.argv[1])  # the model's data, a constant


def logdensity(x):
    return -0.5 * jnp.sum((data - x[0]) ** 2) - 0.5 * jnp.sum(x[1:] ** 2)


with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    idata = adaptmc.sample((logdensity, jnp.zeros(3)), chains=2, seed=0, draws=50,
                           warmup_steps=150, progress=False, mams="on")
draws = np.asarray(idata.posterior["x"])
print(json.dumps({"traced": traced, "census": json.loads(idata.attrs["compile_census"]),
                  "warnings": [str(w.message) for w in caught],
                  "draws": hashlib.sha256(draws.tobytes()).hexdigest()}))
"""
SAMPLERS = {"nuts_chunk", "mams_chunk"}


def _run(folder, offset: float = 0.0, flags: str | None = None) -> dict:
    """A small run (MAMS after the warm-up) of a model with data ``offset`` in a new
    process, the compile cache in ``folder`` (``XLA_FLAGS`` ``flags`` if given): the programs
    traced, the census, warnings, a digest of the draws."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    if flags is not None:
        env["XLA_FLAGS"] = flags
    env["ADAPTMC_COMPILE_CACHE"] = str(folder)
    env.pop("ADAPTMC_EXECUTABLES", None)  # on by default (`executables.ENABLE`)
    out = subprocess.run([sys.executable, "-c", RUN, str(offset)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def _sampler_programs(found: dict) -> set:
    return SAMPLERS & set(found["traced"])


def _cold_and_warm(folder) -> dict:
    """The first run traces and compiles the chunk programs and stores their executables;
    a second in a new process traces neither (its census: both loaded from the cache,
    alongside the run) and its draws are the same bits. The cold run's outputs."""
    cold = _run(folder)
    assert _sampler_programs(cold) == SAMPLERS, cold["traced"]
    stored = sorted((folder / "executables").glob("*.exec"))
    assert len(stored) == 2, stored
    warm = _run(folder)
    assert _sampler_programs(warm) == set(), warm["traced"]
    loaded = [p for p in warm["census"] if p["name"] in SAMPLERS]
    assert sorted(p["name"] for p in loaded) == sorted(SAMPLERS), warm["census"]
    assert all(p["cached"] and p["ahead"] and p["compile_s"] > 0 for p in loaded), loaded
    assert warm["draws"] == cold["draws"]
    return cold


def test_a_second_process_loads_the_samplers_programs_without_tracing_them(tmp_path):
    """`_cold_and_warm`."""
    _cold_and_warm(tmp_path)


@pytest.mark.slow  # five processes, 35-45 s
def test_other_data_or_a_damaged_executable_is_a_miss_with_the_same_draws(tmp_path):
    """After `_cold_and_warm`: a model with other data misses (traces both); a corrupt or
    truncated file is a miss (traced again, no error, no warning about it) with the same
    draws."""
    cold = _cold_and_warm(tmp_path)
    stored = sorted((tmp_path / "executables").glob("*.exec"))
    other = _run(tmp_path, offset=0.5)
    assert _sampler_programs(other) == SAMPLERS, other["traced"]
    assert other["draws"] != cold["draws"]
    assert len(list((tmp_path / "executables").glob("*.exec"))) == 4

    stored[0].write_bytes(b"not an executable")
    stored[1].write_bytes(stored[1].read_bytes()[:1000])  # truncated
    broken = _run(tmp_path)
    assert _sampler_programs(broken) == SAMPLERS, broken["traced"]
    assert broken["draws"] == cold["draws"]
    assert not [w for w in broken["warnings"] if "xecutable" in w or "pickle" in w]
    # those programs came from JAX's cache: not stored again (XLA's CPU client serialises a
    # deserialised executable without its functions), and the next run is as good
    assert stored[0].read_bytes() == b"not an executable"
    again = _run(tmp_path)
    assert again["draws"] == cold["draws"]


@pytest.mark.slow  # 2 processes, 16-20 s
def test_a_stored_executable_runs_where_the_host_has_several_devices(tmp_path):
    """With ``--xla_force_host_platform_device_count=4`` (as NumPyro's
    ``set_host_device_count`` sets it) a loaded executable runs on the one device it was
    compiled for: loaded onto every local device it failed when called ("Expected args to
    execute_sharded_on_local_devices to have 4 shards") and the process aborted."""
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4"
    cold = _run(tmp_path, flags=flags)
    warm = _run(tmp_path, flags=flags)
    assert _sampler_programs(warm) == set(), warm["traced"]
    assert warm["draws"] == cold["draws"]


def test_what_cannot_be_read_or_loaded_is_a_miss(tmp_path):
    """`read` gives None for a missing, corrupt or foreign file, `load` for bytes XLA
    cannot load; `store` of something that cannot be serialised writes nothing."""
    import jax

    from adaptmc.targets import executables

    path = tmp_path / "x.exec"
    assert executables.read(path) is None
    for content in (b"", b"garbage", pickle.dumps({"a": 1}), pickle.dumps((1, 2, 3, 4))):
        path.write_bytes(content)
        assert executables.read(path) is None
    tree = jax.tree_util.tree_structure(((1,), {}))
    assert executables.load((b"garbage", tree, tree, "f")) is None
    executables.store(tmp_path / "y.exec", object(), "f")
    assert not (tmp_path / "y.exec").exists()
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("change", ["settings", "shape", "dtype", "text"])
def test_the_key_changes_with_every_part_of_it(change, monkeypatch, tmp_path):
    """A stored executable's file name changes with the model's text, the program's
    settings and its arguments' shapes and dtypes; none without JAX's cache."""
    import jax
    import numpy as np

    from adaptmc.targets import executables

    monkeypatch.setattr(executables, "folder", lambda: tmp_path / "executables")
    args = (jax.ShapeDtypeStruct((4, 3), np.float64), (np.zeros(2),))
    base = executables.path_for("model", ("nuts_chunk", 0.8), args)
    changed = {"settings": ("model", ("nuts_chunk", 0.9), args),
               "shape": ("model", ("nuts_chunk", 0.8),
                         (jax.ShapeDtypeStruct((4, 2), np.float64), (np.zeros(2),))),
               "dtype": ("model", ("nuts_chunk", 0.8),
                         (jax.ShapeDtypeStruct((4, 3), np.float32), (np.zeros(2),))),
               "text": ("model 2", ("nuts_chunk", 0.8), args)}[change]
    assert base.parent == tmp_path / "executables"
    assert executables.path_for(*changed) != base
    assert executables.path_for("model", ("nuts_chunk", 0.8), args) == base
    monkeypatch.setattr(executables, "folder", lambda: None)
    assert executables.path_for("model", ("nuts_chunk", 0.8), args) is None


def test_the_cache_is_on_with_jaxs_cache_and_off_with_the_variable(monkeypatch, tmp_path):
    """`folder` is ``executables`` in JAX's cache folder unless ``ADAPTMC_EXECUTABLES=0``,
    and None without JAX's cache."""
    import jax

    from adaptmc.targets import executables

    monkeypatch.delenv(executables.ENABLE, raising=False)
    before = jax.config.jax_compilation_cache_dir
    try:
        jax.config.update("jax_compilation_cache_dir", str(tmp_path))
        assert executables.folder() == tmp_path / "executables"
        monkeypatch.setenv(executables.ENABLE, "0")
        assert executables.folder() is None
        monkeypatch.setenv(executables.ENABLE, "1")
        assert executables.folder() == tmp_path / "executables"
        jax.config.update("jax_compilation_cache_dir", None)
        assert executables.folder() is None
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
