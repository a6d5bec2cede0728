"""Named samplers: the one place where kernel, parameters, tuner, objective and warm-up are
put together.

A recipe is a plain function ``recipe(target, **options) -> Plan``; a `Plan` is exactly what
`adaptmc.run.run` consumes besides the run-level options (chains, seed, output folder). The
command line (``adaptmc sample --recipe NAME``), the bench (a row per recipe) and every
experiment build their samplers here and nowhere else, so a bench row named after a recipe
runs that recipe.

- `adaptive_hmc`: the README's main recipe. HMC with step-size jitter; a warm-up that
  estimates the inverse mass matrix and a step size (`adaptmc.tuners.mass`: Stan-style
  doubling windows, bracketing on the acceptance rate); then a bandit (GP-UCB by default,
  Wang, Mohamed & de Freitas 2013) over ``(eps, L)`` rewarded by ESJD / sqrt(L), warm-started
  from the warm-up's last super-transitions, frozen at its best setting by posterior mean
  after ``adapt_until`` super-transitions.
- `gradient_adaptive`: gadMALA / gadRWM (Titsias & Dellaportas 2019) adapting inside every
  step during warm-up, started from Hoffman & Gelman's (2014, Alg. 4) initial step, then
  frozen (or kept adapting with a decaying rate).
- `hmc_dual_averaging`: HMC with fixed ``L`` whose step size is tuned by dual averaging
  between super-transitions (Hoffman & Gelman 2014, Alg. 5), after a mass warm-up.
- `hmc_grid`: the oracle of a grid of fixed settings, each run for one super-transition, then
  the best frozen.
- `manual`: any kernel with any tuner (the command line's general form).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from adaptmc import tuners
from adaptmc.kernels import KERNELS, Kernel, hmc
from adaptmc.objectives import OBJECTIVES
from adaptmc.spec import load_object
from adaptmc.targets.base import Target
from adaptmc.tuners.base import Tuner

BANDIT_TUNERS = ("gp-ucb", "parametric", "hedge", "sir", "random")
TUNER_CHOICES = ("fixed", "grid", *BANDIT_TUNERS, "dual-averaging")
MIN_DRAWS = 4  # the fewest draws per super-transition an objective scores


class Plan(NamedTuple):
    """What `adaptmc.run.run` consumes, besides chains, seed and the output folder.

    name: the recipe; kernel, params: the kernel and its starting ``Params``; tuner,
    objective: what sets the parameters between super-transitions and the reward it learns
    from (None: no reward); num_super_transitions, gradient_budget: the run's length and the
    gradients per chain of one super-transition; num_warmup: leading super-transitions whose
    draws are not kept; adapt_until: the super-transition from which the tuner's best setting
    is frozen (None: adapt throughout); box: the bandit's search box (None without a bandit);
    plot_skip: leading super-transitions the bandit never saw (its plots leave them out);
    options: the recipe's options as given, for the run's config.
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


def hmc_box(step_size: tuple[float, float] = (0.01, 1.0),
            num_leapfrog: tuple[int, int] = (1, 100), log: bool = False) -> tuners.Box:
    """The box over HMC's ``(step_size, num_leapfrog)``; defaults ``[0.01, 1] x [1, 100]``
    (stable steps for smallest scales of about 0.005 to 0.5, Neal 2011, Sec. 4.2);
    ``log=True`` searches both in log scale."""
    return tuners.make_box({"step_size": step_size, "num_leapfrog": num_leapfrog},
                           integer=("num_leapfrog",),
                           log=("step_size", "num_leapfrog") if log else ())


def objective_from_name(spec: str | Callable | None) -> Callable | None:
    """A built-in objective by name (`adaptmc.objectives.OBJECTIVES`), a ``module:function``
    reward, a callable (returned as is) or None."""
    if spec is None or callable(spec):
        return spec
    if spec in OBJECTIVES:
        return OBJECTIVES[spec]
    if ":" not in spec:
        raise ValueError(f"unknown objective {spec!r}; choose one of {', '.join(OBJECTIVES)} "
                         "or give module:function")
    return load_object(spec, "objective")


def kernel_from_name(kernel: str | Kernel) -> Kernel:
    if isinstance(kernel, Kernel):
        return kernel
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; choose one of {', '.join(sorted(KERNELS))}")
    return KERNELS[kernel]


def kernel_params(kernel: Kernel, **overrides) -> Any:
    """The kernel's ``Params`` with the given fields replaced (None leaves the default);
    a field the kernel does not have is a `ValueError`."""
    fields = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(fields) - set(kernel.Params._fields))
    if unknown:
        verb = "does" if len(unknown) == 1 else "do"
        raise ValueError(f"{', '.join(unknown)} {verb} not apply to kernel {kernel.name!r} "
                         f"(its parameters: {', '.join(kernel.Params._fields)})")
    return kernel.Params(**fields)


def default_box(kernel: Kernel, budget: int) -> tuners.Box:
    """A bandit's default box for ``kernel``: HMC's `hmc_box` with ``L`` capped so that a
    super-transition holds at least `MIN_DRAWS` draws; other kernels: step size in
    ``[0.01, 1]``."""
    if kernel.name != hmc.name:
        return tuners.make_box({"step_size": (0.01, 1.0)})
    top = 100 if budget >= MIN_DRAWS * 100 else max(2, budget // MIN_DRAWS)
    return hmc_box(num_leapfrog=(1, top))


def make_bandit(name: str, box: tuners.Box, schedule: str | None = None,
                anneal_rate: float | None = None) -> Tuner:
    """A bandit tuner of `BANDIT_TUNERS` over ``box`` with an adoption schedule (None: the
    tuner's own default; see `adaptmc.tuners.SCHEDULES`)."""
    if anneal_rate is not None and schedule is None:
        raise ValueError("an anneal rate needs a schedule (exp, poly, geometric or constant)")
    made = None
    if schedule is not None:
        if schedule not in tuners.SCHEDULES:
            raise ValueError(f"unknown schedule {schedule!r}; choose one of "
                             f"{', '.join(tuners.SCHEDULES)}")
        make = tuners.SCHEDULES[schedule]
        made = make() if anneal_rate is None else make(anneal_rate)
    if name == "random":
        return tuners.random_search(box, schedule=made)
    bandits = {"gp-ucb": tuners.gp_ucb, "parametric": tuners.parametric,
               "hedge": tuners.hedge, "sir": tuners.sir}
    if name not in bandits:
        raise ValueError(f"unknown bandit {name!r}; choose one of {', '.join(BANDIT_TUNERS)}")
    return bandits[name](box, schedule=made)


def make_tuner(name: str, kernel: Kernel, *, budget: int, box: tuners.Box | dict | None = None,
               grid: dict | None = None, schedule: str | None = None,
               anneal_rate: float | None = None, step_size: float | None = None,
               target_accept: float = 0.8) -> tuple[Tuner, tuners.Box | None]:
    """The tuner named ``name`` (`TUNER_CHOICES`) and its box (None for non-bandits).

    ``box`` is a `Box` or ``{name: (low, high)}`` overriding the kernel's default box;
    ``grid`` maps parameter names to the values of the grid tuner."""
    if grid and name != "grid":
        raise ValueError("a grid needs the grid tuner")
    if name in BANDIT_TUNERS:
        bandit_box = _bandit_box(kernel, budget, box)
        return make_bandit(name, bandit_box, schedule, anneal_rate), bandit_box
    if box is not None or schedule is not None or anneal_rate is not None:
        raise ValueError(f"a box and a schedule apply to bandit tuners "
                         f"({', '.join(BANDIT_TUNERS)}), not {name!r}")
    if name == "fixed":
        return tuners.fixed(), None
    if name == "grid":
        if not grid:
            raise ValueError("the grid tuner needs values, e.g. {'num_leapfrog': [5, 10]}")
        return tuners.grid(grid), None
    if name == "dual-averaging":
        start = 0.1 if step_size is None else step_size
        return tuners.dual_averaging_tuner(start, target_accept=target_accept), None
    raise ValueError(f"unknown tuner {name!r}; choose one of {', '.join(TUNER_CHOICES)}")


def _bandit_box(kernel: Kernel, budget: int, box) -> tuners.Box:
    default = default_box(kernel, budget)
    if isinstance(box, tuners.Box):
        result = box
    else:
        bounds = dict(zip(default.names, zip(default.lower, default.upper, strict=True),
                          strict=True))
        bounds.update(box or {})
        integer = tuple(n for n, flag in zip(default.names, default.integer, strict=True)
                        if flag)
        result = tuners.make_box(bounds, integer=tuple(n for n in integer if n in bounds))
    if "num_leapfrog" in result.names:
        top = result.upper[result.names.index("num_leapfrog")]
        if top > budget:
            raise ValueError(f"the box's num_leapfrog reaches {int(top)}, more than the "
                             f"budget of {budget} gradients of a super-transition")
    return result


def manual(
    target: Target,
    *,
    kernel: str | Kernel = "hmc",
    step_size: float | None = None,
    num_leapfrog: int | None = None,
    refresh_angle: float | None = None,
    jitter: float | None = None,
    inverse_mass: Any = None,
    tuner: str = "fixed",
    objective: str | Callable | None = "esjd",
    box: tuners.Box | dict | None = None,
    grid: dict | None = None,
    schedule: str | None = None,
    anneal_rate: float | None = None,
    target_accept: float = 0.8,
    warmup: int = 5,
    adapt_until: int | None = None,
    adapt_mass: str | None = None,
    mass_warmup: int | None = None,
    keep_adapting: float | None = None,
    super_transitions: int = 50,
    budget: int = 1000,
    seed: int = 0,
    name: str = "manual",
) -> Plan:
    """Any kernel (`adaptmc.kernels.KERNELS`) with any tuner (`TUNER_CHOICES`): the
    command line's general form, and what the named recipes are made of.

    Kernel parameters left None keep the kernel's defaults, except gadMALA/gadRWM's step,
    which starts from Hoffman & Gelman's heuristic at the target's initial position
    (`adaptmc.kernels.gradient_adaptive.initial_step_size`; from a posteriordb start, where
    gradients reach 1e5, ``h = 0.1`` rejects every proposal). Kernels that adapt inside every
    step (an ``adapt`` parameter) adapt during ``warmup`` and are then frozen, or, with
    ``keep_adapting`` (gadMALA/gadRWM), go on with a learning rate decaying as
    ``(1 + t)^-keep_adapting``. ``adapt_mass`` (``"diag"`` or ``"dense"``) wraps the tuner
    in the mass-matrix warm-up of `adaptmc.tuners.mass` for the first ``mass_warmup``
    (default: all of ``warmup``) super-transitions; a bandit is warm-started from its
    terminal window.
    """
    kernel = kernel_from_name(kernel)
    params = kernel_params(kernel, step_size=step_size, num_leapfrog=num_leapfrog,
                           refresh_angle=refresh_angle, jitter=jitter, inverse_mass=inverse_mass)
    kernel.check_params(params)
    if step_size is None and kernel.name.startswith(("gadmala", "gadrwm")):
        params = params._replace(step_size=_initial_step(target, kernel, seed))
    made, bandit_box = make_tuner(tuner, kernel, budget=budget, box=box, grid=grid,
                                  schedule=schedule, anneal_rate=anneal_rate,
                                  step_size=step_size, target_accept=target_accept)
    if ("adapt" in kernel.Params._fields and tuner == "fixed") or keep_adapting is not None:
        made = in_step_adaptation(kernel, keep_adapting)
        adapt_until = warmup if adapt_until is None else adapt_until
    plot_skip = 0
    if adapt_mass is not None:
        made, plot_skip = _with_mass_warmup(made, kernel, target.dim, params, adapt_mass,
                                            warmup, mass_warmup, inverse_mass, step_size,
                                            warm_start=tuner in BANDIT_TUNERS)
    plan = Plan(name, kernel, params, made, objective_from_name(objective), super_transitions,
                budget, warmup, adapt_until, bandit_box, plot_skip, _options(locals()))
    check_plan(plan)
    return plan


def adaptive_hmc(
    target: Target,
    *,
    tuner: str = "gp-ucb",
    metric: str = "diag",
    warmup: int = 30,
    mass_warmup: int = 10,
    adapt_until: int | None = 30,
    jitter: float = 0.2,
    objective: str | Callable = "esjd-sqrt-l",
    super_transitions: int = 80,
    budget: int = 2000,
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
    adopting with annealed probability).
    """
    if tuner not in BANDIT_TUNERS:
        raise ValueError(f"adaptive-hmc tunes with a bandit ({', '.join(BANDIT_TUNERS)}), "
                         f"not {tuner!r}")
    return manual(target, kernel="hmc", jitter=jitter, step_size=step_size, tuner=tuner,
                  objective=objective, box=box, schedule=schedule, anneal_rate=anneal_rate,
                  warmup=warmup, adapt_until=adapt_until, adapt_mass=metric,
                  mass_warmup=mass_warmup, super_transitions=super_transitions, budget=budget,
                  seed=seed, name="adaptive-hmc")


def gradient_adaptive(
    target: Target,
    *,
    kernel: str = "gadmala",
    warmup: int = 20,
    step_size: float | None = None,
    keep_adapting: float | None = None,
    super_transitions: int = 40,
    budget: int = 1000,
    seed: int = 0,
) -> Plan:
    """gadMALA or gadRWM (``kernel``: any of ``gadmala``, ``gadmala-diag``, ``gadrwm``, ...;
    Titsias & Dellaportas 2019): the proposal's factor adapts inside every step during
    ``warmup`` super-transitions, starting from ``L = h I`` with Hoffman & Gelman's initial
    ``h`` (unless ``step_size`` is given), then is frozen (or keeps adapting with a decaying
    rate, ``keep_adapting``)."""
    if not kernel.startswith(("gadmala", "gadrwm")):
        raise ValueError(f"gradient-adaptive runs gadmala* or gadrwm* kernels, not {kernel!r}")
    return manual(target, kernel=kernel, step_size=step_size, tuner="fixed", objective=None,
                  warmup=warmup, keep_adapting=keep_adapting,
                  super_transitions=super_transitions, budget=budget, seed=seed,
                  name="gradient-adaptive")


def hmc_dual_averaging(
    target: Target,
    *,
    num_leapfrog: int = 10,
    jitter: float = 0.2,
    target_accept: float = 0.65,
    warmup: int = 10,
    step_size: float | None = None,
    super_transitions: int = 40,
    budget: int = 1000,
    seed: int = 0,
) -> Plan:
    """HMC with ``num_leapfrog`` steps whose step size is dual-averaged after every step
    toward acceptance ``target_accept`` during ``warmup`` (Hoffman & Gelman 2014, Alg. 5; the
    kernel ``hmc-da``), then frozen at the averaged step."""
    if not 0.0 < target_accept < 1.0:
        raise ValueError(f"target_accept must lie in (0, 1), got {target_accept}")
    plan = manual(target, kernel="hmc-da", num_leapfrog=num_leapfrog, jitter=jitter,
                  step_size=step_size, tuner="fixed", objective=None, warmup=warmup,
                  super_transitions=super_transitions, budget=budget, seed=seed,
                  name="hmc-da")
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
    super_transitions: int = 40,
    budget: int = 1000,
    seed: int = 0,
) -> Plan:
    """The oracle of a grid: after the mass warm-up, each point of ``grid`` (default ``L`` in
    1, 2, 4, ..., 64 at the warm-up's step size) runs one super-transition, then the point
    with the highest reward is frozen. The grid's super-transitions count as warm-up."""
    grid = {"num_leapfrog": [1, 2, 4, 8, 16, 32, 64]} if grid is None else dict(grid)
    num_points = int(np.prod([len(v) for v in grid.values()]))
    mass_warmup = warmup if mass_warmup is None else mass_warmup
    return manual(target, kernel="hmc", jitter=jitter, tuner="grid", grid=grid,
                  objective=objective, warmup=mass_warmup + num_points,
                  adapt_until=mass_warmup + num_points, adapt_mass=metric,
                  mass_warmup=mass_warmup, super_transitions=super_transitions, budget=budget,
                  seed=seed, name="hmc-grid")


RECIPES: dict[str, Callable[..., Plan]] = {
    "adaptive-hmc": adaptive_hmc,
    "gradient-adaptive": gradient_adaptive,
    "hmc-da": hmc_dual_averaging,
    "hmc-grid": hmc_grid,
    "manual": manual,
}


def get_recipe(name: str) -> Callable[..., Plan]:
    if name not in RECIPES:
        raise ValueError(f"unknown recipe {name!r}; choose one of {', '.join(RECIPES)}")
    return RECIPES[name]


def recipe_options(name: str) -> tuple[str, ...]:
    """The keyword options recipe ``name`` takes (besides the target)."""
    signature = inspect.signature(get_recipe(name))
    return tuple(p for p in signature.parameters if p not in ("target", "name"))


def build(name: str, target: Target, **options) -> Plan:
    """``RECIPES[name](target, **options)``, refusing options the recipe does not take."""
    allowed = recipe_options(name)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"recipe {name!r} does not take {', '.join(unknown)} "
                         f"(its options: {', '.join(allowed)})")
    return get_recipe(name)(target, **options)


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


def in_step_adaptation(kernel: Kernel, keep_adapting: float | None) -> Tuner:
    """For kernels that adapt inside every step: adapt during warm-up, then freeze
    (``adapt = 0``) or, with ``keep_adapting``, go on with a decaying learning rate."""
    from adaptmc.tuners.warmup import switch_after_warmup

    if keep_adapting is None:
        return switch_after_warmup()
    if "lr_decay" not in kernel.Params._fields:
        raise ValueError(f"keep_adapting does not apply to kernel {kernel.name!r}")
    return switch_after_warmup({"adapt": 1.0, "lr_decay": 0.0},
                               {"adapt": 1.0, "lr_decay": float(keep_adapting)})


def _initial_step(target: Target, kernel: Kernel, seed: int) -> float:
    from adaptmc.kernels.gradient_adaptive import initial_step_size

    proposal = "mala" if kernel.name.startswith("gadmala") else "rwm"
    return initial_step_size(jax.random.key(seed), target, target.initial_position,
                             proposal=proposal)


def _with_mass_warmup(tuner: Tuner, kernel: Kernel, dim: int, params: Any, metric: str,
                      warmup: int, mass_warmup: int | None, inverse_mass: Any,
                      step_size: float | None, warm_start: bool) -> tuple[Tuner, int]:
    """``tuner`` wrapped in the mass-matrix warm-up; returns it and the number of leading
    super-transitions the inner tuner never sees."""
    from adaptmc.tuners.mass import mass_adaptation, terminal_length

    if metric not in ("diag", "dense"):
        raise ValueError(f"metric must be 'diag' or 'dense', got {metric!r}")
    if "inverse_mass" not in kernel.Params._fields:
        raise ValueError(f"mass adaptation does not apply to kernel {kernel.name!r}")
    if inverse_mass is not None:
        raise ValueError("mass adaptation and a given inverse mass exclude each other")
    mass_warmup = warmup if mass_warmup is None else mass_warmup
    if mass_warmup > warmup:
        raise ValueError(f"mass_warmup ({mass_warmup}) cannot exceed warmup ({warmup})")
    wrapped = mass_adaptation(tuner, dim, mass_warmup, dense=metric == "dense",
                              initial_step_size=0.1 if step_size is None else step_size,
                              warm_start=warm_start)
    return wrapped, mass_warmup - (terminal_length(mass_warmup) if warm_start else 0)


def _options(scope: dict) -> dict:
    """The JSON-able options a recipe was called with (for the run's config)."""
    out = {}
    for key, value in scope.items():
        if key in ("target", "made", "bandit_box", "params", "plot_skip"):
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
