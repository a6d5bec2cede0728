"""A Python exception inside the user's log density, told once and in the user's words.

A log density calling Python (``jax.pure_callback``: a PyMC, Stan or hand-written model)
that raises reaches the run as XLA's ``CpuCallback error`` with JAX's frames and the
traceback flattened into one line. `capture_callback_errors` takes the exception as JAX
logs it (``jax._src.callback``'s logger, which is then silent), and `TargetError` says what
raised, where in the user's code, and with which values (the callback's arguments), which
`failure_record` makes JSON for the run folder.
"""

from __future__ import annotations

import contextlib
import logging
import os
import traceback
from typing import Any

import numpy as np

FAILURE = "failure.json"  # in a run folder: what the log density raised, and on what


class TargetError(RuntimeError):
    """The user's log density raised; ``record``: `failure_record`'s facts."""

    def __init__(self, message: str, record: dict):
        super().__init__(message)
        self.record = record


class _Keep(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.caught: list = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.caught.append(record.exc_info[1])


@contextlib.contextmanager
def capture_callback_errors():
    """Within: the exceptions raised in ``jax.pure_callback`` callbacks (a list, filled as
    they are raised), not printed by JAX's logger."""
    logger = logging.getLogger("jax._src.callback")
    keep, propagate = _Keep(), logger.propagate
    logger.addHandler(keep)
    logger.propagate = False
    try:
        yield keep.caught
    finally:
        logger.removeHandler(keep)
        logger.propagate = propagate


def _library(filename: str) -> bool:
    parts = filename.replace("\\", "/").split("/")
    return "site-packages" in parts or "adaptmc" in parts or filename.startswith("<")


def failure_record(err: BaseException) -> dict:
    """``{error, file, line, function, code, values}`` of an exception raised in a callback:
    its type and message, the innermost frame of the user's code (not JAX's, adaptmc's or
    another installed package's), and the callback's arguments as lists."""
    frames = traceback.extract_tb(err.__traceback__)
    mine = [f for f in frames if not _library(f.filename)] or frames[-1:]
    frame = mine[-1] if mine else None
    values = None
    tb = err.__traceback__
    while tb is not None:  # JAX's frame that called the user's callback holds its arguments
        if tb.tb_frame.f_code.co_name == "pure_callback_impl":
            values = [np.asarray(a).tolist() for a in tb.tb_frame.f_locals.get("args", ())]
        tb = tb.tb_next
    return {
        "error": f"{type(err).__name__}: {err}",
        "file": frame.filename if frame else None,
        "line": frame.lineno if frame else None,
        "function": frame.name if frame else None,
        "code": frame.line if frame else None,
        "values": values,
    }


def target_error(caught: list, where: str, saved: str | None) -> TargetError:
    """One `TargetError` for the first exception ``caught``: what, where in the user's code,
    and either where its values are saved (``saved``: a file) or the first of them."""
    record = failure_record(caught[0])
    place = "" if record["file"] is None else \
        f" at {os.path.relpath(record['file'])}:{record['line']} in {record['function']}"
    if saved is not None:
        values = f"; the values it was called with are in {saved}"
    else:
        values = f"; it was called with {_short(record['values'])}"
    return TargetError(f"the target's log density raised {record['error']}{place} "
                       f"({where}){values}", record)


def _short(values: Any) -> str:
    text = repr(values)
    return text if len(text) <= 200 else text[:197] + "..."


def failed_run(caught: list, index: int, folder, staged, committed: bool) -> TargetError:
    """The `TargetError` of a run whose log density raised in super-transition ``index``,
    its record saved in the run folder: ``folder`` when ``committed`` (it holds a
    checkpoint: a resume meets the same values again); else ``staged`` put in place as a
    folder with no checkpoint, where no folder was (it may not replace one: None)."""
    from pathlib import Path

    from adaptmc import io
    from adaptmc.disk import full_disk, space_needed

    target = None
    if committed:
        target = Path(folder)
    elif staged is not None and (not Path(folder).exists() or not any(Path(folder).iterdir())):
        target = io.commit_output_dir(staged, folder)
    where = f"super-transition {index}"
    if committed and (Path(folder) / io.CHECKPOINT).is_file():
        where += ("; the run is checkpointed before it, and a resume repeats the same draws "
                  "and meets the same values: fix the model first")
    elif target is not None:
        where += "; no checkpoint yet: a resume starts the run again"
    saved = None if target is None else str(target / FAILURE)
    err = target_error(caught, where, saved)
    if target is not None:
        try:
            io.write_json(target / FAILURE, {**err.record, "super_transition": index})
        except OSError as write:  # the values are told in the line instead
            if not full_disk(write):
                raise
            err = target_error(caught, f"{where}; {FAILURE} could not be written in "
                               f"{str(target)!r}, the disk is full: "
                               f"{space_needed(target, 2**16)}", None)
    return err


BEFORE_RUN = "before the run's first super-transition, so nothing was written"


@contextlib.contextmanager
def telling_target_errors(where: str = BEFORE_RUN):
    """Within: an exception of the user's log density (one not already a `TargetError`:
    those raised before the run, loading the target, checking it, warming up) becomes one
    `TargetError` saying ``where``."""
    with capture_callback_errors() as caught:
        try:
            yield
        except TargetError:
            raise
        except Exception:
            if not caught:
                raise
            raise target_error(caught, where, None) from None
