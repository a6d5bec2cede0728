"""A full disk at any write: one `adaptmc.io.WriteError` line saying what could not be
written and where, about how many MB it needs and how many are free, what is kept and how
to go on. Every write of a run and of the command line goes through `telling_a_full_disk`
(or `telling_a_full_run` inside a run folder): the lock file, the config, the warm-up's and
the super-transitions' checkpoints, the draws' checksum, the summary and the plots, the
posterior predictive draws. ``draws.nc`` itself says the same in its own words
(`adaptmc.run.netcdf`, which also cleans up what HDF5 leaves)."""

from __future__ import annotations

import contextlib
import errno
import math
import shutil
from collections.abc import Callable
from pathlib import Path

from adaptmc.io import WriteError


def full_disk(err: BaseException) -> bool:
    """Whether ``err`` says the disk (or the user's quota) is full."""
    if isinstance(err, WriteError):  # already told, by an inner write
        return False
    return getattr(err, "errno", None) in (errno.ENOSPC, errno.EDQUOT) or \
        "No space left" in str(err)


def free_bytes(folder: str | Path) -> int:
    """The free bytes of the disk holding ``folder`` (or its nearest existing ancestor)."""
    folder = Path(folder).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return shutil.disk_usage(folder).free


def megabytes(count: int, up: bool = False) -> str:
    """``count`` bytes in MB to one decimal, rounded ``up`` (a need) or down (what is free:
    0.0 MB on a full disk)."""
    tenths = math.ceil(count / 1e5) if up else math.floor(count / 1e5)
    return f"{tenths / 10:.1f} MB"


def space_needed(folder: str | Path, need: int) -> str:
    """``it needs about N MB and F MB are free`` (and how many more to free, if more are
    needed than are free) for ``need`` bytes on ``folder``'s disk."""
    free = free_bytes(folder)
    more = f" (free {megabytes(need - free, up=True)} more)" if need > free else ""
    return f"it needs about {megabytes(need, up=True)} and {megabytes(free)} are free{more}"


@contextlib.contextmanager
def telling_a_full_disk(what: str, folder: str | Path, need: int | Callable[[], int],
                        kept: str, cleanup: Callable[[], None] | None = None):
    """Within: an `OSError` saying the disk is full becomes one `WriteError`, ``cannot
    write WHAT (the disk is full): it needs about N MB and F MB are free; KEPT``.
    ``cleanup()`` runs first (it removes what was half written, so its space counts as
    free); ``need`` may be a function of no arguments, called only then."""
    try:
        yield
    except OSError as err:
        if not full_disk(err):
            raise
        if cleanup is not None:
            cleanup()
        need = need() if callable(need) else need
        raise WriteError(f"cannot write {what} (the disk is full): "
                         f"{space_needed(folder, need)}; {kept}") from None


def staged_name(run_dir: Path) -> Path | None:
    """The folder the user asked for, when ``run_dir`` is its staged sibling
    (``.NAME.new-*``, `adaptmc.io.stage_output_dir`); else None."""
    if run_dir.name.startswith(".") and ".new-" in run_dir.name:
        return run_dir.parent / run_dir.name[1:].rsplit(".new-", 1)[0]
    return None


@contextlib.contextmanager
def telling_a_full_run(run_dir: str | Path, what: str, need: int | Callable[[], int],
                       staged: bool = False):
    """`telling_a_full_disk` for a file ``what`` of the run folder ``run_dir`` (its staged
    sibling, or one not made yet: ``staged``): what is kept is the run up to its previous
    checkpoint (resume it), or, before its first, nothing (run it again)."""
    run_dir = Path(run_dir)
    asked = staged_name(run_dir)
    staged = staged or asked is not None
    run_dir = asked or run_dir  # name the folder the user asked for, not its sibling
    kept = ("nothing was written (the run had no checkpoint yet; an old run in its folder "
            "is kept): free space, then run it again") if staged else \
        ("the run is kept up to its previous checkpoint: free space, then `adaptmc resume "
         f"{run_dir}` (resume=True) continues it")
    with telling_a_full_disk(f"{what} in {str(run_dir)!r}", run_dir, need, kept):
        yield
