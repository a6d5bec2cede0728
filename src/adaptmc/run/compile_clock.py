"""The seconds JAX spends compiling, and what it compiled, from its own events.

JAX reports, through `jax.monitoring`, how long it traced each program to a jaxpr, lowered
it to an MLIR module and had XLA compile it (``jax._src.dispatch``'s three duration
events, each with the program's ``fun_name``), for every program: the main ones, small
helpers and the operations run eagerly outside any ``jit``, each compiled on first use.
`compile_seconds` keeps their running sum in this process; its difference over a call is
the compilation that call waited for, whoever compiled it (adaptmc, BlackJAX, NumPyro): the
events of the callers' threads, and for a program compiled alongside (in a thread of
`adaptmc.targets.base.compile_ahead`, whose own events are not waited for and not summed
there) the seconds a caller waited for it to finish.
`compile_events` keeps every event in order, so `census` can name each program a call
compiled and its trace, lower and compile seconds. A program loaded from the persistent
compilation cache reports its seconds as a compilation, and JAX's cache-hit event during
them marks it ``"cached"``, as does an executable loaded without its program traced
(`adaptmc.targets.executables`, its `LOAD_EVENT`: a compilation of its load's seconds).
Programs compiled in threads of their own while the run goes on
(`adaptmc.targets.base.compile_ahead`: traced and lowered in the caller's thread, compiled
in another) report their compilation from that thread: each event is kept with its thread,
and a program's events are paired within it.
"""

from __future__ import annotations

import threading

from adaptmc.targets.base import AHEAD_THREAD, AHEAD_WAITED
from adaptmc.targets.executables import LOAD_EVENT

COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration",
                  "/jax/core/compile/jaxpr_to_mlir_module_duration",
                  "/jax/core/compile/backend_compile_duration")
PHASES = dict(zip(COMPILE_EVENTS, ("trace_s", "lower_s", "compile_s"), strict=True))

_TOTAL = [0.0]
_EVENTS: list[tuple[str, str, float]] = []  # (phase, program name, seconds), in order
_THREADS: list[int] = []  # the thread of each event of `_EVENTS`
_LOCK = threading.Lock()  # both lists appended together
_LISTENING: list[bool] = []
CACHE_HIT = "/jax/compilation_cache/cache_hits"


def _count(event: str, seconds: float, **kwargs) -> None:
    if event == LOAD_EVENT:  # an executable loaded without its program traced
        _hit(CACHE_HIT)
        event = COMPILE_EVENTS[-1]
    if event in COMPILE_EVENTS:
        if threading.current_thread().name != AHEAD_THREAD:
            _TOTAL[0] += seconds
        name = str(kwargs.get("fun_name", "?"))  # "f" when traced, "jit(f)" after
        name = name[4:-1] if name.startswith("jit(") and name.endswith(")") else name
        with _LOCK:
            _THREADS.append(threading.get_ident())
            _EVENTS.append((PHASES[event], name, float(seconds)))


def _hit(event: str, **kwargs) -> None:
    if event == CACHE_HIT:  # within the backend compilation of the program it loads
        with _LOCK:
            _THREADS.append(threading.get_ident())
            _EVENTS.append(("cached", "", 0.0))


def _listen() -> None:
    if not _LISTENING:
        import jax

        jax.monitoring.register_event_duration_secs_listener(_count)
        jax.monitoring.register_event_listener(_hit)
        _LISTENING.append(True)


def compile_seconds() -> float:
    """Seconds this process's callers have waited for JAX's tracing, lowering and
    compiling since the first call (which registers the listener: call it before the work
    to be measured): their own threads' and their waits for programs compiled alongside."""
    _listen()
    return _TOTAL[0] + AHEAD_WAITED[0]


def compile_events() -> int:
    """How many compile events this process has seen: a mark for `census` (the first call
    registers the listener, as `compile_seconds` does)."""
    _listen()
    return len(_EVENTS)


def census(since: int = 0) -> list[dict]:
    """Every program compiled since the mark ``since`` (`compile_events`), in order: a dict
    ``{"name", "trace_s", "lower_s", "compile_s", "cached", "ahead"}`` per program given
    to XLA (a backend compilation, or ``cached``: loaded from the persistent cache), its
    trace and lowering the ones of the same name just before it in its thread; ``ahead``:
    compiled in another thread than the caller's (`adaptmc.targets.base.compile_ahead`),
    while the caller went on; a program traced or lowered only (found in memory, or
    compiled alongside: its tracing and lowering are the caller's) is one with
    ``compile_s`` 0."""
    caller = threading.get_ident()
    programs: list[dict] = []
    pending: dict[tuple[int, str], dict] = {}
    hit: set[int] = set()  # the threads whose next compilation is a cache load
    with _LOCK:
        events = list(zip(_EVENTS[since:], _THREADS[since:], strict=True))
    for (phase, name, seconds), thread in events:
        if phase == "cached":
            hit.add(thread)
            continue
        entry = pending.setdefault((thread, name), {
            "name": name, "trace_s": 0.0, "lower_s": 0.0, "compile_s": 0.0, "cached": False,
            "ahead": thread != caller})
        entry[phase] += seconds
        if phase == "compile_s":
            entry["cached"] = thread in hit
            hit.discard(thread)
            programs.append(pending.pop((thread, name)))
    return programs + list(pending.values())
