"""The recipes' options, declared once (`adaptmc.options.Option`): the adaptive recipes', and
`manual`'s, among them options generated from the dicts where things are declared: a flag per
parameter the kernels declare (`adaptmc.kernels.base.Param` in `adaptmc.kernels.KERNELS`),
the ``--tuner`` choices and help from `adaptmc.tuners.TUNERS`, the ``--objective`` help from
`adaptmc.objectives.OBJECTIVES`. They are generated when asked for, so a kernel or tuner
registered in those dicts is a flag and a choice at once.
"""

from __future__ import annotations

from collections.abc import Mapping

from adaptmc.options import (
    ADAPTIVE,
    MANUAL,
    RUN_OPTIONS,
    Option,
    OptionError,
    count_option,
    show_value,
)

NAMED_KERNELS = 5
DRAWS_HELP = ("kept draws per chain after warm-up and tuning, exactly (default 1000 here; "
              "the other recipes run --super-transitions unless it is given)")


def _kernel_object(value):
    if not hasattr(value, "Params"):
        raise OptionError("kernel", f"must be a kernel's name or an adaptmc Kernel, got "
                          f"{show_value(value)}")


def _number_or_callable(name):
    def check(value):
        if not (isinstance(value, str) or callable(value)):
            raise OptionError(name, f"must be a name or a function, got {show_value(value)}")
    return check


def _tuners() -> tuple:
    from adaptmc.tuners import TUNERS

    return tuple(TUNERS)


def _kernels() -> tuple:
    from adaptmc.kernels import KERNELS

    return tuple(sorted(KERNELS))


ADAPTIVE_OPTIONS: tuple[Option, ...] = (
    Option("metric", "choice", "the metric (auto: dense or low-rank-plus-diagonal when the "
           "warm-up's draws are strongly correlated)",
           choices=("auto", "diag", "dense", "low-rank"), group=ADAPTIVE),
    count_option("warmup_steps", "NUTS warm-up transitions per chain (default 500)", low=150,
                 high=10**7, group=ADAPTIVE),
    count_option("tuning", "HMC tuning super-transitions (default: a tenth of the "
                 "sampling, <= 12)", low=0, high=10**6, group=ADAPTIVE),
    Option("nuts", "choice", "choose: NUTS samples if it beats tuned HMC",
           choices=("choose", "always", "off"), group=ADAPTIVE),
    Option("mams", "choice", "auto: MAMS samples after the warm-up if dim >= 3",
           choices=("auto", "off", "on"), group=ADAPTIVE),
    Option("stop_rule", "choice", "what may end tuning early (default ei)",
           choices=("ucb-lcb", "ucb", "ei"), group=ADAPTIVE),
    Option("stop_tolerance", "float", "the stop rule's threshold (default: from the run's "
           "length; 0: off)", low=0.0, high=1e6,
           metavar="FRACTION", group=ADAPTIVE),
    count_option("draws", DRAWS_HELP, group=ADAPTIVE),
    count_option("audition", "adaptive-portfolio: frozen super-transitions scoring each trial "
                 "(default 4)", high=10**6, group=ADAPTIVE),
)

MANUAL_OPTIONS: tuple[Option, ...] = (
    count_option("super_transitions", "number of super-transitions", group=MANUAL),
    count_option("budget", "gradients per chain per super-transition (S)", group=MANUAL),
    count_option("warmup", "warm-up super-transitions (draws not kept)", low=0, group=MANUAL),
    count_option("adapt_until", "freeze the tuner's best setting after this many "
                 "super-transitions", low=0, group=MANUAL),
    Option("grid", "value", "values of the grid tuner, e.g. --grid step_size=0.1,0.2 "
           "(repeatable)", metavar="NAME=V1,V2,...", group=MANUAL),
    Option("box", "value", "a bandit's search box, e.g. --box step_size=0.01:1 "
           "(repeatable)", metavar="NAME=LOW:HIGH", group=MANUAL),
    Option("schedule", "choice", "a bandit's adoption-probability schedule",
           choices=("exp", "poly", "geometric", "constant"), group=MANUAL),
    Option("anneal_rate", "float", "the schedule's parameter (exp 0.05, poly 0.5, "
           "geometric 0.99, constant 1)", low=0.0, high=1e3, group=MANUAL),
    Option("target_accept", "float", "target acceptance rate of dual averaging",
           low=0.0, high=1.0, open="both", group=MANUAL),
    Option("max_divergence_rate", "float", "a super-transition fails only when more than "
           "this fraction of its steps diverged (default 0)", low=0.0, high=1.0,
           open="high", group=MANUAL),
    Option("adapt_mass", "choice", "estimate the inverse mass during the warm-up",
           choices=("diag", "dense"), group=MANUAL),
    count_option("mass_warmup", "super-transitions of mass adaptation (default: all of "
                 "--warmup)", low=0, group=MANUAL),
)


def recipe_declarations() -> tuple[Option, ...]:
    """The recipes' options: the adaptive recipes', then the kernel, its parameters (from
    every kernel's declaration in `adaptmc.kernels.KERNELS`), the tuner and objective (from
    `adaptmc.tuners.TUNERS` and `adaptmc.objectives.OBJECTIVES`) and the rest of `manual`'s.
    Built when asked for, so a kernel or tuner registered in those dicts is declared."""
    from adaptmc.kernels import KERNELS
    from adaptmc.objectives import OBJECTIVES
    from adaptmc.tuners import TUNERS

    kernel = Option("kernel", "choice", "the kernel", choices=_kernels, group=MANUAL,
                    check=_kernel_object)
    keep = Option("keep_adapting", "float", "keep adapting after the warm-up, the learning "
                  "rate decaying as (1 + t)^-DECAY", low=0.0, high=1.0, metavar="DECAY",
                  group=MANUAL)
    tuner = Option("tuner", "choice", "the tuner, between super-transitions: "
                   + _entries(TUNERS), choices=_tuners, group=MANUAL)
    objective = Option("objective", "value", "the bandit's reward: " + _entries(OBJECTIVES)
                       + "; predictive: held-out log predictive density (--heldout); or "
                       "module:function", metavar="NAME", group=MANUAL,
                       check=_number_or_callable("objective"))
    fixed = (*RUN_OPTIONS, *ADAPTIVE_OPTIONS, kernel, keep, tuner, objective, *MANUAL_OPTIONS)
    params = kernel_declarations(KERNELS)
    clash = sorted({o.name for o in params} & {o.name for o in fixed})
    if clash:
        raise TypeError(f"kernel parameters {clash} have the names of options")
    return (*ADAPTIVE_OPTIONS, kernel, keep, *params, tuner, objective, *MANUAL_OPTIONS)


def _entries(named: Mapping) -> str:
    return "; ".join(f"{name}: {entry.help}" for name, entry in named.items())


def kernel_declarations(kernels: Mapping) -> tuple[Option, ...]:
    """One option per parameter the ``kernels`` declare (`adaptmc.kernels.base.Param`), its
    help naming the kernels that take it; kernels that share a name share its kind and
    range, else `TypeError`."""
    first, users = {}, {}
    for name, kernel in kernels.items():
        for param in kernel.parameters:
            seen = first.setdefault(param.name, param)
            if (seen.kind, seen.low, seen.high, seen.open) != \
                    (param.kind, param.low, param.high, param.open):
                raise TypeError(f"kernel {name!r} declares {param.name} unlike kernel "
                                f"{users[param.name][0][0]!r}")
            users.setdefault(param.name, []).append((name, param.help))
    return tuple(Option(p.name, p.kind, _kernel_help(users[p.name]), low=p.low,
                        high=p.high, open=p.open, metavar=p.metavar, group=MANUAL)
                 for p in first.values())


def _kernel_help(users: list[tuple[str, str]]) -> str:
    """``"leapfrog steps L (hmc, rmhmc)"``: the help of the first kernel declaring the
    parameter, and the kernels taking it when they are at most `NAMED_KERNELS` (the help
    stays short)."""
    kernels = [kernel for kernel, _ in users]
    if len(kernels) > NAMED_KERNELS:
        return users[0][1]
    return f"{users[0][1]} ({', '.join(kernels)})"


def declarations() -> dict[str, Option]:
    """Every declared option by name: the run's and the recipes'."""
    return {o.name: o for o in (*RUN_OPTIONS, *recipe_declarations())}
