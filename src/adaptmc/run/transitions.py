"""Tuning and sampling, the stage of `adaptmc.run.run` that runs super-transitions.

A super-transition (Wang, Mohamed & de Freitas 2013, Sec. 3; Neal 1996) spends a budget of
S gradient evaluations per chain: a kernel whose step costs c evaluations makes
``floor(S / c)`` steps. Parameters change only between super-transitions, chosen by a tuner
from the reward an objective computes on the draws of the previous one, so settings are
compared at equal cost. Chains run vectorised under ``jit`` (`SuperTransitionLoop`), sharing
the parameters of the super-transition.

The stage knows no kernel's parameter names: integer rounding of proposals, the per-draw
parameter columns and the progress bar come from the kernel's ``tunables``.

Once the tuner is frozen (after ``adapt_until``), the host has nothing to decide between
super-transitions: those up to the next checkpoint run as one device call, and the host
wakes to score, record and checkpoint them.

A tuner whose ``done(state)`` turns True (a stop rule, `adaptmc.tuners.stopping`) ends
adaptation there, before ``adapt_until``: its ``best`` is frozen at once and the tuning
super-transitions it no longer needs are dropped, not turned into sampling ones. The run
then has ``adapt_until - stop`` super-transitions fewer; the planned schedule after
``adapt_until`` moves earlier by as many (`Phases`), so the sampling phase keeps its length,
its draws and its thinning, and the run costs fewer gradients. The stop index is part of
every checkpoint, and the tuning group records it (``tuning.attrs["adapted"]``).

With ``num_draws`` the run keeps exactly that many draws per chain: after the warm-up
super-transitions it runs as many as it takes, the last one cut short (fewer steps, fewer
gradients), so the draws kept do not depend on the setting the tuner froze.

Every gradient evaluation is counted: one per chain for the initial point, then what each
step reports. The PRNG key of super-transition ``i`` is ``fold_in(key, i)``, so a run
resumed from a checkpoint makes exactly the draws of an uninterrupted one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adaptmc import io
from adaptmc.disk import telling_a_full_run
from adaptmc.kernels.base import Kernel
from adaptmc.run import callbacks, checks, store
from adaptmc.run.loop import SuperTransitionLoop, super_transition_keys
from adaptmc.run.phases import Phases
from adaptmc.targets.base import Target
from adaptmc.tuners.base import Tuner

TUNING_BUFFER = 1024
"""The fewest draws a tuned loop's buffer holds (`make_loop`): the budget of adaptive-hmc's
tuning, ``max(20 L_median, 8 L_high)`` gradients, is within it unless the warm-up's median
trajectory passes 51 steps or its longest 128; the loop caps its buffer's bytes itself."""

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


class Folder:
    """The run folder a stage checkpoints into: ``staging`` (a new run's sibling folder)
    until its first checkpoint is in place (`commit`), then ``run_dir``."""

    def __init__(self, run_dir: Path | None, staging: Path | None, force: bool):
        self.run_dir, self.staging, self.force = run_dir, staging, force

    @property
    def writing(self) -> Path | None:
        return self.staging or self.run_dir

    def commit(self) -> None:
        """After a checkpoint: put a new run's staged folder in place (and only then
        replace the folder ``force`` allowed replacing)."""
        if self.staging is not None:
            with telling_a_full_run(self.staging, "the run folder", 2**12):
                io.commit_output_dir(self.staging, self.run_dir, force=self.force)
            self.staging = None


@dataclass(frozen=True)
class Setup:
    """What stays fixed while super-transitions run."""

    target: Target
    kernel: Kernel
    params: Any
    tuner: Tuner
    objective: Any
    phases: Phases
    gradient_budget: int
    num_chains: int
    thin: int
    checkpoint_every: int
    key: Any
    folder: Folder


@dataclass
class Progress:
    """What the stage has done so far (everything a checkpoint saves, plus draws in
    memory); ``index``: the next super-transition."""

    states: Any
    tuner_state: Any
    record: dict
    total_grads: int
    start_index: int = 0
    index: int = 0
    num_chunks: int = 0
    chunks: list = field(default_factory=list)  # in memory only without a run folder
    pending: list = field(default_factory=list)  # draws since the last checkpoint
    frozen: dict | None = None  # the tuner's best setting, computed once adaptation stops
    adapt_stop: int | None = None  # where the tuner's ``done`` ended adaptation, if it did
    params: Any = None  # the kernel's parameters of the last super-transition run
    bar: Any = None  # the progress bar, shared by the tuning and sampling stages


class SuperTransitions:
    """Super-transitions: ``step`` runs the next group (one while the tuner adapts, up to
    the next checkpoint once frozen) until ``done``; ``limit`` caps a group (a test's
    ``stop_after``). `Tune` and `Sample` are its two stages, over one `Progress`."""

    name = "super-transitions"

    def __init__(self, setup: Setup, progress: bool, loop: SuperTransitionLoop | None = None):
        self.setup = setup
        self.loop = make_loop(setup) if loop is None else loop
        self.limit: int | None = None
        self.show = progress

    def done(self, state: Progress) -> bool:
        return not self.setup.phases.more(state, state.index)

    def position(self, state: Progress) -> int:
        return state.index

    def due(self, state: Progress) -> bool:
        """Whether a checkpoint is due after the last step."""
        done = state.index - state.start_index
        return done % self.setup.checkpoint_every == 0 or \
            not self.setup.phases.more(state, state.index)

    def step(self, state: Progress) -> Progress:
        """Propose (or take the frozen setting), run the group's super-transitions of every
        chain in one device call, then score, update the tuner and record each."""
        setup, index = self.setup, state.index
        count = self.group_size(state)
        key_tune, keys = super_transition_keys(setup.key, index, setup.num_chains,
                                               self.loop.max_group)
        proposal, step_params, num_steps, tuner_s = _setting(setup, state, key_tune)
        tick = time.perf_counter()
        state.states, positions, stats, logdensity, totals = self.loop(
            keys, state.states, step_params, num_steps, setup.thin, count)
        wall_s = (time.perf_counter() - tick) / count
        for j in range(count):
            draws = (positions[:, j], {k: v[:, j] for k, v in stats.items()},
                     logdensity[:, j], tuple(t[:, j] for t in totals))
            summary, reward = _account(setup, state, proposal, draws, num_steps,
                                       (wall_s, tuner_s))
            if self.show:
                self._progress(state, step_params, summary, reward)
        return state

    def _progress(self, state: Progress, params, summary: dict, reward: float) -> None:
        length = self.setup.phases.length(state)
        if state.bar is None:
            state.bar = callbacks.ProgressBar(length, state.index - 1,
                                              self.setup.kernel.tunables)
        state.bar(params, summary, reward, length)

    def group_size(self, state: Progress) -> int:
        """Super-transitions to run in one device call from ``state.index``: one while the
        tuner adapts; once frozen, up to the next checkpoint (or the end, or ``limit``)."""
        setup, phases, index = self.setup, self.setup.phases, state.index
        if phases.adapting(state, index):
            return 1
        done = index - state.start_index
        ends = [phases.length(state) - index, self.loop.max_group]
        if phases.num_draws is not None:  # whole super-transitions only; the last one alone
            if phases.is_warmup(state, index):
                ends.append(phases.num_warmup - phases.shift(state) - index)
            else:
                steps = setup.gradient_budget // setup.kernel.cost(_frozen(setup, state))
                ends.append(phases.kept_missing(state) // max(1, steps // setup.thin))
        if setup.folder.run_dir is not None:
            ends.append(setup.checkpoint_every - done % setup.checkpoint_every)
        if self.limit is not None:
            ends.append(self.limit)
        return max(1, min(ends))

    def save(self, state: Progress) -> None:
        """Write a checkpoint (the draws since the last one, then the state)."""
        setup = self.setup
        state.num_chunks = store.write_checkpoint(
            setup.folder.writing, state.pending, state.num_chunks, state.index,
            state.total_grads, state.states, state.tuner_state, state.record, setup.key,
            state.adapt_stop,
        )
        state.pending = []  # on disk now: memory holds one chunk of draws at most
        setup.folder.commit()


class Tune(SuperTransitions):
    """Tuning: the super-transitions in which the tuner proposes and learns, up to
    ``adapt_until`` or where its stop rule ended adaptation."""

    name = "tune"

    def done(self, state: Progress) -> bool:
        return not self.setup.phases.adapting(state, state.index) or super().done(state)


class Sample(SuperTransitions):
    """Sampling: the super-transitions at the tuner's frozen best, grouped up to the next
    checkpoint, until the run's length (or ``num_draws`` kept draws)."""

    name = "sample"


def make_loop(setup: Setup) -> SuperTransitionLoop:
    """The stage's compiled loop: a buffer for the most draws a super-transition can keep
    (one per gradient when a tuner may change ``L``: one compilation; ``budget // cost``
    when it changes nothing), and frozen super-transitions grouped up to the next
    checkpoint (`Phases.max_group`). A tuner's buffer holds at least `TUNING_BUFFER` draws:
    its budget follows from the warm-up's trajectories, which differ between seeds, and a
    buffer sized by it alone made another seed compile the loop again."""
    cost = 1 if setup.tuner.names else setup.kernel.cost(setup.params)
    kept = setup.gradient_budget // cost // setup.thin
    if setup.tuner.names:
        kept = max(kept, TUNING_BUFFER)
    return SuperTransitionLoop(setup.target, setup.kernel, setup.num_chains, max_kept=kept,
                               max_group=setup.phases.max_group(setup.checkpoint_every))


def _setting(setup: Setup, state: Progress, key_tune):
    """``(proposal, params, num_steps, tuner seconds)`` of super-transition ``state.index``:
    the tuner's proposal while it adapts, else its frozen best."""
    index, kernel = state.index, setup.kernel
    tick = time.perf_counter()
    if setup.phases.adapting(state, index):
        proposal, state.tuner_state = setup.tuner.propose(key_tune, state.tuner_state)
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
    if setup.phases.num_draws is not None and not setup.phases.is_warmup(state, index):
        num_steps = min(num_steps, setup.phases.kept_missing(state) * setup.thin)
    return proposal, step_params, num_steps, tuner_s


def _account(setup: Setup, state: Progress, proposal, draws, num_steps: int, seconds):
    """Score super-transition ``state.index`` from its ``draws`` (positions, stats,
    log densities, per-chain totals), update the tuner while it adapts, record it and keep
    its draws; ``state.index`` moves on. Returns ``(summary, reward)``."""
    positions, stats, logdensity, totals = draws
    index, step_params = state.index, state.params
    summary, reward, objective_s = _score(setup, positions, stats, totals, num_steps)
    state.total_grads += summary["num_grads"]
    tick = time.perf_counter()
    warmup = setup.phases.is_warmup(state, index)
    if setup.phases.adapting(state, index):
        tuner = setup.tuner
        state.tuner_state = tuner.update(
            state.tuner_state, proposal, reward,
            {**summary, "positions": positions,
             "num_transitions": num_steps * setup.num_chains})
        if tuner.done is not None and tuner.done(state.tuner_state):
            state.adapt_stop = index + 1
    values = {"reward": reward, **summary, "num_steps": num_steps,
              "num_draws": num_steps // setup.thin, "warmup": warmup,
              "wall_s": seconds[0], "tuner_s": seconds[1] + time.perf_counter() - tick,
              "objective_s": objective_s}
    _record(setup, state, step_params, values)
    state.pending.append(store.chunk_arrays(index, positions, stats, logdensity,
                                            step_params, setup.kernel.tunables))
    state.index += 1
    return summary, reward


def _frozen(setup: Setup, state: Progress):
    """The kernel's parameters at the tuner's frozen best setting (computed once)."""
    if state.frozen is None:
        state.frozen = setup.tuner.best(state.tuner_state)
    return checks.with_proposal(setup.kernel, setup.params, state.frozen, setup.target.dim)


def _score(setup: Setup, positions, stats: dict, totals, num_steps: int):
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


def _record(setup: Setup, state: Progress, step_params, values: dict) -> None:
    """Append one super-transition's tuned parameters and ``RECORD_FIELDS`` values."""
    for name in setup.tuner.names:
        state.record[f"param/{name}"].append(float(np.mean(getattr(step_params, name))))
    for name in RECORD_FIELDS:
        state.record[name].append(values[name])


def empty_record(tuner: Tuner) -> dict[str, list]:
    record = {f"param/{name}": [] for name in tuner.names}
    record.update({name: [] for name in RECORD_FIELDS})
    return record
