"""The first thing ``import adaptmc`` does: when this process is the ``adaptmc`` command,
a Ctrl-C while its modules are imported (before `adaptmc.cli.main` runs and handles it)
prints one line, not a traceback, and is never dropped. Nothing else is imported here."""

import sys


def _quiet_hook(kind, value, traceback) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.stderr.write("\ninterrupted while starting: nothing was done\n")
        return
    sys.__excepthook__(kind, value, traceback)


def _send_dropped_interrupt_again(unraisable) -> None:
    """A Ctrl-C raised inside a callback whose exceptions Python drops (printed as
    "Exception ignored": importlib's module-lock weakref callback while the command's
    modules are imported) is sent again 50 ms later, outside it, so it stops the command
    instead of being lost; as `adaptmc.cli.interrupts.handle_sigint` does inside a
    garbage-collector callback."""
    if not isinstance(unraisable.exc_value, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)
        return
    import signal
    import threading

    again = threading.Timer(0.05, signal.pthread_kill,
                            (threading.main_thread().ident, signal.SIGINT))
    again.daemon = True  # a command that ends meanwhile is not held up
    again.start()


def quiet_interrupts_at_start() -> None:
    """When this process is the ``adaptmc`` command (not a library user's), a Ctrl-C that
    reaches the top while its modules are imported prints one line, not a traceback, and
    one raised where Python would drop it is raised again."""
    program = sys.argv[0].replace("\\", "/") if sys.argv else ""
    if program.endswith(("/adaptmc", "/adaptmc-lab", "adaptmc/__main__.py")):
        sys.excepthook = _quiet_hook
        sys.unraisablehook = _send_dropped_interrupt_again
