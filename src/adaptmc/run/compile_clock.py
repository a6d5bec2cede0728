"""The seconds JAX spends compiling, from its own events.

JAX reports, through `jax.monitoring`, how long it traced each program to a jaxpr, lowered
it to an MLIR module and had XLA compile it (``jax._src.dispatch``'s three duration
events), for every program: the main ones, small helpers and the operations run eagerly
outside any ``jit``, each compiled on first use. `compile_seconds` keeps their running sum
in this process; its difference over a call is the compilation that call waited for,
whoever compiled it (adaptmc, BlackJAX, NumPyro). A program loaded from the persistent
compilation cache reports no compilation.
"""

from __future__ import annotations

COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration",
                  "/jax/core/compile/jaxpr_to_mlir_module_duration",
                  "/jax/core/compile/backend_compile_duration")

_TOTAL = [0.0]
_LISTENING: list[bool] = []


def _count(event: str, seconds: float, **kwargs) -> None:
    if event in COMPILE_EVENTS:
        _TOTAL[0] += seconds


def compile_seconds() -> float:
    """Seconds JAX has spent tracing, lowering and compiling in this process since the first
    call (which registers the listener: call it before the work to be measured)."""
    if not _LISTENING:
        import jax

        jax.monitoring.register_event_duration_secs_listener(_count)
        _LISTENING.append(True)
    return _TOTAL[0]
