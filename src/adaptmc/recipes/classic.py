"""The recipes made of a kernel, a tuner and at most a super-transition-level warm-up:

- `manual`: any kernel with any tuner (the command line's general form);
- `bandit_hmc`: the first README recipe (wave one): HMC with step-size jitter, a mass and
  step-size warm-up in super-transitions (`adaptmc.tuners.mass`: Stan-style doubling
  windows, bracketing on the acceptance rate), then a bandit (GP-UCB by default; Wang,
  Mohamed & de Freitas 2013) over ``(eps, L)`` in a fixed box, rewarded by ESJD / sqrt(L),
  frozen at its best setting by posterior mean after ``adapt_until`` super-transitions. It
  fails where the warm-up never reaches the posterior (BENCHMARKS.md): `adaptive_hmc` is
  its successor;
- `gradient_adaptive`: gadMALA / gadRWM (Titsias & Dellaportas 2019) adapting inside every
  step during warm-up, started from Hoffman & Gelman's (2014, Alg. 4) initial step, then
  frozen (or kept adapting with a decaying rate);
- `hmc_dual_averaging`: HMC with fixed ``L`` whose step size is dual-averaged after every
  step during warm-up (Hoffman & Gelman 2014, Alg. 5; the ``hmc-da`` kernel), then frozen;
- `hmc_grid`: the oracle of a grid of fixed settings after a mass warm-up, each run for one
  super-transition, then the best frozen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from adaptmc import tuners
from adaptmc.kernels import KERNELS, Kernel
from adaptmc.objectives import tolerating_divergences
from adaptmc.recipes.parts import (
    in_step_adaptation,
    initial_step,
    kernel_from_name,
    kernel_params,
    make_tuner,
    objective_from_name,
    with_mass_warmup,
)
from adaptmc.recipes.plan import Plan, check_plan, options_of, sampling_length
from adaptmc.targets.base import Target
from adaptmc.tuners import TUNERS, bandit_tuners


def manual(target: Target, *, kernel: str | Kernel = "hmc", tuner: str = "fixed",
           objective: str | Callable | None = "esjd", box: tuners.Box | dict | None = None,
           grid: dict | None = None, schedule: str | None = None,
           anneal_rate: float | None = None, target_accept: float = 0.8, warmup: int = 5,
           adapt_until: int | None = None, adapt_mass: str | None = None,
           mass_warmup: int | None = None, keep_adapting: float | None = None,
           max_divergence_rate: float = 0.0, super_transitions: int | None = None,
           budget: int = 1000, draws: int | None = None, seed: int = 0,
           name: str = "manual", **params: Any) -> Plan:
    """Any kernel (`adaptmc.kernels.KERNELS`) with any tuner (`adaptmc.tuners.TUNERS`): the
    command line's general form, and what the named recipes are made of.

    ``params``: the kernel's parameters (those its ``parameters`` declare, e.g.
    ``step_size``, ``num_leapfrog``); left out, the kernel's defaults, except the step of a
    kernel with an ``initial_step`` (gadMALA/gadRWM), which starts from Hoffman & Gelman's
    heuristic at the target's initial position (`adaptmc.adaptation.first_step`; from a
    posteriordb start, where gradients reach 1e5, ``h = 0.1`` rejects every proposal).
    Kernels that adapt inside every step (``adapts_in_step``) adapt during ``warmup`` and
    are then frozen, or, with ``keep_adapting``, go on with a learning rate decaying as
    ``(1 + t)^-keep_adapting``. ``adapt_mass`` (``"diag"`` or ``"dense"``) wraps the tuner
    in the mass-matrix warm-up of `adaptmc.tuners.mass` for the first ``mass_warmup``
    (default: all of ``warmup``) super-transitions; a bandit is warm-started from its
    terminal window. ``max_divergence_rate > 0``: a super-transition fails only when more
    than that fraction of its steps diverged (`adaptmc.tuners.tolerate_divergences`), for
    kernels whose divergences are rare numerical events of an exactly corrected step
    (RMHMC's and MSD's fixed points). The run's length: ``draws`` kept draws per chain after
    the ``warmup`` super-transitions, exactly (`sized`), or ``super_transitions``
    super-transitions (default 50), not both.
    """
    if not 0.0 <= max_divergence_rate < 1.0:
        raise ValueError(f"max_divergence_rate must be in [0, 1), got {max_divergence_rate}")
    options = options_of({**locals(), **params})
    kernel = kernel_from_name(kernel)
    values = starting_params(target, kernel, params, seed)
    made, bandit_box = make_tuner(tuner, kernel, budget=budget, box=box, grid=grid,
                                  schedule=schedule, anneal_rate=anneal_rate,
                                  step_size=params.get("step_size"),
                                  target_accept=target_accept)
    if (kernel.adapts_in_step and tuner == "fixed") or keep_adapting is not None:
        made = in_step_adaptation(kernel, keep_adapting)
        adapt_until = options["adapt_until"] = warmup if adapt_until is None else adapt_until
    plot_skip = 0
    if adapt_mass is not None:
        made, plot_skip = with_mass_warmup(made, kernel, target.dim, values, adapt_mass,
                                            warmup, mass_warmup, params.get("inverse_mass"),
                                            params.get("step_size"),
                                            warm_start=TUNERS[tuner].box)
    reward = objective_from_name(objective)
    if max_divergence_rate:
        made = tuners.tolerate_divergences(made, max_divergence_rate)
        reward = None if reward is None else tolerating_divergences(reward, max_divergence_rate)
    plan = sized(Plan(name, kernel, values, made, reward, 1, budget, warmup, adapt_until,
                      bandit_box, plot_skip, options), super_transitions, draws)
    check_plan(plan)
    return plan


def starting_params(target: Target, kernel: Kernel, params: dict, seed: int) -> Any:
    """The kernel's ``Params`` from ``params`` (None or left out: the kernel's default),
    checked; a kernel with an ``initial_step`` and no step given starts from Hoffman &
    Gelman's heuristic."""
    values = kernel_params(kernel, **params)
    kernel.check_params(values)
    if params.get("step_size") is None and kernel.initial_step is not None:
        values = values._replace(step_size=initial_step(target, kernel, seed))
    return values


def sized(plan: Plan, super_transitions: int | None, draws: int | None) -> Plan:
    """``plan`` with its length: ``draws`` kept draws per chain after its warm-up (planned
    at the starting setting's steps per super-transition; the run keeps exactly ``draws``
    whatever the tuner sets), else ``super_transitions`` (default 50). Both given is one
    clear error, before anything runs."""
    if draws is not None and super_transitions is not None:
        raise ValueError("give draws (kept draws per chain) or super_transitions, not both: "
                         "with draws the super-transitions follow")
    if draws is None:
        length = 50 if super_transitions is None else super_transitions
        return plan._replace(num_super_transitions=length)
    if isinstance(draws, bool) or int(draws) != draws or draws < 1:
        raise ValueError(f"draws must be an integer >= 1 (kept draws per chain), got {draws}")
    steps = plan.gradient_budget // max(1, plan.kernel.cost(plan.params))
    length = max(plan.num_warmup + sampling_length(draws, steps), plan.adapt_until or 0)
    return plan._replace(num_super_transitions=length, draws=int(draws))


def bandit_hmc(
    target: Target,
    *,
    tuner: str = "gp-ucb",
    metric: str = "diag",
    warmup: int = 30,
    mass_warmup: int = 10,
    adapt_until: int | None = 30,
    jitter: float = 0.2,
    objective: str | Callable = "esjd-sqrt-l",
    super_transitions: int | None = None,
    budget: int = 2000,
    draws: int | None = None,
    box: tuners.Box | dict | None = None,
    schedule: str | None = None,
    anneal_rate: float | None = None,
    step_size: float | None = None,
    seed: int = 0,
) -> Plan:
    """The README's main recipe: HMC with step-size jitter (Neal 2011, Sec. 5.4.2.2, so a
    fixed ``L`` cannot sit on a period of the dynamics); ``mass_warmup`` super-transitions of
    mass-matrix (``metric``: ``"diag"`` or ``"dense"``) and step-size warm-up; then the bandit
    ``tuner`` over ``(eps, L)`` in ``box`` (default `default_box`) rewarded by ``objective``
    (ESJD / sqrt(L), Wang, Mohamed & de Freitas 2013), warm-started by the warm-up's terminal
    window; the draws of the first ``warmup`` super-transitions are not kept, and from
    ``adapt_until`` on the bandit's best setting by posterior mean is frozen (None: it keeps
    adopting with annealed probability). Length: ``draws`` kept draws per chain, or
    ``super_transitions`` (default 80), as `manual`.
    """
    if tuner not in bandit_tuners():
        raise ValueError(f"bandit-hmc tunes with a bandit ({', '.join(bandit_tuners())}), "
                         f"not {tuner!r}")
    return manual(target, kernel="hmc", jitter=jitter, step_size=step_size, tuner=tuner,
                  objective=objective, box=box, schedule=schedule, anneal_rate=anneal_rate,
                  warmup=warmup, adapt_until=adapt_until, adapt_mass=metric,
                  mass_warmup=mass_warmup, super_transitions=_default(super_transitions,
                                                                      draws, 80),
                  budget=budget, draws=draws, seed=seed, name="bandit-hmc")


def gradient_adaptive(
    target: Target,
    *,
    kernel: str = "gadmala",
    warmup: int = 20,
    step_size: float | None = None,
    keep_adapting: float | None = None,
    super_transitions: int | None = None,
    budget: int = 1000,
    draws: int | None = None,
    seed: int = 0,
) -> Plan:
    """gadMALA or gadRWM (``kernel``: any of ``gadmala``, ``gadmala-diag``, ``gadrwm``, ...;
    Titsias & Dellaportas 2019): the proposal's factor adapts inside every step during
    ``warmup`` super-transitions, starting from ``L = h I`` with Hoffman & Gelman's initial
    ``h`` (unless ``step_size`` is given), then is frozen (or keeps adapting with a decaying
    rate, ``keep_adapting``). Length: ``draws`` kept draws per chain, or ``super_transitions``
    (default 40), as `manual`."""
    if not _gradient_adaptive(kernel):
        names = ", ".join(n for n, k in KERNELS.items() if _gradient_adaptive(k))
        raise ValueError(f"gradient-adaptive runs a kernel that adapts inside every step from "
                         f"Hoffman & Gelman's initial step ({names}), not {kernel!r}")
    return manual(target, kernel=kernel, step_size=step_size, tuner="fixed", objective=None,
                  warmup=warmup, keep_adapting=keep_adapting,
                  super_transitions=_default(super_transitions, draws, 40), budget=budget,
                  draws=draws, seed=seed, name="gradient-adaptive")


def hmc_dual_averaging(
    target: Target,
    *,
    num_leapfrog: int = 10,
    jitter: float = 0.2,
    target_accept: float = 0.65,
    warmup: int = 10,
    step_size: float | None = None,
    super_transitions: int | None = None,
    budget: int = 1000,
    draws: int | None = None,
    seed: int = 0,
) -> Plan:
    """HMC with ``num_leapfrog`` steps whose step size is dual-averaged after every step
    toward acceptance ``target_accept`` during ``warmup`` (Hoffman & Gelman 2014, Alg. 5; the
    kernel ``hmc-da``), then frozen at the averaged step. Length: ``draws`` kept draws per
    chain, or ``super_transitions`` (default 40), as `manual`."""
    if not 0.0 < target_accept < 1.0:
        raise ValueError(f"target_accept must lie in (0, 1), got {target_accept}")
    plan = manual(target, kernel="hmc-da", num_leapfrog=num_leapfrog, jitter=jitter,
                  step_size=step_size, tuner="fixed", objective=None, warmup=warmup,
                  super_transitions=_default(super_transitions, draws, 40), budget=budget,
                  draws=draws, seed=seed, name="hmc-da")
    params = plan.params._replace(target_acceptance=target_accept)
    return plan._replace(params=params, options={**plan.options, "target_accept": target_accept})


def hmc_grid(
    target: Target,
    *,
    grid: dict | None = None,
    metric: str = "diag",
    warmup: int = 10,
    mass_warmup: int | None = None,
    jitter: float = 0.2,
    objective: str | Callable = "esjd",
    super_transitions: int | None = None,
    budget: int = 1000,
    draws: int | None = None,
    seed: int = 0,
) -> Plan:
    """The oracle of a grid: after the mass warm-up, each point of ``grid`` (default ``L`` in
    1, 2, 4, ..., 64 at the warm-up's step size) runs one super-transition, then the point
    with the highest reward is frozen. The grid's super-transitions count as warm-up.
    Length: ``draws`` kept draws per chain, or ``super_transitions`` (default 40), as
    `manual`."""
    grid = {"num_leapfrog": [1, 2, 4, 8, 16, 32, 64]} if grid is None else dict(grid)
    num_points = int(np.prod([len(v) for v in grid.values()]))
    mass_warmup = warmup if mass_warmup is None else mass_warmup
    return manual(target, kernel="hmc", jitter=jitter, tuner="grid", grid=grid,
                  objective=objective, warmup=mass_warmup + num_points,
                  adapt_until=mass_warmup + num_points, adapt_mass=metric,
                  mass_warmup=mass_warmup,
                  super_transitions=_default(super_transitions, draws, 40), budget=budget,
                  draws=draws, seed=seed, name="hmc-grid")


def _gradient_adaptive(kernel: str | Kernel) -> bool:
    kernel = KERNELS.get(kernel) if isinstance(kernel, str) else kernel
    return kernel is not None and kernel.adapts_in_step and kernel.initial_step is not None


def _default(super_transitions: int | None, draws: int | None, default: int) -> int | None:
    """A recipe's ``super_transitions``: as given, else its ``default`` unless ``draws``
    sizes the run."""
    return default if super_transitions is None and draws is None else super_transitions


