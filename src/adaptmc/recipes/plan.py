"""What a recipe returns: a `Plan`, exactly what `adaptmc.run.run` consumes besides the
run-level options (chains, seed, output folder), and the checks every plan passes before
anything runs or is written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from adaptmc import tuners
from adaptmc.kernels import Kernel
from adaptmc.tuners.base import Tuner

MIN_DRAWS = 4  # the fewest draws per super-transition an objective scores


class Prepared(NamedTuple):
    """What a plan's ``prepare`` step returns: the plan to run (its settings now measured
    on the target), the chains' starting positions ``(chains, dim)``, the gradients the
    preparation spent over all chains, and what it measured (JSON-able); states: None, or
    the chains' kernel states ``plan`` continues from (a trial's end, the kernel's own
    adapted state included), which then replace ``positions``."""

    plan: Any
    positions: np.ndarray
    num_grads: int
    record: dict
    states: Any = None


class Plan(NamedTuple):
    """What `adaptmc.run.run` consumes, besides chains, seed and the output folder.

    name: the recipe; kernel, params: the kernel and its starting ``Params``; tuner,
    objective: what sets the parameters between super-transitions and the reward it learns
    from (None: no reward); num_super_transitions, gradient_budget: the run's length and the
    gradients per chain of one super-transition; num_warmup: leading super-transitions whose
    draws are not kept; adapt_until: the super-transition from which the tuner's best setting
    is frozen (None: adapt throughout); box: the bandit's search box (None without a bandit);
    plot_skip: leading super-transitions the bandit never saw (its plots leave them out);
    options: the recipe's options as given, for the run's config; prepare: None, or
    ``prepare(target, positions (chains, dim), key) -> Prepared``, work done on the chains
    before the first super-transition (a warm-up whose measurements set the kernel's
    parameters, the tuner's box and the run's length); thin: keep every ``thin``-th draw;
    draws: None, or the kept draws per chain, exactly: the run goes on after its
    ``num_warmup`` super-transitions until each chain kept that many (its last
    super-transition cut short), ``num_super_transitions`` being only the planned length.
    """

    name: str
    kernel: Kernel
    params: Any
    tuner: Tuner
    objective: Callable | None
    num_super_transitions: int
    gradient_budget: int
    num_warmup: int
    adapt_until: int | None
    box: tuners.Box | None = None
    plot_skip: int = 0
    options: dict | None = None
    prepare: Callable | None = None
    thin: int = 1
    draws: int | None = None


def check_plan(plan: Plan) -> None:
    """Refuse a plan that cannot run as asked: counts out of range, a warm-up that leaves
    nothing to keep, a step costing more than a super-transition's budget."""
    for name in plan.tuner.names:
        if name not in plan.kernel.Params._fields:
            raise ValueError(f"tuner {plan.tuner.name!r} sets {name!r}, which kernel "
                             f"{plan.kernel.name!r} does not have (its parameters: "
                             f"{', '.join(plan.kernel.Params._fields)})")
    n = plan.num_super_transitions
    for label, value, low in (("super_transitions", n, 1), ("budget", plan.gradient_budget, 1),
                              ("warmup", plan.num_warmup, 0)):
        if int(value) != value or value < low:
            raise ValueError(f"{label} must be an integer >= {low}, got {value}")
    if plan.draws is not None and (isinstance(plan.draws, bool) or int(plan.draws) !=
                                   plan.draws or plan.draws < 1):
        raise ValueError(f"draws must be an integer >= 1 (kept draws per chain), got "
                         f"{plan.draws}")
    if plan.num_warmup >= n:
        raise ValueError(f"warmup ({plan.num_warmup}) must be smaller than super_transitions "
                         f"({n}): no draw would be kept")
    if plan.adapt_until is not None and not 0 <= plan.adapt_until <= n:
        raise ValueError(f"adapt_until must lie in [0, {n}] (the run's super-transitions), "
                         f"got {plan.adapt_until}")
    cost = plan.kernel.cost(plan.params)
    if cost > plan.gradient_budget:
        raise ValueError(f"one step of {plan.kernel.name} costs {cost} gradients, more than "
                         f"the budget of {plan.gradient_budget} per super-transition")


def sampling_length(draws: int, steps: int) -> int:
    """Super-transitions that keep ``draws`` draws per chain at ``steps`` kept draws each
    (the last one cut short): at least 1."""
    return max(1, -(-int(draws) // max(1, int(steps))))


def options_of(scope: dict) -> dict:
    """The JSON-able options a recipe was called with (for the run's config)."""
    out = {}
    for key, value in scope.items():
        if key in ("target", "made", "bandit_box", "params", "plot_skip", "reward"):
            continue
        if isinstance(value, Kernel):
            value = value.name
        elif isinstance(value, tuners.Box):
            value = {n: [float(lo), float(hi)] for n, lo, hi in
                     zip(value.names, value.lower, value.upper, strict=True)}
        elif callable(value):
            value = getattr(value, "__name__", repr(value))
        elif isinstance(value, np.ndarray):
            value = value.tolist()
        out[key] = value
    return out
