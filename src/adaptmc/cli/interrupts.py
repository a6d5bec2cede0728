"""Ctrl-C on the command line: one line, never a traceback, never lost.

`deferring_sigint` installs a SIGINT handler that raises `KeyboardInterrupt` as Python's
does, except inside a garbage-collector callback (JAX's ``_xla_gc_callback``), where an
exception is printed as "Exception ignored" and dropped, so the run would go on: there it
sends it again (``signal.pthread_kill``) a moment later, outside the callback.
A Ctrl-C while the command's modules are imported, before `adaptmc.cli.main` runs, is
`adaptmc._start`'s.
"""

from __future__ import annotations

import contextlib
import gc
import signal
import threading


def _in_gc_callback(frame) -> bool:
    codes = {getattr(callback, "__code__", None) for callback in gc.callbacks}
    while frame is not None:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


def handle_sigint(signum, frame) -> None:
    """Raise `KeyboardInterrupt`; inside a gc callback, raise it again 50 ms later."""
    if _in_gc_callback(frame):  # a real signal again (it wakes a sleeping main thread)
        main = threading.main_thread().ident
        threading.Timer(0.05, signal.pthread_kill, (main, signal.SIGINT)).start()
        return
    raise KeyboardInterrupt


@contextlib.contextmanager
def deferring_sigint():
    """Within (in the main thread): SIGINT is `handle_sigint`'s."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, handle_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
