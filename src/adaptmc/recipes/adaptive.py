"""The default recipe: adaptive HMC whose every setting follows from what the target showed.

1. **Warm-up** (`adaptmc.adaptation.early.early_warmup`): NUTS per chain whose metric is
   re-estimated from the chains' draws and gradients every few transitions at first, then in
   growing windows (nutpie's foreground and background estimators), the step size by dual
   averaging throughout; then the diagonal, low-rank or dense metric chosen by what each
   buys on held-out draws (`adaptmc.adaptation.metric_choice`) and a final window under it.
   It reaches the typical set from a far start and measures the scales, the step size and
   how long the trajectories NUTS chose were.
2. **Tuning, when it can earn its cost** (`planned_tuning`): by default only as many
   super-transitions as `TUNING_SHARE` of the sampling's gradients pays for (none on a
   1000-draw run, 12 on a long one); a bandit (GP-UCB by default, Wang, Mohamed & de Freitas
   2013) over fixed-length HMC's ``(eps, L)`` under the warm-up's metric, in a log-scale box
   built from the warm-up: ``eps`` in ``[eps_w / 4, 2 eps_w]`` around its step ``eps_w``,
   ``L`` from half the lower quartile to twice the 90th percentile of its trajectory
   lengths, never a constant box. It starts from ``(eps_w, median L)``. The reward is the
   effective draws per gradient of the slowest coordinate and statistic (``x``, ``x^2``,
   both tails), as the summary's robust ESS counts them
   (`adaptmc.objectives.robust_ess_per_grad`): scale-free, no credit for antithetic jumps,
   and, unlike ChEES per gradient (Hoffman, Radul & Sountsov 2021), no credit for the
   diffusive moves of very short trajectories; counted per gradient of the whole run were
   the setting frozen, warm-up and tuning included (`adaptmc.objectives.over_the_run`), as
   the summary reports it, so that a 1000-draw run does not freeze a one-step setting whose
   few kept draws cannot repay the warm-up. The GP bandits compare rewards on the log scale
   (`LOG_SCALE`). The box moves (`adaptmc.tuners.moving_box`): at mid-tuning an edge where
   the best setting lies extends by half its log span (``L`` at most ``budget / 8``), so an
   optimum just past the warm-up's box is measured rather than frozen at its edge. Step-size
   jitter (Neal 2011, Sec. 5.4.2.2) randomises every trajectory's length, so a fixed ``L``
   cannot resonate with a period of the dynamics. Tuning lasts at most ``tuning``
   super-transitions and ends earlier once it no longer earns its cost: by default once the
   expected improvement of one more super-transition over the setting it would freeze
   (`adaptmc.tuners.stopping`, ``ei``; the regret bound ``ucb-lcb`` of Makarova et al. 2022
   and the UCB's lead ``ucb`` are the other rules), as a fraction of that setting's reward,
   times the sampling phase's gradients is below the super-transition's own gradients
   (`value_tolerance`), consulted from `min_tuning` super-transitions on: a short run tunes
   briefly, a long one longer. The super-transitions so freed are dropped, not given to
   sampling: the sampling phase keeps its length, draws and thinning, and the run costs
   fewer gradients (`adaptmc.run.run`).
3. **Sampling**: NUTS under the warm-up's metric and final step
   (`adaptmc.adaptation.nuts_sampling`, `adaptmc.run.nuts_stage`) when there was no tuning
   or its reward beats the tuned setting's (``nuts="choose"``); otherwise the bandit's best
   setting by posterior mean among the settings it measured that never diverged, frozen;
   while every setting tried has diverged, the step's range shrinks below the smallest
   failure (`adaptmc.tuners.moving_box`), so the bandit does not freeze on a setting it
   never saw work. Tuning's draws are not kept, its gradients are counted.

With ``mams="auto"`` (the default: where ``dim >= 3``, `mams_rules.MIN_DIM`, and no option
of HMC's tuning is given) or ``"on"``, MAMS under the warm-up's metric samples in place of
steps 2 and 3, every ``k``-th transition (`adaptmc.recipes.mams_sampling`), the warm-up
ending once its metric is chosen (no final window), unless MAMS's step falls below its
floor: then the final window and steps 2 and 3 follow as without it."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from adaptmc import tuners
from adaptmc.adaptation.early import METRICS
from adaptmc.adaptation.early_stage import EarlyWarmupStage
from adaptmc.kernels import HMCParams, HMCState, hmc
from adaptmc.objectives import over_the_run
from adaptmc.recipes import mams_rules, mams_sampling
from adaptmc.recipes.parts import make_bandit, objective_from_name
from adaptmc.recipes.plan import Plan, Prepared, check_plan, options_of, sampling_length
from adaptmc.targets.base import Target
from adaptmc.tuners.base import Tuner

STOP_RULE = "ei"
"""The default stop rule (`adaptmc.tuners.stopping.RULES`): expected improvement over the
setting tuning would freeze (Jones, Schonlau & Welch 1998, Eq. 15), as a fraction of its
reward: what `value_tolerance` weighs against a super-transition's cost. ``ucb-lcb``'s
regret bound (Makarova et al. 2022) bounds what freezing gives up, not what one more step
buys: its floor ``2 kappa sd`` kept it above a tenth of the reward in every run measured."""

NUTS_CHOICES = ("off", "choose", "always")
MAMS_CHOICES = ("auto", "off", "on")

LOG_SCALE = {name: {"log_rewards": True, "noise_var": tuners.surrogate.LOG_NOISE_VAR}
             for name in ("gp-ucb", "hedge")}
"""The GP bandits' rewards on the log scale, with its measured noise
(`adaptmc.tuners.surrogate.LOG_NOISE_VAR`): ESS per gradient spans orders of magnitude over
the box with a relative error; on the linear scale the largest set the scale
(docs/notes/pergrad.md)."""

MIN_TUNING = 6
"""The fewest tuning super-transitions before the stop rule is consulted: ``3 d`` arm pulls
for the 2-d ``(eps, L)`` box, by which the annealed bandit (``p_i`` still above 0.75) has
measured about five distinct settings, enough for the GP's reward range (its signal scale)
to reflect the box rather than the noise of one setting (`adaptmc.tuners.stopping` reads
it only from ``2 d`` distinct settings on). The GP does not expect rewards far above the
best it has seen, so its expected improvement at a corner it never measured is small:
fewer pulls stopped tuning before the cheap short trajectories had been tried."""

TUNING = 12
"""The most tuning super-transitions of the default (``tuning=None``)."""

TUNING_SHARE = 0.1
"""The largest share of the sampling phase's gradients the default's tuning may spend
(`planned_tuning`). What tuning can buy is bounded: on the broad bench the frozen setting
made at most ~1.6x NUTS's effective draws per sampling gradient, and NUTS samples when its
reward wins (`adaptmc.run.nuts_stage`), so tuning that costs a tenth of the sampling can
lose at most a tenth, and a setting found by it repays that many times over a long run."""


def check_tuning_count(tuning: int | None) -> None:
    """One clear `ValueError` unless ``tuning`` is None (`planned_tuning` decides) or an
    integer >= 0 (0: no tuning; NUTS samples, or with ``nuts="off"`` HMC at the warm-up's
    proposal)."""
    if tuning is not None and (isinstance(tuning, bool) or int(tuning) != tuning
                               or tuning < 0):
        raise ValueError(f"tuning must be an integer >= 0 or None, got {tuning}")


def planned_tuning(tuning: int | None, budget: int, draws: int, steps_per_draw: float) -> int:
    """Tuning super-transitions of ``budget`` gradients per chain the run will spend: as
    asked when ``tuning`` is an integer; by default as many as `TUNING_SHARE` of the
    sampling's gradients pays for, ``draws`` NUTS transitions of ``steps_per_draw``
    leapfrog steps each (what the warm-up measured), at most `TUNING`, and none when that
    is fewer than `MIN_TUNING` (too few for the bandit to learn the box: issue #42's
    "tuning that earns its cost"). A 1000-draw run samples with NUTS right after the
    warm-up; a 100k-draw run tunes."""
    if tuning is not None:
        return int(tuning)
    affordable = int(TUNING_SHARE * draws * max(1.0, steps_per_draw) // max(1, budget))
    planned = min(TUNING, affordable)
    return planned if planned >= MIN_TUNING else 0


def value_tolerance(budget: int, draws: int, num_leapfrog: int,
                    overhead: float = 0.0) -> float:
    """The stop rule's tolerance at which tuning earns its cost. The reward is the run's
    effective draws per gradient (`adaptmc.objectives.over_the_run`), whose gradients per
    chain are ``draws (overhead + L)`` (``overhead``: gradients per chain per kept draw
    before the first, `run_overhead`); one more super-transition adds ``budget`` of them,
    lowering it by the fraction ``budget / (draws (overhead + L))``, and is worth running
    while the gain it is predicted to find, as a fraction of the reward, exceeds that. A
    1000-draw run stops once the gain is a few per cent; a 100k-draw run keeps tuning
    while it is a tenth of a per cent."""
    return budget / (draws * (overhead + max(1, num_leapfrog)))


def check_sizes(metric: str, budget: int | None, **sizes) -> None:
    """One clear `ValueError` unless ``metric`` is one of `METRICS`, ``budget`` is None or an
    integer >= 1 and every ``sizes`` value an integer at least its minimum
    (``warmup_steps`` 150, the others 1): the checks the warm-up recipes share."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(map(repr, METRICS))}, "
                         f"got {metric!r}")
    for name, value in sizes.items():
        low = 150 if name == "warmup_steps" else 1
        if int(value) != value or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value}")
    if budget is not None and (int(budget) != budget or budget < 1):
        raise ValueError(f"budget must be an integer >= 1, got {budget}")


def adaptive_hmc(
    target: Target,
    *,
    tuner: str = "gp-ucb",
    metric: str = "auto",
    warmup_steps: int = 500,
    tuning: int | None = None,
    stop_rule: str = STOP_RULE,
    stop_tolerance: float | None = None,
    draws: int = 1000,
    budget: int | None = None,
    objective: str | Callable = "ess-robust",
    jitter: float = 0.2,
    target_accept: float = 0.8,
    nuts: str = "choose",
    mams: str = "auto",
    seed: int = 0,  # unused: the warm-up takes the run's key
) -> Plan:
    """Adaptive HMC (see the module docstring).

    Parameters
    ----------
    tuner
        The bandit over ``(eps, L)``: a bandit of `adaptmc.tuners.TUNERS`.
    metric
        ``"auto"`` (the most effective draws per gradient promised on the warm-up's held-out
        draws: `adaptmc.adaptation.metric_choice`), ``"diag"``, ``"dense"``, ``"low-rank"``.
    warmup_steps, tuning
        At most: NUTS transitions per chain of the warm-up (>= 150; it ends once settled);
        tuning super-transitions (or a stop rule; None: `planned_tuning` decides).
    stop_rule, stop_tolerance
        The rule that may end tuning early, ``"ucb-lcb"``, ``"ucb"`` or ``"ei"``
        (`adaptmc.tuners.stopping`), and its tolerance (None: `value_tolerance`; 0: off).
    draws, budget
        Kept draws per chain, exactly; gradients per chain of a super-transition (default
        ``max(20 L_median, 8 L_max)``, `tuned_plan`).
    objective, jitter
        The bandit's reward (`adaptmc.objectives.OBJECTIVES` or a callable); step jitter
        ``j``: each trajectory's step is ``eps U(1 - j, 1 + j)``.
    target_accept
        The warm-up's dual averaging's acceptance rate (Hoffman & Gelman 2014, Alg. 5).
    nuts
        ``"choose"`` (NUTS samples if its reward beats the tuned setting's or nothing was
        tuned), ``"always"`` or ``"off"``.
    mams
        ``"on"``: MAMS samples after the warm-up (`adaptmc.recipes.mams_sampling`; steps 2
        and 3 where its step falls below its floor); ``"off"``: steps 2 and 3; ``"auto"``
        (default): ``"on"`` where the dimension is >= `mams_rules.MIN_DIM` (3) and no
        option of HMC's tuning is given (`HMC_TUNING_DEFAULTS`), else ``"off"``.
    """
    check_sizes(metric, budget, warmup_steps=warmup_steps, draws=draws)
    _check_tuning(tuner, stop_rule, stop_tolerance, jitter, target_accept, nuts, tuning, mams)
    made_objective = objective_from_name(objective)
    options = options_of(locals())
    given = {k: v for k, v in locals().items() if k in HMC_TUNING_DEFAULTS}
    if _samples_with_mams(mams, target.dim, given):
        return mams_sampling.mams_plan(warmup_steps, metric, target_accept, draws, options,
                                       warmup_record, _then(options, made_objective))
    return _hmc_plan(options, made_objective)


HMC_TUNING_DEFAULTS = {"tuner": "gp-ucb", "tuning": None, "stop_rule": STOP_RULE,
                       "stop_tolerance": None, "budget": None, "objective": "ess-robust",
                       "jitter": 0.2, "nuts": "choose"}  # read by steps 2 and 3 alone


def _samples_with_mams(mams: str, dim: int, tuning_options: dict) -> bool:
    """Whether MAMS samples: ``mams="on"``, or ``"auto"`` where ``dim >= MIN_DIM`` and every
    option of HMC's tuning is at its default; with ``"on"`` one given is a `ValueError`."""
    given = sorted(k for k, v in tuning_options.items()
                   if not (v is HMC_TUNING_DEFAULTS[k] or v == HMC_TUNING_DEFAULTS[k]))
    if mams == "on" and given:
        raise ValueError(f"mams='on' samples with MAMS, which does not read "
                         f"{', '.join(given)} (HMC's tuning): pass mams='off' to tune HMC")
    return mams == "on" or (mams == "auto" and dim >= mams_rules.MIN_DIM and not given)


def _then(options: dict, objective) -> Callable:
    """`prepared_plan` with `adaptive_hmc`'s ``options`` (the reward ``objective`` made):
    what the run goes on with after the warm-up without MAMS."""
    return functools.partial(prepared_plan, tuner=options["tuner"], tuning=options["tuning"],
                             draws=options["draws"], budget=options["budget"],
                             objective=objective, jitter=options["jitter"], options=options,
                             stop=(options["stop_rule"], options["stop_tolerance"]))


def _hmc_plan(options: dict, objective) -> Plan:
    """`adaptive_hmc`'s plan from its ``options`` (the reward ``objective`` made): the
    warm-up, then `prepared_plan` (tuning, NUTS or the frozen HMC setting)."""
    tuning, budget, jitter = options["tuning"], options["budget"], options["jitter"]
    most = TUNING if tuning is None else tuning
    stage = EarlyWarmupStage(options["warmup_steps"], options["metric"],
                             _then(options, objective), options["target_accept"],
                             nuts=options["nuts"])
    return Plan("adaptive-hmc", hmc, HMCParams(jitter=jitter), tuners.fixed(), objective,
                most + 1, max(budget or 1000, 1), most, most, options=options,
                warmup=stage, draws=options["draws"])


def _check_tuning(tuner: str, stop_rule: str, stop_tolerance, jitter: float,
                  target_accept: float, nuts: str = "off", tuning: int | None = None,
                  mams: str = "off") -> None:
    """One clear `ValueError` for a tuning option of `adaptive_hmc` out of its range."""
    check_tuning_count(tuning)
    if mams not in MAMS_CHOICES:
        raise ValueError(f"mams must be one of {', '.join(MAMS_CHOICES)}, got {mams!r}")
    if tuner not in tuners.bandit_tuners():
        raise ValueError(f"adaptive-hmc tunes with a bandit "
                         f"({', '.join(tuners.bandit_tuners())}), not {tuner!r}")
    if stop_rule not in tuners.stopping.RULES:
        raise ValueError(f"stop_rule must be one of {', '.join(tuners.stopping.RULES)}, "
                         f"got {stop_rule!r}")
    if stop_tolerance is not None and not stop_tolerance >= 0:
        raise ValueError(f"stop_tolerance must be >= 0 (0: off), got {stop_tolerance}")
    hmc.check_params(HMCParams(jitter=jitter))
    if nuts not in NUTS_CHOICES:
        raise ValueError(f"nuts must be one of {', '.join(NUTS_CHOICES)}, got {nuts!r}")
    if not 0.0 < target_accept < 1.0:
        raise ValueError(f"target_accept must lie in (0, 1), got {target_accept}")


def prepared_plan(warm, **settings) -> Prepared:
    """What the run goes on with after the warm-up ``warm``: `tuned_plan` (``settings``
    its keywords), from where the warm-up's chains stand, their states included."""
    plan = tuned_plan(warm, **settings)
    return Prepared(plan, warm.positions, warm.num_grads, warmup_record(warm, plan),
                    hmc_states(warm.final_state))


def hmc_states(state) -> HMCState | None:
    """The HMC chains' states where the warm-up's chains stand, from its final `NutsState`
    (position, log density, gradient; the momentum NaN until the first step, as
    `adaptmc.kernels.hmc.init` leaves it): the model is evaluated in no program of its own.
    None when the warm-up gives no state."""
    if state is None:
        return None
    position, logdensity, grad = (np.asarray(a) for a in state)
    return HMCState(position, logdensity, grad, np.full_like(position, np.nan))


def trajectory_box(steps: np.ndarray) -> tuple[int, int, int]:
    """``(L_low, L_median, L_high)`` from NUTS's leapfrog steps per transition: half the lower
    quartile, the median, twice the 90th percentile (at least ``L_low + 2``)."""
    q25, q50, q90 = np.percentile(np.asarray(steps, dtype=float), [25, 50, 90])
    low = max(1, int(math.floor(q25 / 2)))
    high = max(low + 2, int(math.ceil(2 * q90)))
    return low, int(min(max(round(q50), low), high)), high


def min_tuning(tuning: int) -> int:
    """Tuning super-transitions before the stop rule is consulted: `MIN_TUNING`, at most
    ``tuning``."""
    return min(tuning, MIN_TUNING)


def with_stop_rule(bandit: Tuner, tuning: int, stop: tuple[str, float] | None) -> Tuner:
    """``bandit`` under the stop rule ``(rule, tolerance)``
    (`adaptmc.tuners.stop_when_separated`), or as it is when the rule is off (None or
    tolerance 0), cannot fire before ``tuning`` or the bandit has no posterior to read."""
    first = min_tuning(tuning)
    if stop is not None and stop[1] is None:
        raise ValueError("the stop rule's tolerance must be set (tuned_plan: value_tolerance)")
    if stop is None or stop[1] <= 0 or first >= tuning or bandit.posterior is None:
        return bandit
    return tuners.stop_when_separated(bandit, min_updates=first, tolerance=stop[1],
                                      rule=stop[0])


def tuned_plan(warm, *, tuner: str, tuning: int, draws: int, budget: int | None,
               objective: Callable | None, jitter: float, options: dict,
               stop: tuple[str, float] | None = None, nuts=None) -> Plan:
    """The plan after the warm-up ``warm``: box, budget, bandit (under the stop rule
    ``stop``, ``(rule, tolerance)``, when given; tolerance None: `value_tolerance`) and
    ``draws`` kept draws per chain (the planned length: as many super-transitions as they
    take at the median ``L``). The budget, ``max(20 L_median, 8 L_high)`` gradients per
    chain, follows from the trajectories the warm-up measured: twenty draws at its typical
    length, eight at the box's top."""
    low, median, high = trajectory_box(warm.trajectory_steps)
    eps = warm.step_size
    box = tuners.make_box({"step_size": (eps / 4, 2 * eps), "num_leapfrog": (low, high)},
                          integer=("num_leapfrog",), log=("step_size", "num_leapfrog"))
    budget = max(20 * median, 8 * high) if budget is None else int(budget)
    tuning = planned_tuning(tuning, budget, draws, float(np.mean(warm.trajectory_steps)))
    if budget < 4 * high:
        box = box._replace(upper=np.array([2 * eps, float(max(low + 1, budget // 4))]))
    initial = {"step_size": eps, "num_leapfrog": int(min(median, box.upper[1]))}
    bandit = make_bandit(tuner, box, initial=initial, extend_after=tuning // 2 or None,
                         limits={"num_leapfrog": (1, max(box.upper[1], budget // 8))},
                         options=LOG_SCALE.get(tuner))
    overhead = run_overhead(warm, budget, tuning, draws)
    if stop is not None and stop[1] is None:
        stop = (stop[0], value_tolerance(budget, draws, initial["num_leapfrog"], overhead))
    bandit = with_stop_rule(bandit, tuning, stop)
    if objective is not None:
        objective = over_the_run(objective, overhead)
    if nuts is not None and tuning == 0:  # nothing tuned: NUTS samples, whatever it measured
        nuts = (nuts[0], True)
    sampling = sampling_length(draws, budget // median)
    params = HMCParams(step_size=eps, num_leapfrog=initial["num_leapfrog"],
                       inverse_mass=warm.inverse_mass, jitter=jitter)
    plan = Plan("adaptive-hmc", hmc, params, bandit, objective, tuning + sampling, budget,
                tuning, tuning, box, 0, options, None, 1, draws, nuts)
    check_plan(plan)
    return plan


def run_overhead(warm, budget: int, tuning: int, draws: int) -> float:
    """Gradients per chain per kept draw spent before the first kept draw: the warm-up's
    (over its chains) and the tuning's at `min_tuning` super-transitions of ``budget``
    (the fewest it runs; `adaptmc.objectives.over_the_run`). 0 for a warm-up that does not
    say what it spent."""
    chains = np.shape(getattr(warm, "positions", np.zeros((1, 1))))[0] or 1
    spent = getattr(warm, "num_grads", 0) / chains + min_tuning(tuning) * budget
    return spent / draws if getattr(warm, "num_grads", None) else 0.0


def warmup_record(warm, plan: Plan) -> dict:
    """JSON-able facts of the warm-up and the box it led to (the run's ``warmup`` attr)."""
    low, median, high = trajectory_box(warm.trajectory_steps)
    return {
        "stages": list(warm.stages),
        "metric": warm.metric,
        "metric_choice": getattr(warm, "choice", None),
        "metric_updates": getattr(warm, "num_updates", None),
        "settled": (getattr(warm, "choice", None) or {}).get("settled"),
        "metric_rank": int(warm.inverse_mass.rank) if warm.metric == "low-rank" else None,
        "step_size": warm.step_size,
        "num_grads": warm.num_grads,
        "divergences": warm.divergences,
        "rhat_lp": warm.rhat_lp,
        "trajectory_steps": {"low": low, "median": median, "high": high},
        "box": None if plan.box is None else
        {"step_size": [float(plan.box.lower[0]), float(plan.box.upper[0])],
         "num_leapfrog": [float(plan.box.lower[1]), float(plan.box.upper[1])]},
        "gradient_budget": plan.gradient_budget,
        "thin": plan.thin,
        "wall_s": warm.wall_s,
        "compile_s": warm.compile_s,
        "far_chains": getattr(warm, "far_chains", None),
    }
