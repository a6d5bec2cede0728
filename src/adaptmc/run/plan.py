"""What `adaptmc.run.run` consumes: a `Plan` (what to run: the kernel, its parameters, the
tuner, the run's length and, optionally, a warm-up stage before it), `RunOptions` (how: chains,
seed, starts, the run folder, checkpoints, progress), and the one place a run's PRNG keys
are derived from its seed (`run_keys`).

A plan is data: its warm-up is a stage object (``start``, ``step`` until ``done``, ``save``
and ``load`` at any block, ``finish`` giving the `Prepared` plan the run goes on with), not
a closure, so the driver owns the warm-up as it owns tuning and sampling: it derives its key,
counts its gradients, checkpoints it and resumes it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from adaptmc import tuners
from adaptmc.adaptation.host_random import key_rng, new_keys, seed_rng
from adaptmc.kernels.base import Kernel
from adaptmc.tuners.base import Tuner


class Prepared(NamedTuple):
    """What a warm-up stage's ``finish`` returns: the plan to run (its settings now measured
    on the target), the chains' positions ``(chains, dim)``, the gradients the warm-up spent
    over all chains, and what it measured (JSON-able); states: None, or the chains' kernel
    states ``plan`` continues from (a trial's end, the kernel's own adapted state
    included), which then replace ``positions``; kept_grads: the gradients ``finish``
    spent on transitions the sampling stage keeps as its first draws (counted there, not
    in ``num_grads``; MAMS's last measurement)."""

    plan: Any
    positions: np.ndarray
    num_grads: int
    record: dict
    states: Any = None
    kept_grads: int = 0


class Plan(NamedTuple):
    """What `adaptmc.run.run` runs, besides the run-level `RunOptions`.

    name: the recipe; kernel, params: the kernel and its starting ``Params``; tuner,
    objective: what sets the parameters between super-transitions and the reward it learns
    from (None: no reward); num_super_transitions, gradient_budget: the run's length and the
    gradients per chain of one super-transition; num_warmup: leading super-transitions whose
    draws are not kept; adapt_until: the super-transition from which the tuner's best setting
    is frozen (None: adapt throughout); box: the bandit's search box (None without a bandit);
    plot_skip: leading super-transitions the bandit never saw (its plots leave them out);
    options: the recipe's options as given, for the run's config; warmup: None, or a stage
    run on the chains before the first super-transition (a warm-up whose measurements set the
    kernel's parameters, the tuner's box and the run's length; its ``finish`` returns the
    `Prepared` plan that replaces this one); thin: keep every ``thin``-th draw; draws: None,
    or the kept draws per chain, exactly: the run goes on after its ``num_warmup``
    super-transitions until each chain kept that many (its last super-transition cut
    short), ``num_super_transitions`` being only the planned length; nuts: None, or
    ``(arm, force)``: after tuning, NUTS under the warm-up's metric
    (`adaptmc.adaptation.nuts_sampling.NutsArm`) samples instead of the frozen setting
    when its reward is the higher, or always with ``force``
    (`adaptmc.run.nuts_stage.choose_sampler`); sampling: None, or what makes the sampling
    stage in place of `adaptmc.run.transitions.Sample`, ``sampling(setup, progress, loop)``
    (MAMS's, `adaptmc.run.mams_stage.MamsSample`).
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
    warmup: Any = None
    thin: int = 1
    draws: int | None = None
    nuts: Any = None
    sampling: Any = None

    @property
    def prepare(self) -> Callable | None:
        """The warm-up run on its own, not resumable: ``prepare(target, positions, key) ->
        Prepared`` (None without a warm-up)."""
        if self.warmup is None:
            return None
        return lambda target, positions, key: run_stage(self.warmup, target, positions, key)


def run_stage(stage, target, positions, key, progress: bool | None = False) -> Prepared:
    """A warm-up stage from start to finish, outside a run (no checkpoint)."""
    state = stage.start(target, positions, key, progress)
    while not stage.done(state):
        state = stage.step(state)
    return stage.finish(state)


class RunOptions(NamedTuple):
    """How `adaptmc.run.run` runs a plan.

    num_chains, seed; initial_positions ``(num_chains, dim)`` (default: the target's plus
    ``U(-init_jitter, init_jitter)``) or initial_states (every chain's kernel state, e.g. a
    `RunResult.states`: kernel-internal state included, no gradient spent); output_dir,
    force, resume, checkpoint_every: the run folder, overwrite it, continue it, blocks
    (super-transitions, warm-up chunks) between checkpoints; thin (None: the plan's);
    progress; config: what the run folder's config.json records besides the fingerprint;
    stop_after: stop as if killed after this many blocks of this call (tests); prior_grads,
    attrs: gradients spent before the run (counted in its total) and InferenceData
    attributes (``prior_wall_s``, ``prior_compile_s`` add to the run's seconds).
    """

    num_chains: int = 4
    seed: int = 0
    initial_positions: np.ndarray | None = None
    initial_states: Any = None
    init_jitter: float = 0.5
    output_dir: str | Path | None = None
    force: bool = False
    resume: bool = False
    checkpoint_every: int = 10
    thin: int | None = None
    progress: bool = True
    config: dict | None = None
    stop_after: int | None = None
    prior_grads: int = 0
    attrs: dict | None = None


def run_keys(seed: int, stage: str | None = "run"):
    """A run's PRNG keys, all from ``seed``: ``"init"`` draws the chains' jittered starts
    and initialises the tuner, ``"run"`` is folded with a super-transition's index for its
    keys (`adaptmc.run.loop.super_transition_keys`), ``"tuner"`` initialises the tuner,
    ``"warmup"`` is the warm-up stage's, ``"root"`` the seed's own; each its own stream of
    ``seed`` (`adaptmc.adaptation.host_random`: on the host, no compiled program);
    ``stage`` None: the dict of all."""
    keys = {name: new_keys(seed_rng(seed, i)) for i, name in enumerate(KEY_NAMES)}
    return keys if stage is None else keys[stage]


KEY_NAMES = ("root", "init", "run", "tuner", "warmup")
"""The run's keys (`run_keys`), each the stream of ``seed`` at its index."""


def run_start(seed: int, start, num_chains: int, init_jitter: float):
    """``(keys, positions)``: `run_keys` of ``seed`` (the dict of all) and the chains'
    default starts ``start + U(-init_jitter, init_jitter)`` per chain and coordinate from
    its ``"init"`` key (`jittered`), on the host."""
    keys = run_keys(seed, None)
    return keys, jittered(keys["init"], start, num_chains, init_jitter)


def zero_key():
    """``jax.random.key(0)`` (threefry's key data of seed 0 are zeros), with no program."""
    return jax.random.wrap_key_data(np.zeros(2, np.uint32))


def jittered(key, start, num_chains: int, init_jitter) -> np.ndarray:
    """``start + U(-init_jitter, init_jitter)`` per chain and coordinate, ``(num_chains,
    dim)`` in ``start``'s dtype, drawn on the host from ``key``
    (`adaptmc.adaptation.host_random.key_rng`)."""
    start = np.asarray(start)
    jitter = key_rng(key).uniform(-init_jitter, init_jitter, (num_chains, start.shape[0]))
    return start + jitter.astype(start.dtype)


PLAN_SETTINGS = ("num_super_transitions", "gradient_budget", "tuner", "objective",
                 "num_warmup", "adapt_until")


def as_plan(plan, params, options: RunOptions | None, settings: dict):
    """``(plan, options)`` from `run`'s arguments: a `Plan` and `RunOptions` as they are,
    or a kernel with its ``params`` and keyword settings (the plan's fields, ``num_draws``
    for its ``draws``, and `RunOptions`' fields), each name checked; ``run(target, plan,
    RunOptions(...))`` passes the options third."""
    if isinstance(params, RunOptions) and options is None:
        params, options = None, params
    options = RunOptions() if options is None else options
    given = {k: v for k, v in settings.items() if k in RunOptions._fields}
    rest = {k: v for k, v in settings.items() if k not in given}
    if "num_draws" in rest:
        rest["draws"] = rest.pop("num_draws")
    unknown = sorted(set(rest) - set(PLAN_SETTINGS) - {"draws"})
    if unknown:
        raise TypeError(f"run() got unexpected keyword argument(s) {', '.join(unknown)}")
    options = options._replace(**given)
    if isinstance(plan, Plan):
        if params is not None:
            raise TypeError("run(target, plan): the plan holds its parameters")
        return plan._replace(**rest), options
    for name in ("num_super_transitions", "gradient_budget"):
        if name not in rest:
            raise TypeError(f"run() missing keyword argument {name!r}")
    kernel = plan
    rest.setdefault("num_warmup", 0)
    rest.setdefault("adapt_until", None)
    rest.setdefault("objective", None)
    tuner = rest.pop("tuner", None)
    made = Plan("run", kernel, kernel.Params() if params is None else params,
                tuners.fixed() if tuner is None else tuner, **rest)
    return made, options
