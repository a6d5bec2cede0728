"""Compile a Stan program into a shared library with a C interface, once.

The toolchain is the one ``httpstan`` ships (Riddell et al., httpstan): ``stanc`` (Stan's
compiler to C++), the Stan, Stan Math, Eigen, Boost, TBB and SUNDIALS headers, ``libtbb`` and
the SUNDIALS libraries; the C++ compiler is the system's (``$CXX``, default ``g++``). The
program's C++ (stanc's output) is compiled and linked with ``adaptmc_stan.cpp``, this
package's C interface to a ``stan::model::model_base``, into a library under `cache_dir`,
named by hashes of the program, the interface's source, the flags and the versions of the
compiler, stanc and httpstan: a second build of the same program compiles nothing.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

INTERFACE = Path(__file__).with_name("adaptmc_stan.cpp")

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


def build_model(stan_file: str | Path) -> Path:
    """The shared library of the Stan program ``stan_file``, built if it is not cached.

    The program's object file is kept in a folder named by a hash of the program and
    `toolchain_id`, and linked with the interface into a library named by the interface's
    hash: a changed interface relinks, without compiling the program again.

    Raises `StanBuildError` for a missing toolchain, a program stanc rejects (its message in
    one line, with the line and column) or a failed compilation.
    """
    stan_file = Path(stan_file)
    code = stan_file.read_text()
    cxx = compiler()
    toolchain = toolchain_id(cxx)
    interface_hash = hashlib.sha256(f"{toolchain}\n{INTERFACE.read_text()}".encode()).hexdigest()
    folder = cache_dir() / hashlib.sha256(f"{toolchain}\n{code}".encode()).hexdigest()[:24]
    library = folder / f"model-{interface_hash[:12]}.so"
    if library.is_file():
        return library
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process building the same program waits
        if not library.is_file():
            _build(stan_file, code, cxx, folder / "model.o",
                   cache_dir() / f"interface-{interface_hash[:24]}.o", library)
    return library


def _build(stan_file: Path, code: str, cxx: str, model_obj: Path, interface: Path,
           library: Path) -> None:
    """Compile what is missing of the program's and the interface's objects (at once, on two
    cores) and link them into ``library``."""
    jobs = []
    if not model_obj.is_file():
        cpp = _stanc(stan_file, code, model_obj.parent)
        jobs.append(_start_compiler([cxx, *_compile_flags(), "-x", "c++", "-c", str(cpp)],
                                    model_obj))
    if not interface.is_file():
        jobs.append(_start_compiler([cxx, *_compile_flags(), "-c", str(INTERFACE)], interface))
    errors = []
    for job in jobs:
        try:
            _finish_compiler(*job)
        except StanBuildError as err:
            errors.append(err)
    if errors:
        raise errors[0]
    lib_dir = httpstan_dir() / "lib"
    _finish_compiler(*_start_compiler(
        [cxx, "-shared", str(interface), str(model_obj), f"-L{lib_dir}", *LIBRARIES,
         f"-Wl,-rpath,{lib_dir}"], library))


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


def _compile_flags() -> list[str]:
    return [*CXXFLAGS, *DEFINES, f"-I{httpstan_dir() / 'include'}"]


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
