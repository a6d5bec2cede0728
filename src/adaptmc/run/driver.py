"""The driver: `run` runs a `Plan`'s stages, one block at a time, and owns what they share.

A plan's stages are its warm-up (when it has one: `Plan.warmup`, e.g.
`adaptmc.adaptation.early_stage.EarlyWarmupStage`), whose ``finish`` gives the plan the run
goes on with, then tuning and sampling (`adaptmc.run.transitions.Tune` and `Sample`, two
stages over one state of super-transitions). Every stage has the same shape: ``step``
advances it by one block (a warm-up chunk, a group of super-transitions) until ``done``;
``save`` checkpoints it. The driver (`Context`) holds what they share: the target, the
chains' starts, the PRNG keys (`adaptmc.run.plan.run_keys`, the one place they come from
the seed), the run folder and its checkpoints (every ``checkpoint_every`` blocks, in the
warm-up as in tuning and sampling), the gradient count, the seconds and ``stop_after``.
A run killed anywhere resumes from its last checkpoint with the draws of an uninterrupted one.

The path of one run: ``run -> stage.step -> SuperTransitionLoop.__call__ -> one_chain ->
body -> kernel.step`` (the warm-up's: ``run -> stage.step -> _Chains.advance -> one ->
body -> NUTS``); the compiled programs are traced in those frames.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from adaptmc import io
from adaptmc.kernels.base import Kernel
from adaptmc.options import check_run_resources
from adaptmc.run import checks, faults, store
from adaptmc.run.compile_clock import census, compile_events, compile_seconds
from adaptmc.run.idata import describe_tuning, to_inference_data
from adaptmc.run.lock import owning
from adaptmc.run.loop import (
    checked_jitter,
    default_starts,
    init_ahead,
    initial_positions_checked,
)
from adaptmc.run.nuts_stage import NutsSample, choose_sampler
from adaptmc.run.plan import Plan, RunOptions, as_plan, run_keys, run_start
from adaptmc.run.resume import load_warmup, start_super_transitions, write_warmup
from adaptmc.run.starts import finite_starts
from adaptmc.run.transitions import (
    RECORD_FIELDS,
    Folder,
    Progress,
    Sample,
    SuperTransitions,
)
from adaptmc.targets.base import Target

__all__ = ["RECORD_FIELDS", "RunResult", "run"]


@dataclass
class RunResult:
    """What `run` returns.

    idata: ArviZ InferenceData with groups posterior, sample_stats, warmup_posterior,
    warmup_sample_stats and tuning; num_grads: gradient evaluations over all chains,
    initial points, warm-up, tuning and the run's checks included (its attr
    ``check_grads``: each chain's start checked before and after a warm-up, and the run
    folder's fingerprint, one point each, and the retries of a start not finite,
    `adaptmc.run.starts`); output_dir: the run folder (or None);
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


def run(target: Target, plan: Plan | Kernel, params: Any | None = None,
        options: RunOptions | None = None, **settings) -> RunResult:
    """Run ``plan`` on ``target``: its warm-up stage, if any, then its super-transitions.

    ``plan``: a `Plan`, or a kernel with its ``params`` (default: the kernel's) and the
    plan's fields as keywords (``num_super_transitions``, ``gradient_budget``, ``tuner``,
    ``objective``, ``num_warmup``, ``adapt_until``, ``num_draws``); ``options``: the
    `RunOptions` (chains, seed, starts, run folder, resume, checkpoints, ``stop_after``),
    each also a keyword. ``run(target, hmc, HMCParams(0.3, 5), num_super_transitions=8,
    gradient_budget=90, output_dir="out")`` and ``run(target, plan, RunOptions(...))`` are
    the same call.
    """
    plan, options = as_plan(plan, params, options, settings)
    with owning(options.output_dir, resume=options.resume):  # one process owns a run folder
        ctx = Context(target, plan, options)
        with ctx.guarded():
            for stage, state in ctx.stages():
                while not stage.done(state):
                    if ctx.stopping(stage):
                        return ctx.stopped(stage, state)
                    state = stage.step(state)
                    ctx.stepped(stage, state)
        return ctx.finish()


class Context:
    """What a run's stages share: the target, the plan (replaced by the warm-up's), the
    options, the keys, the run folder, the blocks run in this call and the clocks."""

    def __init__(self, target: Target, plan: Plan, options: RunOptions):
        self.clocks = (time.perf_counter(), compile_seconds(), compile_events())
        self.target, self.plan, self.options = target, plan, options
        seed = options.seed
        if int(seed) != seed or not 0 <= seed < 2**63:
            raise ValueError(f"seed must be an integer in [0, 2**63), got {seed}")
        self.starts, self.initial_states = options.initial_positions, options.initial_states
        default = plan.warmup is not None and self.initial_states is None and self.starts is None
        if default and hasattr(plan.warmup, "compile_ahead"):  # while the starts are made
            plan.warmup.compile_ahead(target, options.num_chains)
        # the run's keys and its default starts (`default_positions`') in one program
        self.keys, starts = run_start(seed, target.initial_position, options.num_chains,
                                      checked_jitter(options.init_jitter)) \
            if default else (run_keys(seed, None), self.starts)
        self.key_init, self.key_run = self.keys["init"], self.keys["run"]
        self.thin = plan.thin if options.thin is None else options.thin
        self.prior_grads, self.attrs = int(options.prior_grads), dict(options.attrs or {})
        # the checks' gradients: every chain's start, once before a warm-up and once after
        # it (one point each), and the fingerprint's probe point
        self.check_grads = 0
        # a resumed call's gradients spent again to stand where its checkpoint stood (the
        # record's attr ``resume_grads``; not in its total, the uninterrupted run's)
        self.resume_grads = self.warmup_redone = 0
        if plan.warmup is None:
            self.starts = self._check_plan(after_warmup=self.prior_grads > 0)
        elif self.initial_states is None:
            self.starts = self._checked_starts(self.starts, starts)
        checks.check_run_args(target, plan.kernel, plan.params, plan.tuner,
                              plan.num_super_transitions, plan.gradient_budget,
                              options.num_chains, plan.num_warmup, options.checkpoint_every, 1)
        self.folder = _open(target, plan, options, self.thin)
        self.check_grads += 1  # the fingerprint's probe point (`store.target_digest`)
        self.blocks, self.first, self.last = 0, {}, {}
        self.sampling: tuple[SuperTransitions, Progress] | None = None

    def stages(self):
        """``(stage, state)`` of every stage in turn, each started or resumed from its
        checkpoint; the run loop steps each to its end before the next is made."""
        if self.plan.warmup is not None:
            stage = self.plan.warmup
            if self.options.progress:
                print(f"{self.plan.name}: warm-up ...", flush=True)
            tick, compiled_before = time.perf_counter(), compile_seconds()
            state = stage.start(self.target, np.asarray(self.starts), self.keys["warmup"],
                                None if self.options.progress else False)
            if getattr(stage, "init_kernel", None) is not None:  # compiled during the warm-up
                init_ahead(self.target, stage.init_kernel, np.asarray(self.starts))
            if self.options.resume:
                fresh = getattr(state, "num_grads", 0)
                state, loaded = load_warmup(stage, state, self.folder.run_dir)
                if loaded:  # redone: the checks so far and the warm-up's fresh start
                    self.warmup_redone = fresh
                    self.resume_grads = self.check_grads + fresh
            self.first[id(stage)] = stage.position(state)
            yield stage, state
            prepared = stage.finish(state)
            if self.warmup_redone:  # what ``finish`` computes (MAMS's adaptation), redone
                self.warmup_redone += prepared.num_grads + prepared.kept_grads - getattr(
                    state, "num_grads", prepared.num_grads)
            self._prepared(prepared, tick, compiled_before)
        tune, state = start_super_transitions(self)
        make = Sample if self.plan.sampling is None else self.plan.sampling
        self.sampling = (make(tune.setup, tune.show, tune.loop), state)
        first = self.first[id(tune)] = state.index
        yield tune, state
        if self.plan.nuts is not None:  # NUTS under the warm-up's metric, if its reward wins
            self.sampling = (self._sampler(tune, state), state)
        self.first[id(self.sampling[0])] = first
        yield self.sampling

    def _sampler(self, tune, state):
        """The sampling stage after tuning: the frozen HMC's or NUTS's
        (`adaptmc.run.nuts_stage.choose_sampler`; recorded in the ``sampler`` attr)."""
        arm, force = self.plan.nuts
        choice = choose_sampler(tune.setup, state, arm, force)
        self.attrs["sampler"] = json.dumps(choice, default=io.jsonable)
        if choice["sampler"] == "hmc":
            return self.sampling[0]
        return NutsSample(tune.setup, tune.show, tune.loop, arm)

    def _prepared(self, prepared, tick: float, compiled_before: float) -> None:
        """The run goes on with the warm-up's plan, from where its chains stand."""
        self.plan, self.starts = prepared.plan, prepared.positions
        self.initial_states = prepared.states
        if prepared.states is not None:  # continue the chains, kernel state included
            self.starts = None
        self.thin = self.plan.thin if self.options.thin is None else self.options.thin
        self.prior_grads += prepared.num_grads
        self.attrs.update({"warmup": json.dumps(prepared.record, default=io.jsonable),
                           "warmup_wall_s": time.perf_counter() - tick,
                           "warmup_compile_s": compile_seconds() - compiled_before})
        for name in ("portfolio", "sampler"):  # the sampler a warm-up chose (MAMS)
            if name in prepared.record:
                self.attrs[name] = json.dumps(prepared.record[name], default=io.jsonable)
        if self.options.progress:
            box, tuning, nuts = prepared.record.get("box"), self.plan.num_warmup, self.plan.nuts
            then = f"tuning up to {tuning} super-transitions in the box {box}" if box and \
                tuning > 0 else f"sampling with {'NUTS' if nuts else self.plan.kernel.name}"
            print(f"{self.plan.name}: warm-up done ({prepared.num_grads:,} gradients); "
                  f"{then}", flush=True)
        self.starts = self._check_plan(after_warmup=True)

    def _check_plan(self, after_warmup: bool = False):
        """Every check of the plan and options (`_check_everything`); the chains' checked
        starting positions."""
        plan, options = self.plan, self.options
        _check_everything(self.target, plan, options, self.thin)
        if self.starts is None and self.initial_states is None:
            return self._checked_starts(None)
        starts = _starts(self.target, options.num_chains, self.starts, self.initial_states,
                         options.init_jitter, self.key_init, after_warmup)
        self.check_grads += options.num_chains
        return starts

    def _checked_starts(self, given, jittered=None):
        """The starts ``given`` checked (one `ValueError` where one is not finite), or, None,
        the run's own (`adaptmc.run.loop.default_starts`, from its ``jittered`` first points
        when made already: retried as Stan does, each point evaluated counted; the retries
        in the ``start_retries`` attr when there were any)."""
        chains = self.options.num_chains
        if given is not None:
            self.check_grads += chains
            return initial_positions_checked(self.target, chains, given,
                                             self.options.init_jitter, None)
        made = default_starts(self.target, chains, self.key_init, self.options.init_jitter) \
            if jittered is None else finite_starts(self.target, jittered, self.key_init)
        self.check_grads += made.evaluations
        if any(made.retries):
            self.attrs["start_retries"] = json.dumps(list(made.retries))
        return made.positions

    def stopping(self, stage) -> bool:
        """Whether ``stop_after`` blocks ran in this call (then the run stops as if
        killed); else the blocks the next step may run."""
        left = None if self.options.stop_after is None else \
            self.options.stop_after - self.blocks
        if hasattr(stage, "limit"):
            stage.limit = left
        return left is not None and left <= 0

    def stepped(self, stage, state) -> None:
        """After a step: count its blocks and checkpoint when due."""
        position = stage.position(state)
        self.blocks += position - self.last.get(id(stage), self.first[id(stage)])
        self.last[id(stage)] = position
        if self.folder.run_dir is not None and self._due(stage, state):
            self._checkpoint(stage, state)

    def _due(self, stage, state) -> bool:
        if isinstance(stage, SuperTransitions):
            return stage.due(state)
        done = stage.position(state) - self.first[id(stage)]
        return done % self.options.checkpoint_every == 0 or stage.done(state)

    def _checkpoint(self, stage, state) -> None:
        if isinstance(stage, SuperTransitions):
            stage.save(state)
        elif (arrays := stage.save(state)) is not None:  # None: a stage not resumable
            write_warmup(self.folder, arrays)

    def stopped(self, stage, state) -> RunResult:
        """The result of a run stopped by ``stop_after`` (what it did since the last
        checkpoint saved)."""
        if self.folder.run_dir is not None and (
                not isinstance(stage, SuperTransitions) or state.pending):
            self._checkpoint(stage, state)
        grads = state.total_grads if self.sampling else \
            getattr(state, "num_grads", 0) + self.prior_grads + self.check_grads
        final = self.sampling[1] if self.sampling else None
        return RunResult(None, grads, time.perf_counter() - self.clocks[0],
                         compile_seconds() - self.clocks[1], self.folder.run_dir,
                         None if final is None else final.states,
                         None if final is None else final.params)

    @contextlib.contextmanager
    def guarded(self):
        """A new run writes into a staged folder, put in place (replacing an old run) at
        its first checkpoint; on any failure before that the staged folder is removed and
        an old run is left as it was. An exception raised by the user's log density becomes
        one `faults.failed_run` error."""
        staged, folder = self.folder.staging, self.folder
        with faults.capture_callback_errors() as caught:
            try:
                yield
            except Exception:
                if not caught or folder.run_dir is None:
                    io.discard_staged(staged)
                    raise
                index = 0 if self.sampling is None else len(self.sampling[1].record["reward"])
                failure = faults.failed_run(caught, index, folder.run_dir, folder.staging,
                                            committed=folder.staging is None)
                io.discard_staged(staged)
                raise failure from None
            except BaseException:
                io.discard_staged(staged)
                raise
            finally:
                if self.sampling is not None and self.sampling[1].bar is not None:
                    self.sampling[1].bar.close()
        io.discard_staged(folder.staging)  # stopped (a test's stop_after) before a checkpoint

    def finish(self) -> RunResult:
        return _finish(self, *self.sampling)


def _open(target, plan: Plan, options: RunOptions, thin: int) -> Folder:
    """The run folder (`store.open_run_dir`): for a new run, the sibling folder it writes
    into until its first checkpoint; the fingerprint is the plan's as given (a warm-up's
    plan, before the warm-up measured anything)."""
    facts = store.fingerprint(target, plan.kernel, plan.params, plan.tuner,
                              plan.num_super_transitions, plan.gradient_budget,
                              options.num_chains, plan.num_warmup, plan.adapt_until,
                              options.seed, thin, plan.objective)
    facts.update({} if plan.draws is None else {"num_draws": int(plan.draws)})
    written = store.open_run_dir(options.output_dir, resume=options.resume,
                                 force=options.force, config=options.config, fingerprint=facts)
    run_dir = None if options.output_dir is None else Path(options.output_dir)
    return Folder(run_dir, None if written == run_dir else written, options.force)


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


def _check_everything(target, plan: Plan, options: RunOptions, thin: int) -> None:
    """Every check of the arguments, before anything is written (`adaptmc.run.checks`),
    and of the memory and disk the run's draws need (`adaptmc.options`)."""
    kernel, params, tuner, chains = plan.kernel, plan.params, plan.tuner, options.num_chains
    budget, n = plan.gradient_budget, plan.num_super_transitions
    checks.check_run_args(target, kernel, params, tuner, n, budget, chains, plan.num_warmup,
                          options.checkpoint_every, thin)
    checks.check_adapt_until(plan.adapt_until, n)
    checks.check_objective(plan.objective, chains, target.dim, kernel.cost(params))
    checks.check_tuner(tuner, kernel, params, target.dim, budget, thin)
    checks.check_num_draws(plan.draws)
    check_run_resources(
        chains=chains, dim=target.dim, itemsize=target.initial_position.dtype.itemsize,
        draws_per_step=max(1, budget // kernel.cost(params) // thin), super_transitions=n,
        checkpoint_every=options.checkpoint_every, output_dir=options.output_dir)


def _finish(ctx: Context, stage: SuperTransitions, state: Progress) -> RunResult:
    """Assemble the InferenceData, write it to the run folder, and return the result."""
    setup, phases = stage.setup, stage.setup.phases
    # a recipe's warm-up before the run is part of the time a user waits
    wall = time.perf_counter() - ctx.clocks[0] + float(ctx.attrs.get("prior_wall_s", 0.0))
    compile_s = compile_seconds() - ctx.clocks[1] + float(ctx.attrs.get("prior_compile_s", 0.0))
    run_dir = setup.folder.run_dir
    chunks = state.chunks if run_dir is None else \
        [io.chunk_path(run_dir, i) for i in range(state.num_chunks)]
    attrs = {"target": ctx.target.name, "kernel": setup.kernel.name,
             "tuner": setup.tuner.name, "gradient_budget": setup.gradient_budget,
             "num_super_transitions": phases.length(state), "num_chains": setup.num_chains,
             "seed": ctx.options.seed, "thin": setup.thin,
             "total_grad_evals": state.total_grads, "check_grads": ctx.check_grads,
             **({"resume_grads": ctx.resume_grads} if ctx.options.resume else {}),
             **ctx.attrs, "wall_s": wall,
             "compile_s": compile_s,
             "compile_census": json.dumps(census(ctx.clocks[2]))}
    if run_dir is None:
        state.chunks.extend(state.pending)
        state.pending = []
    idata = to_inference_data(setup.target, setup.kernel, chunks, state.record, setup.tuner,
                              phases.num_warmup, attrs=attrs)
    idata.tuning.attrs["adapted"] = phases.adapted(state)
    idata.tuning.attrs["adapt_until"] = -1 if phases.adapt_until is None else phases.adapt_until

    def describe(data) -> None:
        describe_tuning(data, setup.tuner, state.tuner_state, setup.objective,
                        check_box=phases.adapt_until is not None)

    if run_dir is None:
        describe(idata)
    else:  # draws to disk first (one chunk in memory), then the summary block by block
        idata = store.write_draws(run_dir, idata, describe=describe)
    return RunResult(idata, state.total_grads, wall, compile_s, run_dir, state.states,
                     state.params)


