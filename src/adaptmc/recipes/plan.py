"""What a recipe returns: a `Plan`, exactly what `adaptmc.run.run` consumes besides the
run-level options (chains, seed, output folder), and the checks every plan passes before
anything runs or is written."""

from __future__ import annotations

import numpy as np

from adaptmc import tuners
from adaptmc.kernels import Kernel
from adaptmc.run.plan import Plan, Prepared

MIN_DRAWS = 4  # the fewest draws per super-transition an objective scores

__all__ = ["MIN_DRAWS", "Plan", "Prepared", "check_plan", "options_of", "sampling_length"]


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
