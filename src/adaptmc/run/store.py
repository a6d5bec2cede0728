"""The run folder of `adaptmc.run.run`: its fingerprint and configuration, checkpoints, draw
chunks and the final netCDF (the file layout is `adaptmc.io`'s).

A checkpoint holds the chain states, the tuner state, the PRNG key data, the counters (the
next super-transition, gradients, chunks, and where the tuner's stop rule ended adaptation)
and the tuning record so far; the draws since the previous checkpoint go to a chunk file
written just before it. A resumed run checks that it is the same run (fingerprint, PRNG
key), drops chunks written after the last checkpoint and goes on from there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc import io
from adaptmc.disk import telling_a_full_run
from adaptmc.run.netcdf import finished_without_draws, read_draws, write_draws
from adaptmc.run.plan import zero_key
from adaptmc.targets.base import compiled_logdensity_and_grad

__all__ = ["read_draws", "write_draws"]  # with the rest: the run folder's files


def fingerprint(target, kernel, params, tuner, num_super_transitions, gradient_budget,
                num_chains, num_warmup, adapt_until, seed, thin, objective=None) -> dict:
    """What makes two runs the same run (a resumed run must match the saved one): the
    target's name, dimension and content (`target_digest`), the kernel and its parameters,
    the tuner (name and its `describe` facts at the start), the objective's name and every
    option of the run."""
    return {
        "target": target.name,
        "target_digest": target_digest(target),
        "dim": target.dim,
        "kernel": kernel.name,
        "params": {k: _jsonable(v) for k, v in params._asdict().items()},
        "tuner": tuner.name,
        "tuner_config": tuner_facts(tuner),
        "objective": None if objective is None else getattr(objective, "__name__",
                                                            type(objective).__name__),
        "num_super_transitions": num_super_transitions,
        "gradient_budget": gradient_budget,
        "num_chains": num_chains,
        "num_warmup": num_warmup,
        "adapt_until": adapt_until,
        "seed": seed,
        "thin": thin,
    }


def _jsonable(value):
    """A parameter as JSON: an array as nested lists, a NamedTuple of arrays (a low-rank
    inverse mass) as a dict of them."""
    if hasattr(value, "_asdict"):
        return {k: _jsonable(v) for k, v in value._asdict().items()}
    return np.asarray(value).tolist()


def target_digest(target, digits: int = 10) -> str:
    """A hash of the target's log density and gradient at a fixed probe point near its
    initial position (so an edited model or changed data is another run), to ``digits``
    significant digits (robust to the last bits of floating point)."""
    import hashlib

    x0 = np.asarray(target.initial_position, dtype=float)
    if not jnp.issubdtype(target.initial_position.dtype, jnp.floating):
        # a discrete target (integer states): its log density at its start, no gradient
        numbers = np.atleast_1d(float(target.logdensity(target.initial_position)))
    else:
        probe = x0 + 0.1 * np.cos(np.arange(x0.size) + 1.0)
        value, grad = compiled_logdensity_and_grad(target)(
            jnp.asarray(probe, dtype=target.initial_position.dtype))
        numbers = np.concatenate([[float(value)], np.ravel(np.asarray(grad, dtype=float))])
    text = ",".join(f"{v:.{digits}g}" for v in numbers)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def tuner_facts(tuner) -> Any:
    """The tuner's `describe` facts at its initial state, as JSON (None without)."""
    if tuner.describe is None:
        return None
    facts = tuner.describe(tuner.init(zero_key()))
    return json.loads(json.dumps(facts, default=io.json_default))


def check_same_run(saved: dict, now: dict) -> None:
    """Raise `ValueError` naming every field where ``now`` differs from ``saved``."""
    now = json.loads(json.dumps(now))
    diff = [k for k in now if saved.get(k) != now[k]]
    if diff:
        details = ", ".join(f"{k}: saved {saved.get(k)!r}, now {now[k]!r}" for k in diff)
        raise ValueError(f"cannot resume: the run differs from the checkpointed one ({details})")


def open_run_dir(output_dir: str | Path | None, *, resume: bool, force: bool,
                 fingerprint: dict, config: dict | None) -> Path | None:
    """The folder a run writes to: for a new run, a staged temporary sibling of
    ``output_dir`` holding its config (`adaptmc.io.stage_output_dir`), which the driver puts
    in place once the first checkpoint is in it (`adaptmc.io.commit_output_dir`; with
    ``force`` only then is an old run replaced); with ``resume``, the existing folder,
    whose fingerprint must match. None without ``output_dir``."""
    if output_dir is None:
        if resume:
            raise ValueError("resume=True needs output_dir")
        return None
    run_dir = Path(output_dir)
    if resume:
        saved = read_config(run_dir)
        if "fingerprint" not in saved:
            raise ValueError(f"cannot resume: {str(run_dir / io.CONFIG)!r} has no fingerprint "
                             "(damaged or not a run folder)")
        check_same_run(saved["fingerprint"], fingerprint)
        deleted = finished_without_draws(run_dir)
        if deleted is not None:
            raise ValueError(deleted)
        if (run_dir / io.DRAWS).exists():
            raise ValueError(f"the run in {str(run_dir)!r} has finished (draws.nc is written): "
                             "nothing to resume")
        io.remove_temporaries(run_dir)
    else:
        def populate(folder: Path) -> None:
            (folder / io.CHUNKS).mkdir()
            io.write_json(folder / io.CONFIG, {"fingerprint": fingerprint, **(config or {})})

        io.discard_stale_siblings(run_dir)  # of killed runs: this process holds the lock
        with telling_a_full_run(run_dir, "the run's config.json", 2**16, staged=True):
            return io.stage_output_dir(run_dir, force=force, kind="run", populate=populate)
    return run_dir


def read_config(run_dir: Path) -> dict:
    """``config.json`` of a run folder; a missing or unreadable one is one clear error."""
    path = Path(run_dir) / io.CONFIG
    if not path.is_file():
        raise FileNotFoundError(f"no run to resume in {str(run_dir)!r} (no config.json)")
    try:
        saved = json.loads(path.read_text())
    except (ValueError, OSError) as err:
        raise ValueError(f"cannot resume: {str(path)!r} is damaged ({err})") from None
    if not isinstance(saved, dict):
        raise ValueError(f"cannot resume: {str(path)!r} is damaged (not a JSON object)")
    return saved


def load_checkpoint(run_dir: Path, key, states: Any, tuner_state: Any) -> dict | None:
    """The checkpoint of ``run_dir`` as ``{next, total_grads, num_chunks, adapt_stop,
    states, tuner_state, record}`` (``adapt_stop``: None unless the tuner stopped early;
    ``states`` and ``tuner_state`` are templates of the trees to restore), or None when
    there is none; chunks written after it are deleted, those before it are checked
    readable (not loaded: draws stay on disk). A damaged file is one clear `ValueError`."""
    if not (run_dir / io.CHECKPOINT).is_file():
        io.remove_chunks_from(run_dir, 0)
        return None
    path = run_dir / io.CHECKPOINT
    try:
        ckpt = io.load_npz(path)
        meta = json.loads(bytes(ckpt["meta"]).decode())
        restored = jax.tree.map(jnp.asarray, _restore("chain", ckpt, states, path))
        tuner_restored = _restore("tuner", ckpt, tuner_state, path)
        next_index, num_chunks = int(meta["next"]), int(meta["chunks"])
        adapt_stop = meta.get("adapt_stop")
        adapt_stop = None if adapt_stop is None else int(adapt_stop)
    except (ValueError, KeyError, OSError, EOFError, TypeError) as err:
        raise ValueError(f"cannot resume: {str(path)!r} is damaged ({io.describe_error(err)}); "
                         "start the run again with --force (force=True)") from None
    if not np.array_equal(ckpt["key"], np.asarray(jax.random.key_data(key))):
        raise ValueError("cannot resume: the checkpoint's PRNG key differs from this run's")
    saved_run = meta.get("run")
    if saved_run is not None and saved_run != run_id(read_config(run_dir)["fingerprint"]):
        raise ValueError(f"cannot resume: {str(path)!r} was written by another run (its 'run' "
                         "differs from the fingerprint in config.json): copied from another "
                         "folder? start the run again with --force (force=True)")
    record = {k[len("record/"):]: list(v) for k, v in ckpt.items() if k.startswith("record/")}
    io.remove_chunks_from(run_dir, num_chunks)
    for index in range(num_chunks):
        io.check_npz(io.chunk_path(run_dir, index), f"cannot resume: draws of the checkpoint "
                     f"at super-transition {next_index}")
    return {
        "next": next_index,
        "total_grads": meta["total_grads"],
        "num_chunks": num_chunks,
        "adapt_stop": adapt_stop,
        "states": restored,
        "tuner_state": tuner_restored,
        "record": record,
    }


def run_id(fingerprint: dict) -> str:
    """A short hash of a run's fingerprint: a checkpoint records the run that wrote it."""
    import hashlib

    text = json.dumps(fingerprint, sort_keys=True, default=io.json_default)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _restore(prefix: str, arrays: dict, template: Any, path: Path) -> Any:
    """`adaptmc.io.arrays_to_tree`, each array checked against the template's shape and
    kind (a checkpoint of another target or kernel names the first that differs). A
    tuner's leaves grow along their first axis as it measures settings (a bandit's
    observations), so only their other axes are checked."""
    for i, leaf in enumerate(jax.tree.leaves(template)):
        name = f"{prefix}/{i}"
        if name not in arrays:
            raise ValueError(f"{str(path)!r} has no {name!r}: written by another kernel or "
                             "tuner")
        want, got = np.shape(leaf), arrays[name].shape
        if prefix == "tuner" and len(got) == len(want) >= 1:
            got, want = got[1:], want[1:]
        if got != want:
            raise ValueError(f"{str(path)!r}: {name!r} has shape {arrays[name].shape}, this "
                             f"run's is {np.shape(leaf)} (another target, kernel or number of "
                             "chains)")
    return io.arrays_to_tree(prefix, arrays, template)


def write_checkpoint(run_dir: Path, pending: list[dict], num_chunks: int, next_index: int,
                     total_grads: int, states, tuner_state, record: dict, key,
                     adapt_stop: int | None = None) -> int:
    """Write the draws since the last checkpoint (``pending``, in order) as a chunk, then
    the state (chains, tuner, PRNG key data, counters, ``adapt_stop``: where the tuner
    stopped adapting early, None if it did not; tuning record), each atomically;
    returns the chunk count. ``pending`` is emptied (its draws are on disk) and the memory
    they held given back (`adaptmc.io.release_freed_memory`)."""
    need = sum(np.asarray(v).nbytes for piece in pending for v in piece.values()) + \
        sum(np.asarray(v).nbytes for v in jax.tree.leaves((states, tuner_state)))
    with telling_a_full_run(run_dir, f"the checkpoint before super-transition {next_index}",
                            need):
        return _write_checkpoint(run_dir, pending, num_chunks, next_index, total_grads,
                                 states, tuner_state, record, key, adapt_stop)


def _write_checkpoint(run_dir: Path, pending: list[dict], num_chunks: int, next_index: int,
                      total_grads: int, states, tuner_state, record: dict, key,
                      adapt_stop: int | None) -> int:
    io.atomic_savez_concatenated(io.chunk_path(run_dir, num_chunks), pending)
    pending.clear()
    num_chunks += 1
    # counters may be NumPy integers (a resumed record's); JSON takes Python ones
    meta = {"next": int(next_index), "total_grads": int(total_grads), "chunks": num_chunks,
            "adapt_stop": None if adapt_stop is None else int(adapt_stop),
            "run": run_id(read_config(run_dir)["fingerprint"])}
    arrays = {"meta": np.frombuffer(json.dumps(meta, default=io.json_default).encode(),
                                    dtype=np.uint8),
              "key": np.asarray(jax.random.key_data(key))}
    arrays.update(io.tree_to_arrays("chain", states))
    arrays.update(io.tree_to_arrays("tuner", tuner_state))
    arrays.update({f"record/{k}": np.asarray(v) for k, v in record.items()})
    io.atomic_savez(run_dir / io.CHECKPOINT, arrays)
    io.release_freed_memory()
    return num_chunks


def chunk_arrays(index: int, positions, stats: dict, logdensity, params, tunables) -> dict:
    """One super-transition's draws as chunk arrays: ``positions: (chains, draws, dim)``,
    ``lp`` and ``stat/NAME: (chains, draws)`` for every step statistic, the super-transition
    index, and the value in force of every tunable that names a per-draw ``stat``."""
    shape = positions.shape[:2]
    out = {"positions": positions, "lp": logdensity, **{f"stat/{k}": v for k, v in stats.items()}}
    out["stat/super_transition"] = np.full(shape, index, dtype=np.int32)
    for tunable in tunables:
        if tunable.stat is None:
            continue
        value = getattr(params, tunable.name)
        if tunable.integer:
            out[f"stat/{tunable.stat}"] = np.full(shape, int(value), np.int32)
        else:
            out[f"stat/{tunable.stat}"] = np.full(shape, float(np.mean(value)))
    return out


def merge_chunks(chunks: list[dict]) -> dict:
    """Chunks concatenated along the draw axis."""
    return {k: np.concatenate([c[k] for c in chunks], axis=1) for k in chunks[0]}
