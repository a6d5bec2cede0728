"""Compiled programs kept on disk between runs, as Stan keeps a model's binary.

A run compiles a handful of XLA programs for its target (the NUTS warm-up, the
first-step search, the super-transition loop, small helpers): 3-10 s on a 2-core CPU, more
than the sampling itself on many posteriors. JAX's persistent compilation cache stores each
executable under a key made of the program (the model's data included, as constants), its
shapes, the JAX version and the device, so a second run of the same model with the same
chain count and sizes loads its programs instead of compiling them; a different model or
size compiles afresh, and what is loaded is the executable that was compiled, so the draws
are bit-identical. The sampler's chunk programs are also kept as executables in the folder's
``executables`` (`adaptmc.targets.executables`), which a later run loads without tracing
them (``ADAPTMC_EXECUTABLES=0`` turns that off).

`adaptmc sample` and `adaptmc-lab reproduce` use the cache unless given ``--no-compile-cache``;
from Python, call `use_compile_cache` before anything is compiled.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

MAX_BYTES = 2**30  # least recently used programs are dropped beyond 1 GiB


def default_folder() -> Path:
    """``$ADAPTMC_COMPILE_CACHE``, else ``$XDG_CACHE_HOME/adaptmc/jax`` (default
    ``~/.cache/adaptmc/jax``)."""
    if os.environ.get("ADAPTMC_COMPILE_CACHE"):
        return Path(os.environ["ADAPTMC_COMPILE_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "adaptmc" / "jax"


def use_compile_cache(folder: str | Path | None = None) -> Path | None:
    """Keep every compiled program in ``folder`` (default `default_folder`; a folder set in
    ``JAX_COMPILATION_CACHE_DIR`` or JAX's own config wins) and load it from there next
    time. Call it before anything is compiled: JAX decides once per process whether a cache
    is used. Returns the folder, or ``None`` with a warning when it cannot be created (the
    run then compiles as usual)."""
    import jax

    chosen = jax.config.jax_compilation_cache_dir or os.environ.get("JAX_COMPILATION_CACHE_DIR")
    path = Path(chosen) if chosen else Path(folder) if folder else default_folder()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        warnings.warn(f"no compilation cache ({path}: {err}); compiling every program",
                      stacklevel=2)
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    # every program, however quick: a run's small programs add up to seconds
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
    return path
