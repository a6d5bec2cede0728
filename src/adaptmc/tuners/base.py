"""The tuner interface: what acts between super-transitions.

A `Tuner` is pure functions over an explicit state (Optax's shape). The state is a pytree of
arrays with a fixed structure (leaf shapes may grow), so a checkpoint stores it leaf by leaf,
without pickle, and restores it into the structure of ``init``'s state.

- ``init(key) -> state``
- ``propose(key, state) -> (proposal, state)``: ``proposal`` is a dict from parameter name
  (a field of the kernel's ``Params``, e.g. ``step_size``, ``num_leapfrog``) to a Python
  number; the run loop uses it for the next super-transition.
- ``update(state, proposal, reward, stats) -> state``: ``reward`` is the objective's value on
  that super-transition's draws (NaN when it diverged), ``stats`` a dict of summaries
  (``acceptance_rate``, ``divergences``, ``num_grads``, ``num_transitions``: steps over all
  chains) and the draws themselves
  (``positions: (chains, draws, dim)``, for tuners that estimate from them).
- ``best(state) -> proposal``: the setting to freeze on when adaptation stops.
- ``describe(state) -> dict`` (optional, None when absent): JSON-able facts of the tuner's
  configuration (box, surrogate hyperparameters, schedule; `adaptmc.tuners.describe`), which
  the run stores with its tuning record so that plots refit what the tuner fitted.
- ``done(state) -> bool`` (optional): the tuner has finished adapting (a stop rule,
  `adaptmc.tuners.stopping`); the run then freezes ``best`` at once, before its
  ``adapt_until``, and drops the super-transitions so freed (`adaptmc.run.run`).
- ``posterior(state) -> Posterior | None`` (optional): a bandit's belief about the reward
  over its box (`adaptmc.tuners.annealed.Posterior`), None before it has one; what a stop
  rule reads.

``names`` lists the parameters the tuner sets.

A wrapper is a function ``wrapper(inner: Tuner, **options) -> Tuner`` whose state is a dict
holding the inner tuner's state under ``"inner"`` and whose ``describe`` nests the inner
facts under ``"inner"``; `chain` composes wrappers, innermost first. The run reads ``done``
of the outermost tuner only: a stop rule is the last wrapper applied.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce
from typing import Any, NamedTuple


class Tuner(NamedTuple):
    name: str
    names: tuple[str, ...]
    init: Callable[[Any], Any]
    propose: Callable[[Any, Any], tuple[dict, Any]]
    update: Callable[[Any, dict, float, dict], Any]
    best: Callable[[Any], dict]
    describe: Callable[[Any], dict] | None = None
    done: Callable[[Any], bool] | None = None
    posterior: Callable[[Any], Any] | None = None


Wrapper = Callable[[Tuner], Tuner]
"""A tuner transformation, e.g. ``functools.partial(freeze, after=30)``."""


def chain(*wrappers: Wrapper) -> Wrapper:
    """``chain(w1, w2)(inner) == w2(w1(inner))``: apply ``wrappers`` innermost first (as Optax's
    ``chain`` applies transforms in order)."""
    return lambda inner: reduce(lambda tuner, wrap: wrap(tuner), wrappers, inner)


def describe_inner(inner: Tuner, inner_state: Any) -> dict | None:
    """``inner.describe(inner_state)``, or ``{"tuner": inner.name}`` when it has none."""
    if inner.describe is None:
        return {"tuner": inner.name}
    return inner.describe(inner_state)
