"""Compiled executables kept on disk and loaded without tracing their program.

JAX's persistent compilation cache (`adaptmc.compile_cache`) keys an executable by its
lowered program, so a run that loads one still traces and lowers it first: 0.1-0.3 s of a
warm run for the sampler's chunk programs. Here a program's executable
(``jax.experimental.serialize_executable``) is stored under a key made without tracing it:
a hash of the model's lowered value and gradient (lowered once per run anyway, for the
start checks' cost analysis; its text holds the model's data, every constant printed in
full), the program's name and every setting it closes over (given by its caller), the
arguments' shapes, dtypes and tree, JAX's configuration (x64 and the rest), ``XLA_FLAGS``,
the backend and device, the JAX and jaxlib versions and a hash of adaptmc's own source
files. A loaded executable is the one compiled: the same bits. Anything that cannot be read
or loaded is a miss: the program is traced and compiled as without this cache.

The files live in the ``executables`` folder inside JAX's cache folder (JAX's own size
limit counts only its ``*-cache`` files); they are written to a temporary name and renamed.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import jax

LOAD_EVENT = "/adaptmc/compile/executable_load_duration"
"""The `jax.monitoring` duration event of an executable loaded here (``fun_name``: its
program's name), which `adaptmc.run.compile_clock` counts as a program loaded from the
compile cache."""
MAX_BYTES = 2**28
"""The folder's size beyond which the least recently written files are removed."""
_CONFIG_SKIPPED = ("compilation_cache", "persistent_cache", "log", "explain_cache")


ENABLE = "ADAPTMC_EXECUTABLES"
"""The environment variable that turns this cache off (``0``); on otherwise, whenever JAX's
compilation cache is on. An executable is loaded onto the one device `jax.jit` compiles
for, so a host with several local devices runs it too (tested with four)."""


def folder() -> Path | None:
    """The folder of stored executables: ``executables`` in JAX's compilation cache folder,
    or None (nothing stored or loaded) when JAX's cache is off or `ENABLE` is ``0``."""
    chosen = jax.config.jax_compilation_cache_dir
    if os.environ.get(ENABLE) == "0":
        return None
    return Path(chosen) / "executables" if chosen else None


@functools.cache
def source_digest() -> str:
    """A hash of adaptmc's source files (Python and C++), every file's path and text."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".cpp")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def environment() -> tuple:
    """What besides the program decides its executable: JAX's and jaxlib's versions, JAX's
    configuration (but its cache and logging settings), ``XLA_FLAGS``, the backend and
    its devices."""
    import jaxlib

    device = jax.devices()[0]
    config = sorted((k, repr(v)) for k, v in jax.config.values.items()
                    if not any(s in k for s in _CONFIG_SKIPPED))
    return (jax.__version__, jaxlib.__version__, config, os.environ.get("XLA_FLAGS", ""),
            jax.default_backend(), device.platform, device.device_kind,
            getattr(device.client, "platform_version", ""), jax.device_count(),
            source_digest())


def argument_signature(args: tuple) -> tuple:
    """The arguments' tree and each leaf's shape, dtype and weak type (arrays or
    ``jax.ShapeDtypeStruct``)."""
    leaves, tree = jax.tree_util.tree_flatten(args)
    return str(tree), tuple((tuple(leaf.shape), str(leaf.dtype),
                             bool(getattr(leaf, "weak_type", False))) for leaf in leaves)


def path_for(model_text: str, settings: Any, args: tuple) -> Path | None:
    """The file of the executable of the program described by ``settings`` (its name and
    every setting it closes over, a value with a stable ``repr``) on the model whose lowered
    value and gradient is ``model_text``, for ``args``; None when JAX's cache is off."""
    where = folder()
    if where is None:
        return None
    digest = hashlib.sha256(model_text.encode())
    digest.update(repr((settings, argument_signature(args), environment())).encode())
    return where / f"{digest.hexdigest()}.exec"


def read(path: Path) -> tuple | None:
    """``(serialized, in_tree, out_tree, name)`` stored at ``path``, or None when there is
    none or it cannot be read (a miss)."""
    try:
        stored = pickle.loads(path.read_bytes())
        serialized, in_tree, out_tree, name = stored
        if not isinstance(serialized, bytes) or not isinstance(name, str):
            return None
    except Exception:  # noqa: BLE001 - absent, truncated, corrupt or foreign: a miss
        return None
    try:
        os.utime(path)  # recently used: kept longest
    except OSError:  # a folder this user may read but not write: loaded all the same
        pass
    return serialized, in_tree, out_tree, name


def load(stored: tuple) -> Any | None:
    """The executable `read` gave (a `jax.stages.Compiled`), loaded onto the default
    backend; None when it cannot be (a miss). Reports `LOAD_EVENT`."""
    from jax.experimental.serialize_executable import deserialize_and_load

    serialized, in_tree, out_tree, name = stored
    tick = time.perf_counter()
    try:
        # on the one device ``jax.jit`` compiled it for: left to itself it is loaded onto every
        # local device (several with --xla_force_host_platform_device_count) and fails
        executable = deserialize_and_load(serialized, in_tree, out_tree,
                                          execution_devices=jax.devices()[:1])
    except Exception:  # noqa: BLE001 - another XLA, another machine: compile instead
        return None
    jax.monitoring.record_event_duration_secs(LOAD_EVENT, time.perf_counter() - tick,
                                              fun_name=name)
    return executable


def compile_and_store(lowered: Any, path: Path | None, name: str) -> None:
    """Compile ``lowered`` (a ``jax.stages.Lowered``) and store its executable at ``path``
    (`store`), unless JAX loaded it from its own cache: XLA's CPU client serialises an
    executable it deserialised without its functions (jaxlib 0.10.2: the copy stored
    fails when run, "Function ... not found"), so only a compilation is stored."""
    _listen()
    _HITS.count = 0
    executable = lowered.compile()
    if path is not None and not _HITS.count:
        store(path, executable, name)


_HITS = threading.local()  # JAX's cache hits in this thread since `compile_and_store` began
_LISTENING: list[bool] = []


def _hit(event: str, **kwargs) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        _HITS.count = getattr(_HITS, "count", 0) + 1


def _listen() -> None:
    if not _LISTENING:
        _LISTENING.append(True)
        jax.monitoring.register_event_listener(_hit)


def store(path: Path, executable: Any, name: str) -> None:
    """Write ``executable`` (a `jax.stages.Compiled`) to ``path``, atomically (a temporary
    file renamed); nothing when it cannot be serialized or written."""
    from jax.experimental.serialize_executable import serialize

    try:
        blob = pickle.dumps((*serialize(executable), name))
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(handle, "wb") as file:
            file.write(blob)
        os.replace(temporary, path)
        _trim(path.parent)
    except Exception:  # noqa: BLE001 - host callbacks, a full disk: compiled next time
        return


def _trim(where: Path, most: int = MAX_BYTES) -> None:
    """Remove the least recently used files of ``where`` beyond ``most`` bytes."""
    files = sorted(where.glob("*.exec"), key=lambda p: p.stat().st_mtime, reverse=True)
    total = 0
    for path in files:
        total += path.stat().st_size
        if total > most:
            path.unlink(missing_ok=True)


class Loaded:
    """A program's loaded executable, called as the program (``jax.jit`` function) it
    stands for; arguments of other shapes, or an executable that failed to load, go to
    the program itself (traced and compiled on that call)."""

    def __init__(self, program: Any):
        self.program, self.executable = program, None

    def __call__(self, *args):
        if self.executable is not None:
            try:
                return self.executable(*args)
            except TypeError:  # arguments unlike those it was compiled for
                self.executable = None
        return self.program(*args)

    def lower(self, *args):
        """The program's `lower` (a program loaded needs none)."""
        return self.program.lower(*args)
