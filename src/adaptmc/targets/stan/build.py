"""Compile a Stan program into a shared library with a C interface, once.

The toolchain is the one ``httpstan`` ships (Riddell et al., httpstan): ``stanc`` (Stan's
compiler to C++), the Stan, Stan Math, Eigen, Boost, TBB and SUNDIALS headers, ``libtbb`` and
the SUNDIALS libraries; the C++ compiler is the system's (``$CXX``, default ``g++``). What
every program shares is built once per machine under `cache_dir` (`shared_parts`): a
precompiled header of Stan's model header, ``adaptmc_stan.cpp`` (this package's C interface
to a ``stan::model::model_base``) and ``adaptmc_stan_ffi.cpp`` (its XLA FFI handlers, with
jaxlib's headers). A program then costs stanc, one compilation of its own C++ with the
precompiled header, and a link; its library is named by hashes of the program, the shared
parts, the flags and the versions of the compiler, stanc and httpstan: a second build of
the same program compiles nothing.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import NamedTuple

INTERFACE = Path(__file__).with_name("adaptmc_stan.cpp")
FFI = Path(__file__).with_name("adaptmc_stan_ffi.cpp")
PCH_OF = "stan/model/model_header.hpp"  # what stanc's C++ includes first

DEFINES = ("-DSTAN_THREADS", "-D_REENTRANT", "-DBOOST_DISABLE_ASSERTS",
           "-DBOOST_PHOENIX_NO_VARIADIC_EXPRESSION",
           # httpstan's libraries are built with the old C++ string ABI (manylinux2014)
           "-D_GLIBCXX_USE_CXX11_ABI=0")
CXXFLAGS = ("-O3", "-std=c++17", "-fPIC", "-Wno-sign-compare", "-Wno-ignored-attributes",
            "-Wno-deprecated-declarations", "-Wno-unused-variable")
LIBRARIES = ("-ltbb", "-lsundials_cvodes", "-lsundials_idas", "-lsundials_nvecserial")


class StanBuildError(ValueError):
    """A Stan program that cannot be built: no toolchain, or stanc's or the compiler's
    error (its first line)."""


def cache_dir() -> Path:
    """``$ADAPTMC_CACHE/stan``, else ``$XDG_CACHE_HOME/adaptmc/stan`` (default
    ``~/.cache/adaptmc/stan``)."""
    if os.environ.get("ADAPTMC_CACHE"):
        return Path(os.environ["ADAPTMC_CACHE"]).expanduser() / "stan"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "adaptmc" / "stan"


@cache
def httpstan_dir() -> Path:
    """httpstan's package folder (its ``stanc``, ``include/``, ``lib/``)."""
    try:
        import httpstan
    except ImportError:
        raise StanBuildError(
            "Stan models need httpstan (its stanc and Stan headers): "
            "pip install 'adaptmc[stan]'") from None
    return Path(httpstan.__file__).parent


def compiler() -> str:
    """The C++ compiler's path (``$CXX``, default ``g++``), or `StanBuildError`."""
    name = os.environ.get("CXX", "g++")
    path = shutil.which(name)
    if path is None:
        raise StanBuildError(
            f"no C++ compiler: {name!r} not found (install g++, e.g. `apt install g++`, or "
            "set CXX to a C++17 compiler)")
    return path


def _version(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    return (done.stdout or done.stderr).strip().splitlines()[0] if done.returncode == 0 else ""


@cache
def toolchain_id(cxx: str) -> str:
    """What a compiled model depends on besides its program: the compiler's, stanc's and
    httpstan's versions and the flags."""
    import httpstan

    stanc = str(httpstan_dir() / "stanc")
    parts = [_version([cxx, "--version"]), _version([stanc, "--version"]),
             getattr(httpstan, "__version__", "?"), " ".join(DEFINES + CXXFLAGS + LIBRARIES)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


class Shared(NamedTuple):
    """The parts every program links, built once per machine and toolchain: a precompiled
    header of Stan's model header (``pch``, next to the ``header`` it precompiles), the C
    interface's and the FFI handlers' objects, and ``key``, naming a library linked with
    them."""

    header: Path
    pch: Path
    interface: Path
    ffi: Path
    key: str

    def ready(self) -> bool:
        return self.pch.is_file() and self.interface.is_file() and self.ffi.is_file()


def shared_parts(cxx: str) -> Shared:
    """Where the shared parts for the compiler ``cxx`` are (built or not): named by hashes of
    `toolchain_id` and of the sources (jaxlib's version for the FFI's headers); the key of a
    library linked with them also names httpstan's ``lib`` folder, its TBB's."""
    toolchain = toolchain_id(cxx)
    interface = hashlib.sha256(f"{toolchain}\n{INTERFACE.read_text()}".encode()).hexdigest()
    ffi = hashlib.sha256(f"{toolchain}\n{ffi_version()}\n{FFI.read_text()}".encode()).hexdigest()
    pch_dir = cache_dir() / f"pch-{toolchain[:16]}"
    # the library finds TBB through the linking environment's path (its rpath): another
    # environment (a new virtual environment, the old one deleted) links its own
    linked = f"{interface}\n{ffi}\n{httpstan_dir() / 'lib'}"
    return Shared(pch_dir / "stan_pch.hpp", pch_dir / "stan_pch.hpp.gch",
                  cache_dir() / f"interface-{interface[:24]}.o", cache_dir() / f"ffi-{ffi[:24]}.o",
                  hashlib.sha256(linked.encode()).hexdigest())


def build_model(stan_file: str | Path, progress: bool = True) -> Path:
    """The shared library of the Stan program ``stan_file``, built if it is not cached.

    The program's object file is kept in a folder named by a hash of the program and
    `toolchain_id`, and linked with the `shared_parts` into a library named by their hash: a
    changed interface relinks, without compiling the program again. A build says so on
    stderr (``progress``), with its seconds.

    Raises `StanBuildError` for a missing toolchain, a program stanc rejects (its message in
    one line, with the line and column) or a failed compilation.
    """
    stan_file = Path(stan_file)
    code = stan_file.read_text()
    cxx = compiler()
    shared = shared_parts(cxx)
    folder = cache_dir() / hashlib.sha256(f"{toolchain_id(cxx)}\n{code}".encode()).hexdigest()[:24]
    library = folder / f"model-{shared.key[:12]}.so"
    if library.is_file():
        return library
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder / ".lock"):  # another process building the same program waits
        if not library.is_file():
            model_obj = folder / "model.o"  # stanc first: a program's error comes at once
            cpp = None if model_obj.is_file() else _stanc(stan_file, code, folder)
            with announce(program_name(stan_file), not shared.ready(), progress):
                _build_shared(cxx, shared)
                _build(cpp, cxx, model_obj, shared, library)
    return library


@contextmanager
def _locked(path: Path):
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build_shared(cxx: str, shared: Shared) -> None:
    """Build the missing precompiled header and FFI handlers' object (at once, on two
    cores); the interface is compiled with the program (`_build`), both needing the
    header."""
    if shared.pch.is_file() and shared.ffi.is_file():
        return
    shared.pch.parent.mkdir(parents=True, exist_ok=True)
    with _locked(cache_dir() / ".shared.lock"):
        jobs = []
        if not shared.pch.is_file():
            shared.header.write_text(f"#include <{PCH_OF}>\n")
            jobs.append(_start_compiler(
                [cxx, *_compile_flags(), "-x", "c++-header", str(shared.header)], shared.pch))
        if not shared.ffi.is_file():
            jobs.append(_start_compiler(
                [cxx, *_compile_flags(), f"-I{ffi_include()}", "-c", str(FFI)], shared.ffi))
        _finish_all(jobs)


def _build(cpp: Path | None, cxx: str, model_obj: Path, shared: Shared,
           library: Path) -> None:
    """Compile what is missing of the program's object (from stanc's ``cpp``) and the
    interface's (at once, with the precompiled header) and link them with the FFI handlers
    into ``library``."""
    jobs = []
    if cpp is not None:
        jobs.append(_start_compiler([cxx, *_compile_flags(shared), "-x", "c++", "-c", str(cpp)],
                                    model_obj))
    if not shared.interface.is_file():  # two processes may both: each file is put whole
        jobs.append(_start_compiler([cxx, *_compile_flags(shared), "-c", str(INTERFACE)],
                                    shared.interface))
    _finish_all(jobs)
    lib_dir = httpstan_dir() / "lib"
    _finish_compiler(*_start_compiler(
        [cxx, "-shared", str(shared.interface), str(shared.ffi), str(model_obj),
         f"-L{lib_dir}", *LIBRARIES, f"-Wl,-rpath,{lib_dir}"], library))


def _finish_all(jobs) -> None:
    """Wait for every compiler job; the first one's error, if any, after all are done."""
    errors = []
    for job in jobs:
        try:
            _finish_compiler(*job)
        except StanBuildError as err:
            errors.append(err)
    if errors:
        raise errors[0]


def program_name(stan_file: Path) -> str:
    """``arK-arK/model.stan`` for a posteriordb folder's program, else the file's name."""
    if stan_file.name == "model.stan":
        return f"{stan_file.resolve().parent.name}/{stan_file.name}"
    return stan_file.name


@contextmanager
def announce(name: str, first: bool, enabled: bool = True, stream=None):
    """``building Stan program X ... 41 s`` on ``stream`` (stderr): the line at once, the
    seconds when done (ticking on a terminal)."""
    stream = stream or sys.stderr
    if not enabled:
        yield
        return
    also = " (first time on this machine: also the shared parts)" if first else ""
    line = f"building Stan program {name}{also} ..."
    live = hasattr(stream, "isatty") and stream.isatty()
    start, done = time.monotonic(), threading.Event()
    print(line, file=stream, end="" if live else "\n", flush=True)
    ticker = threading.Thread(target=_tick, args=(stream, line, start, done), daemon=True)
    if live:
        ticker.start()
    outcome = "failed after"
    try:
        yield
        outcome = "" if live else "built in"
    finally:
        done.set()
        if live:
            ticker.join()
        seconds = f"{time.monotonic() - start:.0f} s"
        print(f"\r{line} {outcome + ' ' if outcome else ''}{seconds}" if live else
              f"{line} {outcome} {seconds}", file=stream, flush=True)


def _tick(stream, line: str, start: float, done: threading.Event) -> None:
    while not done.wait(1.0):
        print(f"\r{line} {time.monotonic() - start:.0f} s", file=stream, end="", flush=True)


def _stanc(stan_file: Path, code: str, folder: Path) -> Path:
    """stanc's C++ for ``code`` written to ``folder/model.hpp``."""
    cpp = folder / "model.hpp"
    with tempfile.TemporaryDirectory(prefix="adaptmc_stanc_") as tmp:
        source = Path(tmp) / "model.stan"
        source.write_text(code)
        done = subprocess.run(
            [str(httpstan_dir() / "stanc"), "--name", "adaptmc_model", "--o", str(cpp),
             "--include-paths", str(stan_file.resolve().parent),
             "--filename-in-msg", stan_file.name, str(source)],
            capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise StanBuildError(f"{stan_file}: {stanc_message(done.stderr)}")
    return cpp


def stanc_message(stderr: str) -> str:
    """stanc's error in one line: ``line 3, column 8: syntax error: ";" expected ...``."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    if not lines:
        return "stanc failed without a message"
    head = re.match(r"(?P<kind>[\w ]*error) in '[^']*', (?P<where>line \d+, column \d+)",
                    lines[0])
    ruled = [i for i, line in enumerate(lines) if line.startswith("---")]
    rest = " ".join(lines[ruled[-1] + 1:] if ruled else lines[1:])
    if head is None:
        return " ".join(lines)
    return f"{head['where']}: {head['kind'].lower()}: {rest}".rstrip(": ")


def _compile_flags(shared: Shared | None = None) -> list[str]:
    """The compiler's flags; with ``shared``, Stan's model header from its precompiled
    header (the compiler takes ``stan_pch.hpp.gch`` for ``stan_pch.hpp``)."""
    pch = ["-include", str(shared.header)] if shared is not None else []
    return [*CXXFLAGS, *DEFINES, f"-I{httpstan_dir() / 'include'}", *pch]


@cache
def ffi_include() -> str:
    """The folder of XLA's FFI headers, shipped with jaxlib."""
    import jax

    return jax.ffi.include_dir()


@cache
def ffi_version() -> str:
    import jaxlib

    return jaxlib.__version__


def _start_compiler(command: list[str], output: Path):
    """Start ``command -o tmp``; `_finish_compiler` moves ``tmp`` to ``output``."""
    partial = output.with_name(f".{output.name}.{os.getpid()}.part")
    process = subprocess.Popen([*command, "-o", str(partial)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    return process, partial, output


def _finish_compiler(process: subprocess.Popen, partial: Path, output: Path) -> None:
    """Wait for ``process``; its output to ``output`` (no half-written file), or
    `StanBuildError` with the compiler's first error."""
    _, stderr = process.communicate()
    if process.returncode != 0:
        partial.unlink(missing_ok=True)
        errors = [line for line in stderr.splitlines() if "error" in line]
        raise StanBuildError(f"C++ compilation failed: {(errors or [stderr.strip()])[0]}")
    os.replace(partial, output)
