"""Building blocks of the recipes: kernels and their parameters by name, objectives by
name, bandit boxes, tuners by name, the in-step adaptation switch and the mass warm-up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from adaptmc import tuners
from adaptmc.kernels import KERNELS, Kernel
from adaptmc.objectives import OBJECTIVES
from adaptmc.recipes.plan import MIN_DRAWS
from adaptmc.spec import load_object
from adaptmc.targets.base import Target
from adaptmc.tuners import TUNERS, bandit_tuners
from adaptmc.tuners.base import Tuner


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
        return OBJECTIVES[spec].reward
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
    """A bandit's default box for ``kernel``: the default bounds its tunables declare
    (`adaptmc.tuners.box_from_tunables`; HMC's are `hmc_box`'s), a ``cost_factor`` tunable
    (HMC's ``L``) capped so that a super-transition of ``budget`` gradients holds at least
    `MIN_DRAWS` draws."""
    tunables = [t for t in kernel.tunables if t.bounds is not None]
    if not tunables:
        raise ValueError(f"kernel {kernel.name!r} declares no tunable parameter with a "
                         "default box; give the box")
    capped = {t.name: (t.bounds[0], _capped(t.bounds[1], budget)) for t in tunables
              if t.cost_factor}
    return tuners.box_from_tunables(tunables, bounds=capped)


def _capped(top: float, budget: int) -> float:
    return top if budget >= MIN_DRAWS * top else max(2, budget // MIN_DRAWS)


def make_bandit(name: str, box: tuners.Box, schedule: str | None = None,
                anneal_rate: float | None = None, initial: dict | None = None,
                moving: bool = True, extend_after: int | None = None,
                limits: dict | None = None, options: dict | None = None) -> Tuner:
    """A bandit of `adaptmc.tuners.TUNERS` (a tuner that searches a box) over ``box`` with an
    adoption schedule (None: the tuner's own default; see `adaptmc.tuners.SCHEDULES`),
    starting from ``initial`` (None: the policy's own first draw; random search always
    draws). With ``moving`` and a positive
    ``step_size`` range, the box is a `adaptmc.tuners.moving_box`: while every setting tried
    has failed, the step's range shrinks below the smallest failure; after ``extend_after``
    updates (None: never) an edge holding the best setting extends, within ``limits``.
    ``options``: the policy's own keywords (e.g. `adaptmc.tuners.gp_ucb`'s ``noise_var``)."""
    if moving and "step_size" in box.names and box.lower[box.names.index("step_size")] > 0:
        return tuners.moving_box(
            lambda moved, first: make_bandit(name, moved, schedule, anneal_rate, first,
                                             moving=False, options=options),
            box, initial=initial, extend_after=extend_after, limits=limits)
    if anneal_rate is not None and schedule is None:
        raise ValueError("an anneal rate needs a schedule (exp, poly, geometric or constant)")
    made = None
    if schedule is not None:
        if schedule not in tuners.SCHEDULES:
            raise ValueError(f"unknown schedule {schedule!r}; choose one of "
                             f"{', '.join(tuners.SCHEDULES)}")
        make = tuners.SCHEDULES[schedule]
        made = make() if anneal_rate is None else make(anneal_rate)
    if name not in bandit_tuners():
        raise ValueError(f"unknown bandit {name!r}; choose one of {', '.join(bandit_tuners())}")
    return TUNERS[name].make(box, schedule=made, initial=initial, **(options or {}))


def make_tuner(name: str, kernel: Kernel, *, budget: int, box: tuners.Box | dict | None = None,
               grid: dict | None = None, schedule: str | None = None,
               anneal_rate: float | None = None, step_size: float | None = None,
               target_accept: float = 0.8) -> tuple[Tuner, tuners.Box | None]:
    """The tuner named ``name`` (`adaptmc.tuners.TUNERS`) and its box (None for those that
    search none).

    ``box`` is a `Box` or ``{name: (low, high)}`` overriding the kernel's default box;
    ``grid`` maps parameter names to the values of the grid tuner."""
    if name not in TUNERS:
        raise ValueError(f"unknown tuner {name!r}; choose one of {', '.join(TUNERS)}")
    if grid and name != "grid":
        raise ValueError("a grid needs the grid tuner")
    if TUNERS[name].box:
        bandit_box = _bandit_box(kernel, budget, box)
        return make_bandit(name, bandit_box, schedule, anneal_rate), bandit_box
    if box is not None or schedule is not None or anneal_rate is not None:
        raise ValueError(f"a box and a schedule apply to bandit tuners "
                         f"({', '.join(bandit_tuners())}), not {name!r}")
    settings = {"grid": grid, "step_size": step_size, "target_accept": target_accept}
    return TUNERS[name].make(settings), None


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


def initial_step(target: Target, kernel: Kernel, seed: int) -> float:
    """The first step of a kernel with an ``initial_step`` proposal (gadMALA, gadRWM) from
    Hoffman & Gelman's heuristic at the target's initial position."""
    from adaptmc.kernels.gradient_adaptive import initial_step_size

    return initial_step_size(jax.random.key(seed), target, target.initial_position,
                             proposal=kernel.initial_step)


def with_mass_warmup(tuner: Tuner, kernel: Kernel, dim: int, params: Any, metric: str,
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


