"""Compiled programs kept on disk: a second process loads what the first compiled."""

import os
import subprocess
import sys

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
