"""The first thing ``import adaptmc`` does: when this process is the ``adaptmc`` command,
a Ctrl-C while its modules are imported (before `adaptmc.cli.main` runs and handles it)
prints one line, not a traceback. Nothing else is imported here."""

import sys


def _quiet_hook(kind, value, traceback) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.stderr.write("\ninterrupted while starting: nothing was done\n")
        return
    sys.__excepthook__(kind, value, traceback)


def quiet_interrupts_at_start() -> None:
    """When this process is the ``adaptmc`` command (not a library user's), a Ctrl-C that
    reaches the top while its modules are imported prints one line, not a traceback."""
    program = sys.argv[0].replace("\\", "/") if sys.argv else ""
    if program.endswith(("/adaptmc", "/adaptmc-lab", "adaptmc/__main__.py")):
        sys.excepthook = _quiet_hook
