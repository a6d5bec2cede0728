"""Checks a run makes before anything is written: the objective called once on a probe,
the tuner's first proposal and box affordable within the budget, ``adapt_until`` in range."""

from __future__ import annotations

import itertools

import numpy as np

from adaptmc.kernels.base import Kernel
from adaptmc.run.plan import zero_key
from adaptmc.targets.base import Target
from adaptmc.tuners.base import Tuner


def check_adapt_until(adapt_until, num_super_transitions: int) -> None:
    if adapt_until is None:
        return
    if int(adapt_until) != adapt_until or not 0 <= adapt_until <= num_super_transitions:
        raise ValueError(f"adapt_until must be an integer in [0, {num_super_transitions}] (the "
                         f"run's super-transitions), got {adapt_until}")


def check_num_draws(num_draws) -> None:
    """``num_draws`` (kept draws per chain): None or an integer >= 1."""
    if num_draws is None:
        return
    if isinstance(num_draws, bool) or int(num_draws) != num_draws or num_draws < 1:
        raise ValueError(f"draws must be an integer >= 1 (kept draws per chain), got "
                         f"{num_draws}")


def check_objective(objective, num_chains: int, dim: int, step_cost: int) -> None:
    """Call ``objective`` once on a probe (zeros of shape ``(num_chains, 4, dim)``, zero
    statistics), before anything is written: an objective that raises or returns no number
    is one clear `ValueError` naming it."""
    if objective is None:
        return
    name = getattr(objective, "__name__", repr(objective))
    positions = np.zeros((num_chains, 4, dim))
    positions[:, 1::2] = 1.0  # something moved, so a reward is defined
    stats = {k: np.zeros((num_chains, 4)) for k in
             ("acceptance_rate", "accepted", "is_divergent", "energy_error", "num_grads")}
    stats["acceptance_rate"][:] = 1.0
    stats["accepted"][:] = 1.0
    try:
        float(objective(positions, stats, 4 * step_cost * num_chains))
    except Exception as err:  # noqa: BLE001 - user code: any failure is the user's to see
        raise ValueError(f"objective {name!r} failed on a probe of shape {positions.shape}: "
                         f"{type(err).__name__}: {err}") from err


def check_tuner(tuner: Tuner, kernel: Kernel, params, dim: int, gradient_budget: int,
                thin: int) -> None:
    """Before anything is written: the tuner's first proposal and every corner of its box
    (`Tuner.describe`) must be valid parameters whose step leaves at least one kept draw in
    a super-transition of ``gradient_budget`` gradients."""
    from adaptmc.tuners.describe import box_from_config, innermost

    key = zero_key()  # jax.random.key(0), with no program
    state = tuner.init(key)
    settings = [("its first proposal", tuner.propose(key, state)[0])]
    config = innermost(tuner.describe(state)) if tuner.describe is not None else None
    if config is not None and "box" in config:
        box = box_from_config(config["box"])
        for corner in itertools.product(*zip(box.lower, box.upper, strict=True)):
            where = ", ".join(f"{n}={float(v):g}" for n, v in zip(box.names, corner,
                                                                   strict=True))
            settings.append((f"its box corner ({where})",
                             dict(zip(box.names, corner, strict=True))))
    for label, proposal in settings:
        proposal = {k: v for k, v in proposal.items() if k in kernel.Params._fields}
        try:
            step_params = with_proposal(kernel, params, proposal, dim)
        except ValueError as err:
            raise ValueError(f"tuner {tuner.name!r}: {label} is not valid: {err}") from None
        cost = kernel.cost(step_params)
        if cost * thin > gradient_budget:
            raise ValueError(
                f"tuner {tuner.name!r}: at {label} one step costs {cost} gradients (thin "
                f"{thin}), more than the budget of {gradient_budget} per super-transition: "
                + ("lower the thinning, " if thin > 1 else "")
                + "raise the budget or narrow the box")


def with_proposal(kernel: Kernel, params, proposal: dict, dim: int):
    """``params`` with the tuner's proposal, integer tunables rounded, checked."""
    unknown = set(proposal) - set(kernel.Params._fields)
    if unknown:
        raise ValueError(f"tuner proposed unknown parameters {sorted(unknown)} for {kernel.name}")
    proposal = dict(proposal)
    for tunable in kernel.tunables:
        if tunable.integer and tunable.name in proposal:
            value = proposal[tunable.name]  # a vector of settings: a mixture kernel's
            proposal[tunable.name] = (int(round(value)) if np.ndim(value) == 0
                                      else np.round(value).astype(int))
    new = params._replace(**proposal)
    kernel.check_params(new, dim=dim)
    return new


def check_run_args(target, kernel, params, tuner, num_super_transitions, gradient_budget,
                   num_chains, num_warmup, checkpoint_every, thin) -> None:
    """The run's arguments: types, counts in range, a kept draw affordable."""
    if not isinstance(target, Target):
        raise TypeError(f"target must be a Target, got {type(target).__name__}")
    if not isinstance(params, kernel.Params):
        raise TypeError(
            f"params for kernel {kernel.name!r} must be {kernel.Params.__name__}, "
            f"got {type(params).__name__}"
        )
    kernel.check_params(params, dim=target.dim)
    for name in tuner.names:
        if name not in kernel.Params._fields:
            raise ValueError(
                f"tuner {tuner.name!r} sets {name!r}, which kernel {kernel.name!r} does not "
                f"have (its parameters: {', '.join(kernel.Params._fields)})"
            )
    for name, value, low in (
        ("num_super_transitions", num_super_transitions, 1),
        ("gradient_budget", gradient_budget, 1),
        ("num_chains", num_chains, 1),
        ("num_warmup", num_warmup, 0),
        ("checkpoint_every", checkpoint_every, 1),
        ("thin", thin, 1),
    ):
        if int(value) != value or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value}")
    if num_warmup >= num_super_transitions:
        raise ValueError("num_warmup must be smaller than num_super_transitions")
    if kernel.cost(params) * thin > gradient_budget:
        raise ValueError(
            f"one kept draw costs {kernel.cost(params) * thin} gradient evaluations (thin "
            f"{thin}), more than the gradient_budget {gradient_budget} of a super-transition"
        )
