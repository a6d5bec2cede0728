"""MAMS samples after the default's warm-up (`adaptmc.recipes.adaptive_hmc`, ``mams="on"``).

Metropolis-adjusted microcanonical sampling (Robnik, Cohn-Gordon & Seljak 2025;
`adaptmc.kernels.mams`) under the metric the NUTS warm-up chose (its frame ``x = x0 + S z``,
``S S^T`` the warm-up's inverse mass), from where the warm-up's chains stand. The warm-up
ends where its final window would start, once the metric is chosen (``final_window=False``,
`adaptmc.adaptation.early.start_chains`): that window adapts NUTS's step under the final
metric, and MAMS adapts its own (step 1), so it runs only where MAMS is not used after all
(`MamsWarmupStage`):

1. **Step size**: dual averaging (Hoffman & Gelman 2014, Alg. 5) of the isokinetic step to
   the paper's acceptance rate `TARGET_ACCEPT` (0.9), over `ADAPT_TRANSITIONS`
   transitions (half where the warm-up settled, `mams_rules.adapt_transitions`), on the
   chains' mean acceptance probability (one step for all chains, so every chain runs the
   same number of steps), from ``eps0 = eps_w sqrt(d)``: HMC's warm-up step ``eps_w``
   moves a momentum of norm ~``sqrt(d)``, MAMS's velocity has unit norm. The first
   trajectory length is the paper's starting ``L = sqrt(d)`` in the metric's units; a
   transition runs ``max(1, round(L / eps))`` steps at the current ``eps``, its step
   jittered by `JITTER` (Neal 2011, Sec. 5.4.2.2) so that its length is random at a fixed
   cost. `MEASURE_TRANSITIONS` transitions at the averaged step follow.
2. **Trajectory length** from those transitions' autocorrelation (`trajectory_length`:
   the MCLMC rule ``L = c eps n_eff``, as a Newton step), at least `MIN_STEPS` steps; if
   it changes the steps per transition, `READAPT_TRANSITIONS` of dual averaging with the
   new number of steps fixed (the cost per transition constant) and `MEASURE_TRANSITIONS`
   more at the new step (`tune`).
   The robust ESS per transition ``r1`` of the last stage's draws (`pooled`)
   (`adaptmc.objectives.robust_ess_per_grad`: the slowest of bulk ``x``, bulk ``x^2`` and
   tails) sets the thinning (`thinning`).
3. **Sampling**: ``draws`` kept draws per chain, every ``k``-th transition, in blocks of
   ``KEPT_PER_BLOCK`` kept draws recorded as the run's super-transitions
   (`adaptmc.run.mams_stage.MamsSample`). The first block is the last measurement: its
   transitions ran at the sampling's step and steps, from chains the warm-up left at the
   posterior, under a kernel chosen before them (their draws choose only the thinning
   and where the sampling goes on from), so they are the chains' first draws rather
   than a cost paid before them (``MEASURE_TRANSITIONS`` transitions of a 1000-draw run:
   15 % of its sampling at ``k = 1``).

Every transition of steps 1-3 runs through MAMS's one compiled program
(`adaptmc.kernels.mams_chunk`: the dual averaging on or off, the steps, thinning and number
of transitions its arguments), compiled alongside the warm-up (`MamsWarmupStage`), from the
warm-up's chains' states (their log densities and gradients are not computed again).

Every gradient of steps 1 and 2 but the last measurement's is counted with the warm-up's
(they come before the first kept draw), the last measurement's with the sampling's; a
resumed run repeats them from the warm-up's checkpoint (the same key, the same draws) before
it continues its sampling from its own checkpoint.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from adaptmc import tuners
from adaptmc.adaptation.early import run_final_window
from adaptmc.adaptation.early_stage import EarlyWarmupStage
from adaptmc.adaptation.low_rank import LowRankInverseMass
from adaptmc.adaptation.nuts_sampling import nuts_arm
from adaptmc.kernels.mams import MAMSParams, MAMSState, mams
from adaptmc.kernels.mams_chunk import (
    ChunkOut,
    as_padded,
    chunk_ahead,
    da_fixed,
    da_start,
    run_chunk,
)
from adaptmc.recipes.mams_rules import (
    adapt_transitions,
    per_transition_ess,
    thinning,
    trajectory_length,
)
from adaptmc.recipes.plan import Plan, Prepared, check_plan, sampling_length
from adaptmc.run.mams_stage import MamsArm, MamsSample
from adaptmc.targets.base import evaluate_position

TARGET_ACCEPT = 0.9
"""The acceptance rate MAMS's step is dual-averaged to: the paper's (Robnik, Cohn-Gordon &
Seljak 2025); 0.7 left a chain stuck on eight schools (docs/notes/mams-sampling.md)."""

ADAPT_TRANSITIONS = 150
"""Dual-averaging transitions per chain at the first trajectory length. The averaged log
step weighs update ``t`` by ``t^-0.75``, so after 150 updates the early exploring steps
carry little weight, and each update reads the mean acceptance of all chains (four by
default: 600 proposals)."""

READAPT_TRANSITIONS = 50
"""Dual-averaging transitions per chain after the measured trajectory length changed the
steps per transition: the step only moves by what the new number of steps asks, so the
averaging starts from the first step and shrinks toward it (not toward 10x it)."""

MEASURE_TRANSITIONS = 150
"""Transitions per chain at an averaged step whose autocorrelation sets the trajectory
length (`trajectory_length`) and whose robust ESS per transition ``r1`` sets the thinning:
600 draws over four chains; the thinning depends on ``r1`` only through ``r1^-1/2``."""

JITTER = 0.5
"""Step-size jitter ``j`` (``eps U(1 - j, 1 + j)``): the trajectory's length varies by
+-50 %, as in the MAMS check (scripts/mams_check.py); the paper draws the number of steps,
uniform up to twice its mean, which our fixed-cost kernel does not."""

STEP_FLOOR = 0.1
"""The least MAMS step, as a fraction of the first (``eps0``, from the warm-up's): a
transition never steps below it, and where dual averaging asks for less (its averaged step
below the floor) MAMS is not used: the run samples with NUTS after the warm-up, as with
``mams="off"`` (`mams_prepared`). Where the log density has walls (``-inf`` beyond a
boundary: a trajectory crossing one is rejected whatever its step) dual averaging to
`TARGET_ACCEPT` drives the step toward zero and the steps per transition up without bound
(a walled 3-d Gaussian: 0.84 to 0.0015, 526 steps per transition); NUTS stops its trajectory
at the wall. The paper (Robnik, Cohn-Gordon & Seljak 2025) sets no floor; 0.1 is ours: at it
a transition costs at most ten times the first's steps."""

MIN_STEPS = 2
"""The fewest steps per transition MAMS samples with. Where the length rule asks for one
(a posterior the warm-up's metric whitens well: the averaged step is about as long as the
trajectory), a transition is a single isokinetic step from a fresh velocity, a Langevin-type
move whose draws follow each other closely; two steps cost twice the gradients and mixed
more than twice as fast on all 10 such runs of the broad bench (1.17-1.69x the robust ESS
per gradient, BENCHMARKS "MAMS samples with two steps at least"). The paper (Robnik,
Cohn-Gordon & Seljak 2025) draws the number of steps at random with its mean set by ``L``
and sets no floor; 2 is ours."""

KEPT_PER_BLOCK = 100
"""Kept draws per chain of one sampling super-transition (one recorded block)."""


class Adapted(NamedTuple):
    """What `adapt_and_measure` returns: the chains' MAMS states ``(chains,)``, the final
    step and steps per transition, the measurement's positions ``(chains, n, dim)`` and
    acceptance probabilities ``(chains, n)``, its divergences, the dual averaging's mean
    acceptance over its last half, the gradients spent over all chains, and the dual
    averaging's last half: its positions ``(chains, adapt // 2, dim)`` and steps per
    transition ``(adapt // 2,)``; ``floored``: the averaged step fell below the floor (no
    measurement then: its arrays are empty); ``measured``: the measurement's chunk, every
    transition at the final step and steps (`adaptmc.kernels.mams_chunk.ChunkOut`)."""

    states: object
    step_size: float
    num_leapfrog: int
    positions: np.ndarray
    acceptance: np.ndarray
    divergences: int
    adapt_acceptance: float
    num_grads: int
    tail_positions: np.ndarray
    tail_steps: np.ndarray
    floored: bool = False
    measured: ChunkOut | None = None


def pooled(adapted: Adapted) -> np.ndarray:
    """The draws ``(chains, n, dim)`` of ``adapted``'s kernel (its number of steps): the
    dual averaging's last half followed by the measurement when every transition of that
    half ran the final number of steps (its step within the averaging's last wanderings of
    the final one), else the measurement alone: draws already paid for, 1.5 times the
    measurement's, for ``r1`` and ``tau`` (docs/notes/mams-sampling.md: the ``r1`` of two
    consecutive 100-transition windows differed 3.4x)."""
    if adapted.tail_steps.size and np.all(adapted.tail_steps == adapted.num_leapfrog):
        return np.concatenate([adapted.tail_positions, adapted.positions], axis=1)
    return adapted.positions


def adapt_and_measure(target, states, metric, step_size: float, key, *, length: float,
                      fixed_steps: int = 0, ten: float = 10.0, stage: int = 1,
                      adapt: int = ADAPT_TRANSITIONS, measure: int = MEASURE_TRANSITIONS,
                      floor: float = 0.0) -> Adapted:
    """MAMS from ``states`` (the chains' positions, log densities and gradients) under
    ``metric`` (`adaptmc.kernels.mams_chunk.as_padded`): ``adapt`` transitions of dual
    averaging from ``step_size`` (the isokinetic step; shrinking toward ``log(ten
    step_size)``; never stepping below ``floor``), then ``measure`` at the averaged step
    (none where that is below ``floor``: ``floored``), two calls of MAMS's one program
    (`adaptmc.kernels.mams_chunk.run_chunk`). A transition runs ``fixed_steps`` steps if
    positive, else ``round(length / eps)`` at its step ``eps``. ``key``: a PRNG key (the
    warm-up's), folded with ``2 stage - 1`` and ``2 stage``."""
    settings = dict(length=length, jitter=JITTER, target_accept=TARGET_ACCEPT, floor=floor)
    first = run_chunk(target, key, states, metric, da_start(step_size, ten), count=adapt,
                      fixed_steps=fixed_steps, adapt=True, fold=2 * stage - 1, **settings)
    eps = float(np.exp(first.da[1]))
    tail = adapt // 2  # the averaging's second half: steps near the final one
    averaged = float(np.mean(first.acceptance[:, tail:]))
    if eps < floor:
        none = first.positions[:, :0]
        return Adapted(first.states, eps, 0, none, first.acceptance[:, :0], 0, averaged,
                       int(np.sum(first.grads)), none, first.steps[:0], True)
    steps = fixed_steps if fixed_steps > 0 else max(1, round(length / eps))
    second = run_chunk(target, key, first.states, metric, da_fixed(eps), count=measure,
                       fixed_steps=steps, fold=2 * stage, **settings)
    grads = int(np.sum(first.grads)) + int(np.sum(second.grads))
    return Adapted(second.states, eps, steps, second.positions, second.acceptance,
                   int(np.sum(second.divergences)), averaged, grads,
                   first.positions[:, tail:], first.steps[tail:], measured=second)


class Tuned(NamedTuple):
    """What `tune` returns: the last stage's `Adapted` (the chains' states, the step and
    steps the run samples with, the measurement the thinning reads), the first stage's,
    the measured trajectory length and ``tau`` (`trajectory_length`), the gradients
    of both stages over all chains, and the metric's arrays the program ran under
    (`adaptmc.kernels.mams_chunk.as_padded`)."""

    adapted: Adapted
    first: Adapted
    length: float
    tau: float
    num_grads: int
    metric: tuple = ()


def tune(target, start, inverse_mass, step_size: float, key, *,
         rank: int | None = None, adapt: int = ADAPT_TRANSITIONS) -> Tuned:
    """MAMS's step and trajectory length from ``start`` (module docstring, steps 1-3):
    `adapt_and_measure` at ``L = sqrt(d)`` from ``step_size`` (`MIN_STEPS` steps fixed
    where ``L`` is fewer at ``step_size``); the trajectory length its
    measurement asks (`trajectory_length` of the length its transitions ran, ``eps round(L
    / eps)``), at least `MIN_STEPS` steps; if that changes the steps per transition,
    `READAPT_TRANSITIONS` of dual averaging with the new number of steps fixed, from the
    first stage's step and chains, and a new measurement. No stage steps below `STEP_FLOOR`
    ``step_size``; where one's averaged step falls below it, that stage is the last
    (``adapted.floored``). ``start``: the chains' states (position, log density, gradient:
    the warm-up's, nothing computed) or positions ``(chains, dim)`` (each evaluated on the
    host, one gradient counted per chain); ``rank``: the metric's directions in the program
    (default: ``inverse_mass``'s); ``adapt``: the first stage's dual-averaging transitions.
    """
    states, grads = _states(target, start)
    dim = states.position.shape[1]
    metric = as_padded(inverse_mass, dim, _rank(inverse_mass, dim) if rank is None else rank,
                       states.position.dtype)
    floor = STEP_FLOOR * step_size
    fixed = MIN_STEPS if round(math.sqrt(dim) / step_size) < MIN_STEPS else 0
    first = adapt_and_measure(target, states, metric, step_size, key, length=math.sqrt(dim),
                              fixed_steps=fixed, floor=floor, adapt=adapt)
    if first.floored:
        return Tuned(first, first, float("nan"), float("nan"), grads + first.num_grads, metric)
    ran = first.step_size * first.num_leapfrog  # the length the measured chains ran
    length, tau = trajectory_length(pooled(first), ran)
    steps = max(MIN_STEPS, round(length / first.step_size))  # `mams_chunk.steps_for`, floored
    if steps == first.num_leapfrog:
        return Tuned(first, first, length, tau, grads + first.num_grads, metric)
    second = adapt_and_measure(target, first.states, metric, first.step_size, key,
                               length=length, fixed_steps=steps, ten=1.0, stage=2,
                               adapt=READAPT_TRANSITIONS, floor=floor)
    return Tuned(second, first, length, tau, grads + first.num_grads + second.num_grads,
                 metric)


def _states(target, start) -> tuple[MAMSState, int]:
    """``(states, gradients spent)``: ``start``'s states as they are, or its positions'
    evaluated one by one on the host (the target's compiled single-point program)."""
    if hasattr(start, "logdensity_grad"):
        return MAMSState(*(np.asarray(a) for a in (start.position, start.logdensity,
                                                  start.logdensity_grad))), 0
    positions = np.asarray(start)
    values = [evaluate_position(target, x) for x in positions]
    return MAMSState(positions, np.array([v for v, _ in values], positions.dtype),
                     np.stack([g for _, g in values]).astype(positions.dtype)), len(values)


def _rank(inverse_mass, dim: int) -> int:
    """The directions ``inverse_mass`` needs in the program: a low-rank one's, a dense
    one's ``dim``, a diagonal's none (one, unused)."""
    if isinstance(inverse_mass, LowRankInverseMass):
        return max(1, inverse_mass.rank)
    return dim if np.ndim(inverse_mass) == 2 else 1


def mams_record(tuned: Tuned, eps0: float, r1: float, overhead: float, k_star: float,
                k: int, kept_grads: int = 0, adapt: int = ADAPT_TRANSITIONS) -> dict:
    """The run record's ``sampler``: what `tune` measured and chose, and the thinning;
    ``num_grads`` those spent before the first kept draw (less ``kept_grads``, the
    measurement's whose draws are kept); ``adapt``: the first stage's dual-averaging
    transitions (`mams_rules.adapt_transitions`)."""
    adapted, first = tuned.adapted, tuned.first
    return {"sampler": "mams", "step_size": adapted.step_size,
            "num_leapfrog": adapted.num_leapfrog,
            "trajectory_length": adapted.step_size * adapted.num_leapfrog,
            "measured_length": tuned.length, "tau": tuned.tau,
            "initial_length": math.sqrt(np.shape(adapted.positions)[2]),
            "first_step_size": first.step_size, "first_num_leapfrog": first.num_leapfrog,
            "readapted": adapted is not first, "jitter": JITTER,
            "initial_step_size": eps0, "target_accept": TARGET_ACCEPT,
            "adapt_transitions": adapt, "adapt_acceptance": adapted.adapt_acceptance,
            "measure_transitions": MEASURE_TRANSITIONS,
            "measure_acceptance": float(np.mean(adapted.acceptance)),
            "measure_divergences": adapted.divergences,
            "num_grads": tuned.num_grads - kept_grads, "kept_grads": kept_grads,
            "r1": r1, "r1_transitions": int(np.shape(pooled(adapted))[1]),
            "grads_per_transition": adapted.num_leapfrog,
            "overhead_per_draw": overhead, "k_star": k_star, "thin": k}


def mams_prepared(warm, *, target, key, state, rank: int, draws: int, options: dict,
                  record, fallback=None) -> Prepared:
    """What the run goes on with after the warm-up ``warm`` (an
    `adaptmc.adaptation.early.EarlyWarmup`) on ``target``, ``key`` the warm-up's last
    PRNG key, ``state`` its chains' states, ``rank`` its metric's directions: MAMS's step
    and trajectory length tuned from where its chains stand (`tune`), the thinning its
    last measurement asks (`thinning`) and a plan that keeps ``draws`` draws per chain,
    every ``k``-th transition, continuing from the chains' MAMS states, sampled by MAMS's
    program (`adaptmc.run.mams_stage.MamsSample`), the last measurement's transitions (at
    the sampling's step and steps) kept as its first draws: their gradients are the
    sampling's, not counted before the first kept draw. ``record(warm, plan)``: the warm-up's
    facts (`adaptmc.recipes.adaptive.warmup_record`); the MAMS facts go to its
    ``sampler``. Where the step fell below its floor (`STEP_FLOOR`), ``fallback()`` (the
    `Prepared` of sampling without MAMS) with MAMS's gradients added and its facts in the
    record's ``mams``."""
    chains, dim = np.shape(warm.positions)
    eps0 = float(np.mean(warm.step_size)) * math.sqrt(dim)
    adapt = adapt_transitions(ADAPT_TRANSITIONS, warm.choice.get("settled"), warm.far_chains)
    tuned = tune(target, state, warm.inverse_mass, eps0, key, rank=rank, adapt=adapt)
    adapted = tuned.adapted
    if adapted.floored and fallback is not None:
        return _without_mams(fallback(), tuned, eps0)
    r1 = per_transition_ess(pooled(adapted))
    g = adapted.num_leapfrog
    kept = int(np.sum(adapted.measured.grads))  # the measurement's: its draws are kept
    before = warm.num_grads + tuned.num_grads - kept
    overhead = before / chains / draws
    k_star, k = thinning(r1, g, overhead)
    params = MAMSParams(adapted.step_size, g, warm.inverse_mass, JITTER)
    arm = MamsArm(tuned.metric, adapted.step_size, g, JITTER, TARGET_ACCEPT,
                  first=adapted.measured)
    plan = Plan("adaptive-hmc", mams, params, tuners.fixed(), None,
                1 + sampling_length(draws - MEASURE_TRANSITIONS // k, KEPT_PER_BLOCK),
                g * k * KEPT_PER_BLOCK, 0, 0, options=options, thin=k, draws=draws,
                sampling=functools.partial(MamsSample, arm=arm))
    check_plan(plan)
    sampler = mams_record(tuned, eps0, r1, overhead, k_star, k, kept, adapt)
    return Prepared(plan, np.asarray(adapted.states.position), before,
                    {**record(warm, plan), "sampler": sampler}, adapted.states, kept)


def _without_mams(prepared: Prepared, tuned: Tuned, eps0: float) -> Prepared:
    """``prepared`` (sampling without MAMS) after MAMS's step fell below its floor: the
    gradients MAMS's adaptation spent added to those before the first kept draw, and why
    in the record's ``mams``."""
    facts = {"used": False, "reason": "step below its floor", "initial_step_size": eps0,
             "floor": STEP_FLOOR * eps0, "step_size": tuned.adapted.step_size,
             "adapt_acceptance": tuned.adapted.adapt_acceptance,
             "num_grads": tuned.num_grads}
    return prepared._replace(num_grads=prepared.num_grads + tuned.num_grads,
                             record={**prepared.record, "mams": facts})


@dataclass(frozen=True)
class MamsWarmupStage(EarlyWarmupStage):
    """The default's warm-up (`adaptmc.adaptation.early_stage.EarlyWarmupStage`) that
    compiles MAMS's program alongside it (`adaptmc.kernels.mams_chunk.chunk_ahead`: its
    shapes are known once the warm-up's chains start) and whose ``finish`` hands ``then``
    the target, the warm-up's last PRNG key (restored from its checkpoint on resume), the
    chains' states and the metric's rank as well, so MAMS's adaptation after it draws the
    same numbers in an uninterrupted and a resumed run; and ``fallback``: the `Prepared` of
    ``without(EarlyWarmup, nuts=(NutsArm, False))`` (sampling without MAMS, NUTS among its
    choices, `adaptmc.adaptation.nuts_sampling`), called only where MAMS is not used."""

    without: Callable | None = None
    final_window: bool = False  # MAMS adapts its own step (`tune`)

    def start(self, target, positions, key, progress: bool | None = None):
        run = super().start(target, positions, key, progress)
        chunk_ahead(target, positions.shape[0], run.rank, run.state.position.dtype, key)
        return run

    def finish(self, run):
        warm = self.result(run)  # far chains regrouped first: the arm's steps are theirs
        fallback = None if self.without is None else functools.partial(self._without, run)
        return self.then(warm, target=run.target, key=run.key, state=run.state,
                         rank=run.rank, fallback=fallback)

    def _without(self, run) -> Prepared:
        """``without`` after the warm-up's final window (NUTS's step adapted under the
        final metric), run now where the warm-up ended without it: MAMS is not used."""
        if not run.final_window:
            run_final_window(run)
        return self.without(self.result(run), nuts=(nuts_arm(run), False))


def mams_plan(warmup_steps: int, metric: str, target_accept: float, draws: int,
              options: dict, record, without: Callable | None = None) -> Plan:
    """The plan of ``adaptive_hmc(mams="on")``: the default's warm-up (``warmup_steps``,
    ``metric``, its ``target_accept``), then `mams_prepared`, or ``without`` where MAMS's
    step falls below its floor (`MamsWarmupStage`). Before the warm-up it names MAMS (its
    kernel and jitter), so a run folder of one cannot be resumed as the other."""
    then = functools.partial(mams_prepared, draws=draws, options=options, record=record)
    stage = MamsWarmupStage(warmup_steps, metric, then, target_accept, without=without)
    return Plan("adaptive-hmc", mams, MAMSParams(jitter=JITTER), tuners.fixed(), None, 1,
                1000, 0, 0, options=options, warmup=stage, draws=draws)
