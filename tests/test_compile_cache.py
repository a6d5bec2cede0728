"""Compiled programs kept on disk: a second process loads what the first compiled."""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = """
import sys, warnings
import jax
import adaptmc
from adaptmc.compile_cache import default_folder
assert str(default_folder()) == sys.argv[1]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    folder = adaptmc.use_compile_cache(sys.argv[2])
if sys.argv[2].startswith("/proc"):
    assert folder is None and "no compilation cache" in str(caught[0].message)
else:
    assert str(folder) == sys.argv[2]
print(float(jax.jit(lambda x: jax.numpy.sin(x) * 3.0 + 1.0)(0.5)))
"""


def _run(tmp_path, folder):
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    env["ADAPTMC_COMPILE_CACHE"] = str(tmp_path / "default")
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "default"), folder],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_program_compiled_once_is_stored_and_the_cache_never_blocks_a_run(tmp_path):
    folder = tmp_path / "cache"
    first = _run(tmp_path, str(folder))
    stored = sorted(p.name for p in folder.iterdir())
    assert stored, "nothing was written to the cache"
    assert _run(tmp_path, str(folder)) == first
    assert sorted(p.name for p in folder.iterdir()) == stored  # loaded, not compiled again
    # a folder that cannot be made: a warning, and the program still runs
    assert _run(tmp_path, "/proc/adaptmc-no-such-folder") == first


SAMPLE_TWICE = """
import sys
import jax
from jax import monitoring

misses, hits = [], []
monitoring.register_event_listener(
    lambda event, **kw: (misses if event.endswith("cache_misses") else hits).append(event)
    if "compilation_cache/cache_" in event else None)
jax.config.update("jax_enable_x64", True)
import adaptmc
import json
adaptmc.sample("gauss-2d-v1", chains=2, seed=int(sys.argv[1]), draws=50, warmup_steps=150,
               progress=False, **json.loads(sys.argv[2]))
print(len(misses), len(hits))
"""


def _sample_in_new_process(folder, seed, options):
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    env["ADAPTMC_COMPILE_CACHE"] = str(folder)
    out = subprocess.run([sys.executable, "-c", SAMPLE_TWICE, str(seed), json.dumps(options)],
                         env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    misses, hits = map(int, out.stdout.split()[-2:])
    return misses, hits


@pytest.mark.slow  # two runs in new processes
@pytest.mark.parametrize("options", [
    {},
    {"tuning": 6},
], ids=["default", "hmc-tuning"])
def test_a_second_sample_call_in_a_new_process_compiles_nothing(tmp_path, options):
    """`adaptmc.sample` keeps compiled programs by default: a second call on the same model
    and sizes, in a new process (another seed: the key is an argument, not a constant),
    loads every program from the cache: JAX records no cache miss. The default (MAMS after
    the warm-up: every program's shapes from the model and the sizes alone) and HMC's
    tuning (``tuning=6``: its loop's buffer holds at least `TUNING_BUFFER` draws, where one
    sized by the budget alone held 128 on seed 0 and 256 on seed 1)."""
    first_misses, _ = _sample_in_new_process(tmp_path / "cache", 0, options)
    assert first_misses > 0
    misses, hits = _sample_in_new_process(tmp_path / "cache", 1, options)
    assert misses == 0 and hits > 0, (misses, hits)
