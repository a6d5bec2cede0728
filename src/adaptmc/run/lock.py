"""A run folder one process owns: a lock file beside it, ``.NAME.lock``, taken before any
work (the warm-up included) and held until the run's last write.

The lock is the kernel's (``fcntl.flock`` on the file): it goes with the process that
holds it, however that process ends, so a lock left by a killed run is stale and the next
run takes it over (the file's text, the holder's process id, host, command and start
time, only names the holder in the message of a refused process). A process holds a
folder's lock any number of times (the command line, the recipe's warm-up and the run
each ask for it); the file is removed when the outermost holder lets go.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import socket
import sys
import time
from pathlib import Path

from adaptmc.disk import telling_a_full_disk
from adaptmc.io import check_output_place

_HELD: dict[str, list] = {}  # folder -> [file descriptor, depth] of this process's locks


class FolderBusy(RuntimeError):
    """Another process holds the run folder's lock."""


def lock_path(folder: str | os.PathLike) -> Path:
    """The lock file of a run folder: ``.NAME.lock`` in its parent (beside the staged
    sibling a new run writes into, so it outlives the folder's replacement)."""
    folder = Path(folder).absolute()
    return folder.parent / f".{folder.name}.lock"


def acquire(folder: str | os.PathLike) -> Path:
    """Take the lock of ``folder`` (again, if this process holds it); returns the lock
    file. Raises `FolderBusy` naming the holder when another process has it, and an
    `OSError` saying so when the parent folder cannot be written."""
    path = lock_path(folder)
    key = str(path)
    if key in _HELD:
        _HELD[key][1] += 1
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise OSError(err.errno, f"cannot write the lock file {str(path)!r} of the run "
                          f"folder {str(folder)!r} ({err.strerror}): its parent folder must "
                          "be writable") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(os.read(fd, 4096))
            os.close(fd)
            raise FolderBusy(f"the run folder {str(folder)!r} is in use by {holder}: wait for "
                             f"it to finish or stop it first (its lock: {path})") from None
        try:  # the file may have been removed by its last holder between open and flock
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    def let_go() -> None:  # the lock as if never taken
        path.unlink(missing_ok=True)
        os.close(fd)

    with telling_a_full_disk(f"the lock file {key!r}", path.parent, 2**12, "nothing was "
                             "written: free space, then run it again", cleanup=let_go):
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(_facts()).encode())
    _HELD[key] = [fd, 1]
    return path


def release(folder: str | os.PathLike) -> None:
    """Let go of the lock of ``folder`` once; the outermost release removes the file."""
    key = str(lock_path(folder))
    held = _HELD.get(key)
    if held is None:
        return
    held[1] -= 1
    if held[1] > 0:
        return
    del _HELD[key]
    with contextlib.suppress(FileNotFoundError):
        os.unlink(key)  # still holding it: a process waiting on the old file retries
    os.close(held[0])


@contextlib.contextmanager
def owning(folder: str | os.PathLike | None, resume: bool = False):
    """Within: this process holds ``folder``'s lock (nothing when ``folder`` is None),
    taken once the folder's place is checked (`adaptmc.io.check_output_place`)."""
    if folder is None:
        yield
        return
    if str(lock_path(folder)) not in _HELD:
        check_output_place(folder, resume=resume)
    acquire(folder)
    try:
        yield
    finally:
        release(folder)


def owning_output_dir(function):
    """Decorate a function taking ``output_dir=``: it runs holding that folder's lock."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with owning(kwargs.get("output_dir"), resume=bool(kwargs.get("resume"))):
            return function(*args, **kwargs)

    return wrapper


def _facts() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(),
            "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:200],
            "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}


def _describe(text: bytes) -> str:
    """The holder named from the lock file's text (which it may not have written yet)."""
    try:
        facts = json.loads(text.decode())
        return (f"process {facts['pid']} on {facts['host']} ({facts['command']}, started "
                f"{facts['started']})")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return "another process (starting now)"
