"""The run loop: chains advance in super-transitions of a fixed gradient budget.

A super-transition (Wang, Mohamed & de Freitas 2013, Sec. 3; Neal 1996) spends a budget of
S gradient evaluations per chain: a kernel whose step costs c evaluations makes
``floor(S / c)`` steps. Parameters change only between super-transitions, chosen by a tuner
from the reward an objective computes on the draws of the previous one, so settings are
compared at equal cost. Chains run vectorised under ``jit`` (`SuperTransitionLoop`), sharing
the parameters of the super-transition.

The loop knows no kernel's parameter names: integer rounding of proposals, the per-draw
parameter columns and the progress bar come from the kernel's ``tunables``.

Once the tuner is frozen (after ``adapt_until``), the host has nothing to decide between
super-transitions: those up to the next checkpoint run as one device call (a loop over
super-transitions inside the compiled program, per-super-transition totals computed there),
and the host wakes to score, record and checkpoint them.

A tuner whose ``done(state)`` turns True (a stop rule, `adaptmc.tuners.stopping`) ends
adaptation there, before ``adapt_until``: its ``best`` is frozen at once and the tuning
super-transitions it no longer needs are dropped, not turned into sampling ones. The run
then has ``adapt_until - stop`` super-transitions fewer; the planned schedule after
``adapt_until`` (the frozen super-transitions, with their warm-up flags) moves earlier by as
many, so the sampling phase keeps its length, its draws and its thinning, and the run costs
fewer gradients. The stop index is part of every checkpoint, and the tuning group records
it (``tuning.attrs["adapted"]``: super-transitions adapted; ``"adapt_until"``: the most).

With ``num_draws`` the run keeps exactly that many draws per chain: after the warm-up
super-transitions it runs as many as it takes, the last one cut short (fewer steps, fewer
gradients), so the draws kept do not depend on the setting the tuner froze;
``num_super_transitions`` is then only the planned length (the progress bar's first total).

Every gradient evaluation is counted: one per chain for the initial point, then what each
step reports. The PRNG key of super-transition ``i`` is ``fold_in(key, i)``, so a run
resumed from a checkpoint makes exactly the draws of an uninterrupted one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc import io
from adaptmc.kernels.base import Kernel
from adaptmc.options import check_run_resources
from adaptmc.run import callbacks, checks, faults, store
from adaptmc.run.compile_clock import compile_seconds
from adaptmc.run.idata import describe_tuning, to_inference_data
from adaptmc.run.lock import owning_output_dir
from adaptmc.run.loop import (
    SuperTransitionLoop,
    init_states,
    initial_positions_checked,
    super_transition_keys,
)
from adaptmc.targets.base import Target
from adaptmc.tuners.base import Tuner
from adaptmc.tuners.fixed import fixed

RECORD_FIELDS = (
    "reward",
    "acceptance_rate",
    "divergences",
    "num_grads",
    "num_steps",
    "num_draws",
    "warmup",
    "wall_s",
    "tuner_s",
    "objective_s",
)


@dataclass
class RunResult:
    """What `run` returns.

    idata: ArviZ InferenceData with groups posterior, sample_stats, warmup_posterior,
    warmup_sample_stats and tuning; num_grads: gradient evaluations over all chains,
    initial points, warm-up and tuning included; output_dir: the run folder (or None);
    states: every chain's kernel state where the run stopped; params: the kernel's
    ``Params`` of the last super-transition (the frozen setting once adaptation stopped).
    A later run continues the chains exactly with ``initial_states=states``.
    """

    idata: Any
    num_grads: int
    wall_s: float
    compile_s: float
    output_dir: Path | None
    states: Any = None
    params: Any = None


@dataclass(frozen=True)
class _Setup:
    """What stays fixed during a run."""

    target: Target
    kernel: Kernel
    params: Any
    tuner: Tuner
    objective: Any
    num_super_transitions: int
    gradient_budget: int
    num_chains: int
    num_warmup: int
    adapt_until: int | None
    thin: int
    checkpoint_every: int
    key: Any
    run_dir: Path | None
    attrs: dict = field(default_factory=dict)
    force: bool = False
    num_draws: int | None = None


@dataclass
class _Progress:
    """What a run has done so far (everything a checkpoint saves, plus draws in memory)."""

    states: Any
    tuner_state: Any
    record: dict
    total_grads: int
    start_index: int = 0
    num_chunks: int = 0
    chunks: list = field(default_factory=list)  # in memory only without a run folder
    pending: list = field(default_factory=list)  # draws since the last checkpoint
    frozen: dict | None = None  # the tuner's best setting, computed once adaptation stops
    adapt_stop: int | None = None  # where the tuner's ``done`` ended adaptation, if it did
    params: Any = None  # the kernel's parameters of the last super-transition run
    staging: Path | None = None  # a new run's folder until its first checkpoint is in place


@owning_output_dir  # one process owns a run folder (adaptmc.run.lock)
def run(
    target: Target,
    kernel: Kernel,
    params: Any | None = None,
    *,
    num_super_transitions: int,
    gradient_budget: int,
    num_chains: int = 4,
    tuner: Tuner | None = None,
    objective=None,
    num_warmup: int = 0,
    adapt_until: int | None = None,
    seed: int = 0,
    initial_positions: np.ndarray | None = None,
    initial_states: Any | None = None,
    init_jitter: float = 0.5,
    output_dir: str | Path | None = None,
    force: bool = False,
    resume: bool = False,
    checkpoint_every: int = 10,
    thin: int = 1,
    progress: bool = True,
    config: dict | None = None,
    stop_after: int | None = None,
    prior_grads: int = 0,
    attrs: dict | None = None,
    num_draws: int | None = None,
) -> RunResult:
    """Run ``num_chains`` chains for ``num_super_transitions`` super-transitions.

    Parameters
    ----------
    target, kernel, params
        What to sample, the kernel, its starting ``Params`` (default: the kernel's).
    gradient_budget
        S, gradient evaluations per chain per super-transition.
    tuner, objective
        Proposes parameters before each super-transition, updated with ``objective(positions,
        stats, num_grads)`` after it (default: fixed parameters).
    num_warmup, adapt_until
        The first super-transitions, whose draws go to the ``warmup_*`` groups; after
        ``adapt_until`` the tuner's ``best`` is frozen (default: never; a tuner with
        ``done`` may stop earlier, dropping those it frees).
    initial_positions
        ``(num_chains, dim)``; default: the target's plus ``U(-init_jitter, init_jitter)``.
    initial_states
        Every chain's kernel state (batched ``kernel.init``, e.g. a `RunResult.states`) in
        place of ``initial_positions``: kernel-internal state included, no gradient spent.
    output_dir, force, resume, checkpoint_every
        Run folder; overwrite it; continue it; super-transitions between checkpoints.
    thin, stop_after
        Keep every ``thin``-th draw (all count); stop as if killed after ``stop_after`` (tests).
    num_draws
        Keep exactly this many draws per chain after the warm-up super-transitions (None:
        ``num_super_transitions`` decides the run's length).
    prior_grads, attrs
        A recipe's warm-up gradients (counted in the total); InferenceData attributes
        (``prior_wall_s``, ``prior_compile_s`` add to the run's seconds; `compile_clock`).
    """
    clocks = (time.perf_counter(), compile_seconds())
    params = kernel.Params() if params is None else params
    tuner = fixed() if tuner is None else tuner
    sizes = (num_super_transitions, gradient_budget, num_chains, num_warmup, adapt_until,
             seed, thin)
    _check_everything(target, kernel, params, tuner, objective, sizes, checkpoint_every,
                      num_draws, output_dir)
    key_init, key_run = jax.random.split(jax.random.key(seed))
    positions = _starts(target, num_chains, initial_positions, initial_states, init_jitter,
                        key_init, after_warmup=prior_grads > 0)
    run_dir, staged = _open(output_dir, resume, force, config, num_draws,
                            store.fingerprint(target, kernel, params, tuner, *sizes, objective))
    setup = _Setup(target, kernel, params, tuner, objective, num_super_transitions,
                   gradient_budget, num_chains, num_warmup, adapt_until, thin,
                   checkpoint_every, key_run, run_dir, dict(attrs or {}), force, num_draws)
    state, finished = _guarded(setup, positions, key_init, resume, initial_states, staged,
                               prior_grads, progress, stop_after)
    if not finished:
        return RunResult(None, state.total_grads, time.perf_counter() - clocks[0],
                         compile_seconds() - clocks[1], run_dir, state.states, state.params)
    return _finish(setup, state, clocks, seed)


def _open(output_dir, resume: bool, force: bool, config, num_draws, facts: dict):
    """``(run_dir, staged)``: the run folder (None without ``output_dir``) and, for a new
    run, the sibling folder it writes into until its first checkpoint (`store.open_run_dir`;
    ``facts`` the run's fingerprint)."""
    facts.update({} if num_draws is None else {"num_draws": int(num_draws)})
    written = store.open_run_dir(output_dir, resume=resume, force=force, config=config,
                                 fingerprint=facts)
    run_dir = None if output_dir is None else Path(output_dir)
    return run_dir, (None if written == run_dir else written)


def _guarded(setup: _Setup, positions, key_init, resume: bool, initial_states, staged,
             prior_grads: int, progress: bool, stop_after: int | None):
    """Start (or resume) and advance the run; ``(state, finished)``. A new run writes into
    the ``staged`` folder, put in place (replacing an old run) at its first checkpoint; on
    any failure before that the staged folder is removed and an old run is left as it was.
    An exception raised by the user's log density becomes one `faults.failed_run` error."""
    state = None
    with faults.capture_callback_errors() as caught:
        try:
            state = _start(setup, positions, key_init, resume, initial_states)
            state.staging = staged
            state.total_grads += int(prior_grads) if state.start_index == 0 else 0
            finished = _advance(setup, state, _make_loop(setup), progress, stop_after)
        except Exception:
            if not caught or state is None or setup.run_dir is None:
                io.discard_staged(staged)
                raise
            failure = faults.failed_run(caught, len(state.record["reward"]), setup.run_dir,
                                        state.staging, committed=state.staging is None)
            io.discard_staged(staged)
            raise failure from None
        except BaseException:
            io.discard_staged(staged)
            raise
    io.discard_staged(state.staging)  # stopped (a test's stop_after) before any checkpoint
    return state, finished


def _starts(target, num_chains, initial_positions, initial_states, init_jitter, key_init,
            after_warmup: bool = False):
    """The chains' checked starting positions: ``initial_states``' when given (then not
    ``initial_positions`` too), else ``initial_positions`` or the jittered default;
    ``after_warmup``: they are where a recipe's warm-up ended, and an error says so."""
    if initial_states is not None:
        if initial_positions is not None:
            raise ValueError("give initial_positions or initial_states, not both")
        initial_positions = initial_states.position
    what = "end of the warm-up" if after_warmup else "initial position"
    return initial_positions_checked(target, num_chains, initial_positions, init_jitter,
                                     key_init, what)


def _make_loop(setup: _Setup) -> SuperTransitionLoop:
    """The run's compiled loop: a buffer for the most draws a super-transition can keep (one
    per gradient when a tuner may change ``L``: one compilation; ``budget // cost`` when it
    changes nothing), and frozen super-transitions grouped up to the next checkpoint."""
    cost = 1 if setup.tuner.names else setup.kernel.cost(setup.params)
    length = setup.num_super_transitions if setup.num_draws is None else 2**62
    return SuperTransitionLoop(setup.target, setup.kernel, setup.num_chains,
                               max_kept=setup.gradient_budget // cost // setup.thin,
                               max_group=_max_group(length, setup.adapt_until,
                                                    setup.checkpoint_every))


def _max_group(num_super_transitions: int, adapt_until: int | None,
               checkpoint_every: int) -> int:
    """The most frozen super-transitions one device call runs: those between two
    checkpoints (the loop also caps the buffer's bytes); 1 when the tuner never freezes.
    It does not depend on whether a run folder is kept, so a run makes the same draws with
    and without one."""
    if adapt_until is None or adapt_until >= num_super_transitions:
        return 1
    return min(num_super_transitions - adapt_until, checkpoint_every)


def _check_everything(target, kernel, params, tuner, objective, sizes, checkpoint_every,
                      num_draws, output_dir) -> None:
    """Every check of the arguments, before anything is written (`adaptmc.run.checks`),
    and of the memory and disk the run's draws need (`adaptmc.options`)."""
    num_super_transitions, gradient_budget, num_chains, num_warmup, adapt_until, seed, thin \
        = sizes
    checks.check_run_args(
        target, kernel, params, tuner, num_super_transitions, gradient_budget, num_chains,
        num_warmup, checkpoint_every, thin,
    )
    if int(seed) != seed or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be an integer in [0, 2**63), got {seed}")
    checks.check_adapt_until(adapt_until, num_super_transitions)
    checks.check_objective(objective, num_chains, target.dim, kernel.cost(params))
    checks.check_tuner(tuner, kernel, params, target.dim, gradient_budget, thin)
    checks.check_num_draws(num_draws)
    check_run_resources(
        chains=num_chains, dim=target.dim, itemsize=target.initial_position.dtype.itemsize,
        draws_per_step=max(1, gradient_budget // kernel.cost(params) // thin),
        super_transitions=num_super_transitions, checkpoint_every=checkpoint_every,
        output_dir=output_dir)


def _start(setup: _Setup, positions, key_init, resume: bool,
           initial_states=None) -> _Progress:
    """Fresh chain and tuner states (the chains' from ``initial_states`` when given: no
    initial gradient spent), or those of the checkpoint when resuming."""
    target, kernel = setup.target, setup.kernel
    if initial_states is None:
        states, spent = init_states(target, kernel, positions), setup.num_chains
    else:
        states, spent = jax.tree.map(jnp.asarray, initial_states), 0
    tuner_state = setup.tuner.init(jax.random.fold_in(key_init, 1))
    state = _Progress(states, tuner_state, _empty_record(setup.tuner), spent)
    if not resume:
        return state
    saved = store.load_checkpoint(setup.run_dir, setup.key, states, tuner_state)
    if saved is not None:
        state.states, state.tuner_state = saved["states"], saved["tuner_state"]
        state.record = saved["record"]
        state.start_index, state.total_grads = saved["next"], saved["total_grads"]
        state.num_chunks, state.adapt_stop = saved["num_chunks"], saved["adapt_stop"]
    return state


def _advance(setup: _Setup, state: _Progress, loop, progress: bool,
             stop_after: int | None) -> bool:
    """Run the remaining super-transitions, checkpointing as configured; False when
    ``stop_after`` stopped the run early (its draws since the last checkpoint are saved).
    Once the tuner is frozen, the super-transitions up to the next checkpoint run as one
    device call (`_frozen_group`)."""
    bar = None
    if progress:
        bar = callbacks.ProgressBar(setup.num_super_transitions, state.start_index,
                                    setup.kernel.tunables)
    should_stop = callbacks.stop_after(stop_after, state.start_index)
    index = state.start_index
    try:
        while _more(setup, state, index):
            if should_stop(index):
                if setup.run_dir is not None and state.pending:
                    _checkpoint(setup, state, index)
                return False
            count = _group_size(setup, state, loop, index, stop_after)
            for step_params, summary, reward in _super_transitions(setup, state, loop, index,
                                                                   count):
                if bar is not None:
                    bar(step_params, summary, reward, _length(setup, state))
            index += count
            done = index - state.start_index
            last = not _more(setup, state, index)
            if setup.run_dir is not None and (done % setup.checkpoint_every == 0 or last):
                _checkpoint(setup, state, index)
    finally:
        if bar is not None:
            bar.close()
    if setup.run_dir is None:
        state.chunks.extend(state.pending)
        state.pending = []
    return True


def _shift(setup: _Setup, state: _Progress) -> int:
    """Super-transitions an early stop of the tuner freed (0 without one)."""
    if state.adapt_stop is None or setup.adapt_until is None:
        return 0
    return setup.adapt_until - state.adapt_stop


def _length(setup: _Setup, state: _Progress) -> int:
    """The run's super-transitions: as planned, less those an early stop freed; with
    ``num_draws``, those run so far plus as many as the draws still to keep need at the last
    one's rate (exact once they are kept)."""
    planned = setup.num_super_transitions - _shift(setup, state)
    if setup.num_draws is None:
        return planned
    kept = [n for n, warm in zip(state.record["num_draws"], state.record["warmup"],
                                 strict=True) if not warm]
    if not kept or kept[-1] < 1:
        return planned
    missing = max(0, setup.num_draws - sum(kept))
    return len(state.record["num_draws"]) + -(-missing // kept[-1])


def _kept_missing(setup: _Setup, state: _Progress) -> int:
    """Draws per chain still to keep (``num_draws`` mode)."""
    kept = sum(n for n, warm in zip(state.record["num_draws"], state.record["warmup"],
                                    strict=True) if not warm)
    return setup.num_draws - kept


def _more(setup: _Setup, state: _Progress, index: int) -> bool:
    """Whether super-transition ``index`` runs: within the run's length, or, with
    ``num_draws``, a warm-up one or draws still to keep."""
    if setup.num_draws is None:
        return index < _length(setup, state)
    return _is_warmup(setup, state, index) or _kept_missing(setup, state) > 0


def _adapting(setup: _Setup, state: _Progress, index: int) -> bool:
    end = setup.adapt_until if state.adapt_stop is None else state.adapt_stop
    return end is None or index < end


def _adapted(setup: _Setup, state: _Progress) -> int:
    """Super-transitions the tuner adapted (proposed and was updated) in."""
    if state.adapt_stop is not None:
        return state.adapt_stop
    return _length(setup, state) if setup.adapt_until is None else setup.adapt_until


def _is_warmup(setup: _Setup, state: _Progress, index: int) -> bool:
    """Whether super-transition ``index``'s draws are warm-up draws: those of the planned
    schedule's index (after an early stop, ``index`` plus the super-transitions freed)."""
    stopped = state.adapt_stop is not None and index >= state.adapt_stop
    return index + (_shift(setup, state) if stopped else 0) < setup.num_warmup


def _group_size(setup: _Setup, state: _Progress, loop, index: int,
                stop_after: int | None) -> int:
    """Super-transitions to run in one device call from ``index``: one while the tuner
    adapts; once frozen, up to the next checkpoint (or the end, or ``stop_after``)."""
    if _adapting(setup, state, index):
        return 1
    done = index - state.start_index
    ends = [_length(setup, state) - index, loop.max_group]
    if setup.num_draws is not None:  # whole super-transitions only; the last one alone
        if _is_warmup(setup, state, index):
            ends.append(setup.num_warmup - _shift(setup, state) - index)
        else:
            steps = setup.gradient_budget // setup.kernel.cost(_frozen(setup, state))
            ends.append(_kept_missing(setup, state) // max(1, steps // setup.thin))
    if setup.run_dir is not None:
        ends.append(setup.checkpoint_every - done % setup.checkpoint_every)
    if stop_after is not None:
        ends.append(stop_after - done)
    return max(1, min(ends))


def _super_transitions(setup: _Setup, state: _Progress, loop, index: int, count: int):
    """Propose (or take the frozen setting), run super-transitions ``index`` to ``index +
    count - 1`` of every chain in one device call, score each, update the tuner (``count``
    is 1 while it adapts) and record them; returns ``[(params, summary, reward)]``."""
    tuner, kernel, num_chains = setup.tuner, setup.kernel, setup.num_chains
    key_tune, keys = super_transition_keys(setup.key, index, num_chains, loop.max_group)
    tick = time.perf_counter()
    adapting = _adapting(setup, state, index)
    if adapting:
        proposal, state.tuner_state = tuner.propose(key_tune, state.tuner_state)
        step_params = checks.with_proposal(kernel, setup.params, proposal, setup.target.dim)
    else:
        proposal, step_params = state.frozen, _frozen(setup, state)
    state.params = step_params
    tuner_s = time.perf_counter() - tick

    num_steps = setup.gradient_budget // kernel.cost(step_params)
    if num_steps < setup.thin:
        raise ValueError(
            f"super-transition {index}: the tuner proposed {proposal}, whose step costs "
            f"{kernel.cost(step_params)} gradients, leaving no kept draw in the budget of "
            f"{setup.gradient_budget} (thin {setup.thin}): lower the thinning or raise the "
            "budget; the run is checkpointed up to the previous super-transition")
    if setup.num_draws is not None and not _is_warmup(setup, state, index):
        num_steps = min(num_steps, _kept_missing(setup, state) * setup.thin)
    tick = time.perf_counter()
    state.states, positions, stats, logdensity, totals = loop(
        keys, state.states, step_params, num_steps, setup.thin, count)
    wall_s = (time.perf_counter() - tick) / count
    out = []
    for j in range(count):
        summary, reward, objective_s = _score(
            setup, positions[:, j], {k: v[:, j] for k, v in stats.items()},
            tuple(t[:, j] for t in totals), num_steps)
        state.total_grads += summary["num_grads"]
        tick = time.perf_counter()
        warmup = _is_warmup(setup, state, index + j)
        if adapting:
            state.tuner_state = tuner.update(
                state.tuner_state, proposal, reward,
                {**summary, "positions": positions[:, j],
                 "num_transitions": num_steps * setup.num_chains})
            if tuner.done is not None and tuner.done(state.tuner_state):
                state.adapt_stop = index + 1
        values = {"reward": reward, **summary, "num_steps": num_steps,
                  "num_draws": num_steps // setup.thin, "warmup": warmup,
                  "wall_s": wall_s, "tuner_s": tuner_s + time.perf_counter() - tick,
                  "objective_s": objective_s}
        _record(setup, state, step_params, values)
        state.pending.append(store.chunk_arrays(
            index + j, positions[:, j], {k: v[:, j] for k, v in stats.items()},
            logdensity[:, j], step_params, kernel.tunables))
        out.append((step_params, summary, reward))
    return out


def _frozen(setup: _Setup, state: _Progress):
    """The kernel's parameters at the tuner's frozen best setting (computed once)."""
    if state.frozen is None:
        state.frozen = setup.tuner.best(state.tuner_state)
    return checks.with_proposal(setup.kernel, setup.params, state.frozen, setup.target.dim)


def _score(setup: _Setup, positions, stats: dict, totals, num_steps: int):
    """One super-transition's ``(summary, reward, objective seconds)`` from its draws and
    per-chain totals."""
    spent = int(np.sum(totals[0]))
    tick = time.perf_counter()
    reward = float("nan")
    if setup.objective is not None:
        reward = float(setup.objective(positions, stats, spent))
    objective_s = time.perf_counter() - tick
    summary = {
        "acceptance_rate": float(np.sum(totals[2]) / (num_steps * setup.num_chains)),
        "divergences": int(np.sum(totals[1])),
        "num_grads": spent,
    }
    return summary, reward, objective_s


def _record(setup: _Setup, state: _Progress, step_params, values: dict) -> None:
    """Append one super-transition's tuned parameters and ``RECORD_FIELDS`` values."""
    for name in setup.tuner.names:
        state.record[f"param/{name}"].append(float(np.mean(getattr(step_params, name))))
    for name in RECORD_FIELDS:
        state.record[name].append(values[name])


def _checkpoint(setup: _Setup, state: _Progress, next_index: int) -> None:
    """Write a checkpoint; the first of a new run puts its staged folder in place (and only
    then replaces the folder ``force`` allowed replacing)."""
    state.num_chunks = store.write_checkpoint(
        state.staging or setup.run_dir, state.pending, state.num_chunks, next_index,
        state.total_grads, state.states, state.tuner_state, state.record, setup.key,
        state.adapt_stop,
    )
    state.pending = []  # on disk now: memory holds one chunk of draws at most
    if state.staging is not None:
        io.commit_output_dir(state.staging, setup.run_dir, force=setup.force)
        state.staging = None


def _finish(setup: _Setup, state: _Progress, clocks: tuple[float, float],
            seed: int) -> RunResult:
    """Assemble the InferenceData, write it to the run folder, and return the result;
    ``clocks``: the wall clock and `compile_seconds` when the call began."""
    # a recipe's warm-up before the run is part of the time a user waits
    wall = time.perf_counter() - clocks[0] + float(setup.attrs.get("prior_wall_s", 0.0))
    compile_s = compile_seconds() - clocks[1] + float(setup.attrs.get("prior_compile_s", 0.0))
    chunks = state.chunks if setup.run_dir is None else \
        [io.chunk_path(setup.run_dir, i) for i in range(state.num_chunks)]
    idata = to_inference_data(
        setup.target, setup.kernel, chunks, state.record, setup.tuner, setup.num_warmup,
        attrs={
            "target": setup.target.name,
            "kernel": setup.kernel.name,
            "tuner": setup.tuner.name,
            "gradient_budget": setup.gradient_budget,
            "num_super_transitions": _length(setup, state),
            "num_chains": setup.num_chains,
            "seed": seed,
            "thin": setup.thin,
            "total_grad_evals": state.total_grads,
            **setup.attrs,
            "wall_s": wall,
            "compile_s": compile_s,
        },
    )
    idata.tuning.attrs["adapted"] = _adapted(setup, state)
    idata.tuning.attrs["adapt_until"] = -1 if setup.adapt_until is None else setup.adapt_until
    if setup.run_dir is None:
        _describe(setup, state, idata)
    else:  # draws to disk first (one chunk in memory), then the summary block by block
        idata = store.write_draws(setup.run_dir, idata,
                                  describe=lambda lazy: _describe(setup, state, lazy))
    return RunResult(idata, state.total_grads, wall, compile_s, setup.run_dir, state.states,
                     state.params)


def _describe(setup: _Setup, state: _Progress, idata) -> None:
    describe_tuning(idata, setup.tuner, state.tuner_state, setup.objective,
                    check_box=setup.adapt_until is not None)


def _empty_record(tuner: Tuner) -> dict[str, list]:
    record = {f"param/{name}": [] for name in tuner.names}
    record.update({name: [] for name in RECORD_FIELDS})
    return record
