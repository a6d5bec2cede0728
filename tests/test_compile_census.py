"""The compile census: every program a run compiled, named, with its seconds."""

import json
import os
import subprocess
import sys

import pytest

import adaptmc
from adaptmc.diagnostics import format_summary

SMALL = dict(chains=2, draws=50, warmup_steps=150, progress=False,
             compile_cache=False)


@pytest.mark.parametrize("ahead", [False, True])
def test_the_run_record_names_every_program_compiled_and_sums_to_compile_s(ahead, monkeypatch):
    """The census names every program; ``compile_s`` is what the run waited for: the sum
    of its own thread's programs, and with programs compiled alongside (`compile_ahead`)
    the waits for them on top, never more than the census's whole sum plus those waits."""
    from adaptmc.targets import base

    monkeypatch.setattr(base, "COMPILE_AHEAD", ahead)
    waited = base.AHEAD_WAITED[0]
    idata = adaptmc.sample("gauss-2d-v1", seed=3, **SMALL)
    waited = base.AHEAD_WAITED[0] - waited
    programs = json.loads(idata.attrs["compile_census"])
    assert all(set(p) == {"name", "trace_s", "lower_s", "compile_s", "cached", "ahead"}
               for p in programs)
    assert all(min(p["trace_s"], p["lower_s"], p["compile_s"]) >= 0 for p in programs)
    assert any(p["ahead"] for p in programs) == ahead
    total = sum(p["trace_s"] + p["lower_s"] + p["compile_s"] for p in programs
                if not p["ahead"])
    assert total + waited == pytest.approx(idata.attrs["compile_s"], abs=1e-9)
    assert waited == 0.0 or ahead
    # another test in this process may have turned the persistent cache on
    loaded = sum(1 for p in programs if p["cached"])
    compiled = sum(1 for p in programs if p["compile_s"] > 0) - loaded
    assert f"compiled {compiled} programs, loaded {loaded} from the compile cache, in " \
        f"{idata.attrs['compile_s']:.1f} s" in format_summary(idata)


@pytest.mark.parametrize("mams, names", [("auto", ["nuts_chunk"]),
                                         ("on", ["mams_chunk", "nuts_chunk"])])
def test_the_warmups_programs_compile_alongside_the_run_and_give_the_same_draws(
        monkeypatch, mams, names):
    """The warm-up's NUTS chunk program (``nuts_chunk``; NUTS samples through it: the
    default on two dimensions, below `mams_rules.MIN_DIM`) and MAMS's (``mams_chunk``, with
    ``mams="on"``) compile in threads of their own
    (`adaptmc.targets.base.compile_ahead`) while the run makes its starts and their first
    steps (on the host): the census marks them ``ahead``, each compiled once; the chains'
    states at the warm-up's end are the chunk's (no program). With compile-ahead off every
    program compiles in the caller's thread, the same programs, and the draws are the same
    bits."""
    import numpy as np

    from adaptmc.targets import base

    def run():
        idata = adaptmc.sample("gauss-2d-v1", seed=3, mams=mams, **SMALL)
        programs = [p for p in json.loads(idata.attrs["compile_census"]) if p["compile_s"] > 0]
        return np.asarray(idata.posterior["x"]), programs

    run()  # the eager operations any run compiles once per process (``log``, ...)
    draws, programs = run()
    ahead = sorted(p["name"] for p in programs if p["ahead"])
    assert ahead == names, programs
    monkeypatch.setattr(base, "COMPILE_AHEAD", False)
    draws_off, programs_off = run()
    assert not any(p["ahead"] for p in programs_off)
    assert sorted(p["name"] for p in programs_off) == sorted(p["name"] for p in programs)
    assert np.array_equal(draws, draws_off)


def test_the_users_model_is_traced_only_in_the_callers_thread():
    """Programs compiled alongside the run are traced and lowered in the caller's thread
    and only compiled in another (`adaptmc.targets.base.compile_ahead`): a model's library
    may keep global state while it is traced (NumPyro's effect handlers are one stack per
    process: two threads tracing at once gave "all sites must have unique names")."""
    import threading

    import jax.numpy as jnp

    threads = set()

    def logdensity(x):
        threads.add(threading.current_thread().name)
        return -0.5 * jnp.sum(x**2)

    adaptmc.sample((logdensity, jnp.zeros(3)), seed=1, **SMALL)
    assert threads == {threading.current_thread().name}


COUNT_PROGRAMS = """
import hashlib, json, sys
import numpy as np
import jax
from jax import monitoring

compiled = []
monitoring.register_event_duration_secs_listener(
    lambda event, seconds, **kw: compiled.append(kw.get("fun_name"))
    if event == "/jax/core/compile/backend_compile_duration" else None)
misses = []
monitoring.register_event_listener(
    lambda event, **kw: misses.append(event) if event.endswith("cache_misses") else None)
jax.config.update("jax_enable_x64", True)
import adaptmc
from adaptmc.targets import as_target

target = as_target(sys.argv[2])
built, missed = len(compiled), len(misses)
idata = adaptmc.sample(target, chains=4, seed=0, progress=False,
                       compile_cache=sys.argv[1] == "cache", **json.loads(sys.argv[3]))
post = idata.posterior
draws = np.concatenate([np.asarray(post[v]).reshape(4, 1000, -1) for v in post.data_vars], -1)
print(json.dumps({"target": compiled[:built], "programs": compiled[built:],
                  "census": idata.attrs["compile_census"], "cache_misses": len(misses) - missed,
                  "draws": hashlib.sha256(draws.tobytes()).hexdigest()[:16]}))
"""

# measured (docs/notes/compile.md): 28 programs at 78d3fa7, 15 at 072d1df, 14 at 167c21e
# (gauss-2d-v1, a short run); the default run on std-normal-10d: 15 at c89db24, 6 at
# cf56eb9, 1 at a0e9903 (the NUTS chunk; keys, starts and first steps on the host:
# cold-compile.md), 2 now (and MAMS's: the default samples with MAMS, mams-compile.md)
MAX_PROGRAMS = 2


def _programs_in_new_process(cache: str, folder=None, target="std-normal-10d",
                             **options) -> dict:
    """What the default run (`adaptmc.sample` of ``target``, built before the call, 4
    chains, seed 0; ``options`` its keywords) compiled in a new process: JAX's backend
    compilations of the target's construction and of the call, the run record's census,
    cache misses, a digest of the posterior draws."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    if folder is not None:
        env["ADAPTMC_COMPILE_CACHE"] = str(folder)
    out = subprocess.run([sys.executable, "-c", COUNT_PROGRAMS, cache, target,
                          json.dumps(options)], env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_a_default_run_in_a_new_process_compiles_at_most_two_programs():
    """Every program JAX compiled during one default `adaptmc.sample` call in a fresh
    process (small eager operations included, read from JAX's compile events): at most
    `MAX_PROGRAMS`, the model's value and gradient included; the target's construction
    compiles one more (its start check); the run record's census names each one."""
    found = _programs_in_new_process("none")
    programs = found["programs"]
    assert len(programs) <= MAX_PROGRAMS, programs
    assert found["target"] == ["jit(logdensity_and_grad)"], found["target"]
    census = [p["name"] for p in json.loads(found["census"]) if p["compile_s"] > 0]
    assert sorted(f"jit({name})" for name in census) == sorted(programs), (census, programs)


@pytest.mark.slow  # 16 s; the default census stays in the fast tier
def test_a_run_without_mams_compiles_one_program_less_than_the_default():
    """``mams="off"``: the warm-up's NUTS chunk alone (NUTS samples through it); the
    default's MAMS program (``mams_chunk``) is compiled alongside the warm-up."""
    found = _programs_in_new_process("none", mams="off")
    assert found["programs"] == ["jit(nuts_chunk)"], found["programs"]
    default = json.loads(_programs_in_new_process("none")["census"])
    assert [p["ahead"] for p in default
            if p["name"] == "mams_chunk" and p["compile_s"] > 0] == [True], default


@pytest.mark.slow  # two default runs in new processes, two MAMS runs
@pytest.mark.parametrize("mams", ["off", "on"])
def test_the_same_run_in_a_second_process_compiles_none_of_the_samplers_programs(
        tmp_path, mams):
    """With the persistent compile cache (as `adaptmc.sample` keeps it by default), the
    default run (and one sampling with MAMS) again in a new process loads every program
    from the cache: JAX records no cache miss (a program loaded is still traced and
    lowered, and named in the census)."""
    first = _programs_in_new_process("cache", tmp_path / "cache", mams=mams)
    second = _programs_in_new_process("cache", tmp_path / "cache", mams=mams)
    assert first["cache_misses"] > 0 and [p for p in json.loads(first["census"])
                                          if p["compile_s"] > 0]
    assert second["cache_misses"] == 0, second["programs"]
    loaded = [p for p in json.loads(second["census"]) if p["compile_s"] > 0]
    assert loaded and all(p["cached"] for p in loaded), loaded
    assert second["draws"] == first["draws"]


# the default run's posterior draws (sha256 of ``(4, 1000, dim)``, float64) before the
# programs were folded (c89db24) and after: the same bits. XLA's defaults (the slow tier;
# the fast one compiles at -O0) with jaxlib `JAXLIB`; another jaxlib may compute other bits.
# Eight schools' pinned anew when the warm-up's metric became within-chain (f0394ff); both
# anew when the warm-up and NUTS sampling moved from BlackJAX's NUTS kernel to the compact
# one (`adaptmc.adaptation.compact_nuts`: its own random streams; docs/notes/compact-nuts.md),
# and when the warm-up's early phase began to end once the chains agree
# (docs/notes/warmup-cost.md); both anew when the run's keys, starts, first steps and
# chunk keys moved to the host's NumPy streams (`adaptmc.adaptation.host_random`,
# docs/notes/cold-compile.md), when MAMS became the default's sampler (mams="auto"), and
# when MAMS's program of a cheap model compiled with XLA's quicker emitters (the last bits
# of a sum differ: docs/notes/stan-compile.md), and when the NUTS chunk of a cheap model
# compiled without LLVM's optimisation (`warmup_programs.QUICK_NUTS`, cold-compile.md);
# std-normal-10d anew when MAMS sampled with two steps where its rule asks for one
# (`mams_sampling.MIN_STEPS`); both anew when MAMS kept its last measurement's transitions
# as its first draws and measured at two steps from the start (`mams_sampling.tune`), and
# when MAMS's warm-up ended without NUTS's final window (`early.start_chains`), and when
# MAMS adapted its step over half its transitions after a warm-up that settled
# (`mams_rules.adapt_transitions`).
PINNED = {"std-normal-10d": "8d2c83fb00e102c4",
          "pdb-eight_schools-eight_schools_noncentered": "1258883046e4c48c"}
JAXLIB = "0.10.2"


@pytest.mark.slow  # two default runs in new processes
@pytest.mark.parametrize("target", sorted(PINNED))
def test_the_default_runs_draws_are_those_before_the_programs_were_folded(target):
    import jaxlib

    if jaxlib.__version__ != JAXLIB:
        pytest.skip(f"draws pinned with jaxlib {JAXLIB}")
    assert _programs_in_new_process("none", target=target)["draws"] == PINNED[target]


def test_the_hosts_keys_starts_and_first_steps_compile_no_program():
    """The run's keys and jittered starts, the warm-up's chunk keys, dual averaging's start
    and frozen state and the first steps (`adaptmc.adaptation.host_random`, on the host)
    compile no program; a seed gives the same keys and starts every time, another path
    another stream; dual averaging's host states are `da_init`'s and `da_frozen`'s; a flat
    target's posterior variables are its positions."""
    import jax
    import numpy as np
    from jax import monitoring

    from adaptmc.adaptation.dual_averaging import (
        da_frozen,
        da_frozen_on_host,
        da_init,
        da_init_on_host,
    )
    from adaptmc.adaptation.host_random import split
    from adaptmc.adaptation.warmup_programs import first_on_host
    from adaptmc.run.idata import posterior_variables
    from adaptmc.run.plan import jittered, run_keys, run_start, zero_key
    from adaptmc.targets import as_target
    from adaptmc.targets.base import compiled_logdensity_and_grad

    target = as_target("gauss-2d-v1")
    compiled_logdensity_and_grad(target)(np.asarray(target.initial_position))  # the checks'
    compiled = []
    monitoring.register_event_duration_secs_listener(
        lambda event, seconds, **kw: compiled.append(kw.get("fun_name"))
        if event == "/jax/core/compile/backend_compile_duration" else None)
    data = jax.random.key_data
    keys, starts = run_start(3, target.initial_position, 4, 0.5)
    key, chain_keys = split(keys["warmup"], 4)
    folded = split(keys["run"], 4, 7)[1]
    steps = np.exp(np.random.default_rng(0).normal(size=4) * 3)
    init, frozen = da_init_on_host(steps, 10.0), da_frozen_on_host(steps)
    first = first_on_host(target, keys["warmup"], np.asarray(starts))
    assert compiled == [], compiled
    assert all(np.array_equal(data(keys[k]), data(run_keys(3, k))) for k in keys)
    assert len({tuple(np.asarray(data(k))) for k in keys.values()}) == len(keys)
    assert np.array_equal(starts, jittered(run_keys(3, "init"), target.initial_position, 4, 0.5))
    assert np.all(np.abs(starts - np.asarray(target.initial_position)) <= 0.5)
    assert len({tuple(r) for r in np.asarray(data(chain_keys)).tolist()}) == 4
    assert not np.array_equal(data(chain_keys), data(folded))
    assert np.array_equal(data(split(keys["warmup"], 4)[1]), data(chain_keys))
    assert all(np.array_equal(a, b) for a, b in zip(init, da_init(steps, 10.0), strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(frozen, da_frozen(steps), strict=True))
    assert np.all(first[3] > 0) and np.all(first[4] >= 2)  # a step, and at least two trials
    assert np.array_equal(data(zero_key()), data(jax.random.key(0)))
    positions = np.asarray(starts)[:, None, :]
    named = posterior_variables(target, positions)
    unravelled = np.asarray(jax.vmap(target.unravel)(positions[:, 0]))
    assert np.array_equal(named["x"], unravelled[:, None])
