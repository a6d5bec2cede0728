import os
import shutil
import tempfile
import warnings

import jax

jax.config.update("jax_enable_x64", True)
warnings.filterwarnings("ignore", category=FutureWarning)
os.environ.setdefault("TQDM_DISABLE", "1")

CACHE_VARIABLE = "JAX_COMPILATION_CACHE_DIR"
# the fast tier's time is compiling (small runs of many programs): XLA's backend at -O0
# compiles NUTS 1.7-1.9x faster (BENCHMARKS, wave six) and runs it about 2x slower; XLA's
# older CPU loop emitter (as `warmup_programs.QUICK_CHUNK`) takes a third off the rest
# (test_recipes, test_run, test_kernels: 72 s against 46 s, 2026-11-28)
FAST_TIER_XLA_FLAGS = {"xla_backend_optimization_level": "0",
                       "xla_cpu_use_fusion_emitters": "false"}


def pytest_configure(config):
    """One JAX compilation cache per test session, made by the main process before the xdist
    workers start and inherited by them and by every subprocess (CLI runs, Dask workers): a
    program compiled once in the session (a run and its resumed copy, a bench row and
    ``adaptmc sample`` with the same options, a primitive both workers run eagerly) is loaded
    from the cache instead of compiled again. The executable is the one compiled, so results
    are bit-identical; the folder is new for every session and removed at its end, so nothing
    carries over between sessions. A cache folder set by the user is used and kept.

    The fast tier (``-m 'not slow'``, the default) compiles with XLA's backend optimisation
    level 0 and its older CPU emitter (`FAST_TIER_XLA_FLAGS`, each unless ``XLA_FLAGS`` sets
    it): the algorithms, and so every statistical test, are the same; the floating-point
    results may differ from XLA's defaults in the last bits, and every comparison of draws
    within the session (resume, bench row against command line) compares programs compiled
    alike. The slow tier compiles as users do."""
    if config.getoption("markexpr") == "not slow":
        flags = os.environ.get("XLA_FLAGS", "")
        for name, value in FAST_TIER_XLA_FLAGS.items():
            if name not in flags:
                flags = f"{flags} --{name}={value}".strip()
        os.environ["XLA_FLAGS"] = flags
    if hasattr(config, "workerinput"):  # an xdist worker: the main process set it up
        folder = os.environ.get(CACHE_VARIABLE)
    elif os.environ.get(CACHE_VARIABLE):
        folder = os.environ[CACHE_VARIABLE]
    else:
        folder = tempfile.mkdtemp(prefix="adaptmc-test-jax-cache-")
        config._adaptmc_jax_cache = folder
        os.environ[CACHE_VARIABLE] = folder
    if folder:
        # cache every program, however quick to compile: most of the fast tier's time is
        # compiling small programs and eager primitives (70 ms each on a loaded 2-core runner)
        os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
        os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
        jax.config.update("jax_compilation_cache_dir", folder)
        jax.config.update("jax_persistent_cache_min_compile_time_secs",
                          float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))
        jax.config.update("jax_persistent_cache_min_entry_size_bytes",
                          int(os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"]))


def pytest_unconfigure(config):
    folder = getattr(config, "_adaptmc_jax_cache", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
