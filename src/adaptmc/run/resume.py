"""Starting and resuming the stages of a run from its folder: the warm-up's checkpoint
(``warmup.npz``: whatever the warm-up stage's ``save`` returns, plus the run it belongs to)
and the super-transitions stage's (``checkpoint.npz``, `adaptmc.run.store`)."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np

from adaptmc import io
from adaptmc.disk import telling_a_full_run
from adaptmc.run import store
from adaptmc.run.idata import variables_ahead
from adaptmc.run.loop import init_states
from adaptmc.run.phases import Phases
from adaptmc.run.transitions import (
    Folder,
    Progress,
    Setup,
    Tune,
    empty_record,
)

WARMUP = "warmup.npz"


def write_warmup(folder: Folder, arrays: dict) -> None:
    """The warm-up stage's state ``arrays`` (its ``save``), atomically, with the run's id;
    the first checkpoint of a new run puts its folder in place."""
    run_id = store.run_id(store.read_config(folder.writing)["fingerprint"])
    meta = np.frombuffer(json.dumps({"run": run_id}).encode(), dtype=np.uint8)
    need = sum(np.asarray(v).nbytes for v in arrays.values())
    with telling_a_full_run(folder.writing, "the warm-up's checkpoint", need):
        io.atomic_savez(folder.writing / WARMUP, {**arrays, "run/meta": meta})
    folder.commit()


def load_warmup(stage, state, run_dir: Path):
    """``(state, loaded)``: ``state`` (the warm-up just started) set to the checkpoint in
    ``run_dir``, if there is one (``loaded``); a damaged file or one of another run is one
    clear `ValueError`."""
    path = run_dir / WARMUP
    if not path.is_file():
        return state, False
    try:
        arrays = io.load_npz(path)
        saved = json.loads(bytes(arrays.pop("run/meta")).decode())["run"]
        if saved != store.run_id(store.read_config(run_dir)["fingerprint"]):
            raise ValueError("written by another run")
        return stage.load(state, arrays), True
    except (ValueError, KeyError, OSError, EOFError, TypeError, IndexError) as err:
        raise ValueError(f"cannot resume: {str(path)!r} is damaged ({io.describe_error(err)}); "
                         "start the run again with --force (force=True)") from None


def start_super_transitions(ctx) -> tuple[Tune, Progress]:
    """The tuning stage of the run ``ctx`` (`adaptmc.run.driver.Context`) and the state it
    shares with the sampling stage: fresh chain and tuner states (the chains' from
    ``initial_states`` when given: no initial gradient spent), or those of the checkpoint
    when resuming."""
    setup = new_setup(ctx)
    stage = Tune(setup, ctx.options.progress)
    if ctx.plan.draws and ctx.thin == 1 and not ctx.options.resume:  # compiled meanwhile
        variables_ahead(setup.target, (setup.num_chains, ctx.plan.draws, setup.target.dim),
                        np.asarray(setup.target.initial_position).dtype)
    if ctx.initial_states is None:
        states, spent = init_states(setup.target, setup.kernel, ctx.starts), setup.num_chains
    else:
        states, spent = jax.tree.map(jax.device_put, ctx.initial_states), 0  # no program
    tuner_state = setup.tuner.init(ctx.keys["tuner"])
    state = Progress(states, tuner_state, empty_record(setup.tuner), spent)
    saved = None
    if ctx.options.resume:
        saved = store.load_checkpoint(setup.folder.run_dir, setup.key, states, tuner_state)
    if saved is not None:
        state.states, state.tuner_state = saved["states"], saved["tuner_state"]
        state.record = saved["record"]
        state.start_index, state.total_grads = saved["next"], saved["total_grads"]
        state.index = state.start_index
        state.num_chunks, state.adapt_stop = saved["num_chunks"], saved["adapt_stop"]
        # redone: the warm-up's fresh start, every check and the chains' first states
        ctx.resume_grads = ctx.warmup_redone + ctx.check_grads + spent
    else:
        state.total_grads += ctx.prior_grads + ctx.check_grads
    return stage, state


def new_setup(ctx) -> Setup:
    """The super-transitions stage's fixed part, from the run's (warm-up's) plan."""
    plan, options = ctx.plan, ctx.options
    phases = Phases(plan.num_super_transitions, plan.num_warmup, plan.adapt_until, plan.draws)
    return Setup(ctx.target, plan.kernel, plan.params, plan.tuner, plan.objective, phases,
                 plan.gradient_budget, options.num_chains, ctx.thin, options.checkpoint_every,
                 ctx.key_run, ctx.folder)
