"""The tuner interface: what acts between super-transitions.

A `Tuner` is four pure functions over an explicit state (Optax's shape). The state is a
pytree of arrays, so a checkpoint stores it leaf by leaf, without pickle.

- ``init(key) -> state``
- ``propose(key, state) -> (proposal, state)``: ``proposal`` is a dict from parameter name
  (a field of the kernel's ``Params``, e.g. ``step_size``, ``num_leapfrog``) to a Python
  number; the run loop uses it for the next super-transition.
- ``update(state, proposal, reward, stats) -> state``: ``reward`` is the objective's value on
  that super-transition's draws (NaN when it diverged), ``stats`` a dict of summaries
  (``acceptance_rate``, ``divergences``, ``num_grads``) and the draws themselves
  (``positions: (chains, draws, dim)``, for tuners that estimate from them).
- ``best(state) -> proposal``: the setting to freeze on when adaptation stops.

``names`` lists the parameters the tuner sets; ``min_cost_hint`` may give the smallest
``num_leapfrog`` it can propose (the run loop sizes its draw buffer from it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple


class Tuner(NamedTuple):
    name: str
    names: tuple[str, ...]
    init: Callable[[Any], Any]
    propose: Callable[[Any, Any], tuple[dict, Any]]
    update: Callable[[Any, dict, float, dict], Any]
    best: Callable[[Any], dict]
