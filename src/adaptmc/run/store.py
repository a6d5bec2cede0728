"""The run folder of `adaptmc.run.run`: its fingerprint and configuration, checkpoints, draw
chunks and the final netCDF (the file layout is `adaptmc.io`'s).

A checkpoint holds the chain states, the tuner state, the PRNG key data, the counters and the
tuning record so far; the draws since the previous checkpoint go to a chunk file written just
before it. A resumed run checks that it is the same run (fingerprint, PRNG key), drops chunks
written after the last checkpoint and goes on from there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc import io


def fingerprint(target, kernel, params, tuner, num_super_transitions, gradient_budget,
                num_chains, num_warmup, adapt_until, seed, thin) -> dict:
    """What makes two runs the same run (a resumed run must match the saved one)."""
    return {
        "target": target.name,
        "dim": target.dim,
        "kernel": kernel.name,
        "params": {k: np.asarray(v).tolist() for k, v in params._asdict().items()},
        "tuner": tuner.name,
        "num_super_transitions": num_super_transitions,
        "gradient_budget": gradient_budget,
        "num_chains": num_chains,
        "num_warmup": num_warmup,
        "adapt_until": adapt_until,
        "seed": seed,
        "thin": thin,
    }


def check_same_run(saved: dict, now: dict) -> None:
    """Raise `ValueError` naming every field where ``now`` differs from ``saved``."""
    now = json.loads(json.dumps(now))
    diff = [k for k in now if saved.get(k) != now[k]]
    if diff:
        details = ", ".join(f"{k}: saved {saved.get(k)!r}, now {now[k]!r}" for k in diff)
        raise ValueError(f"cannot resume: the run differs from the checkpointed one ({details})")


def open_run_dir(output_dir: str | Path | None, *, resume: bool, force: bool,
                 fingerprint: dict, config: dict | None) -> Path | None:
    """The run folder: a new one (config written) or, with ``resume``, an existing one whose
    fingerprint matches. None without ``output_dir``."""
    if output_dir is None:
        if resume:
            raise ValueError("resume=True needs output_dir")
        return None
    run_dir = Path(output_dir)
    if resume:
        if not (run_dir / io.CONFIG).is_file():
            raise FileNotFoundError(f"no run to resume in {str(run_dir)!r} (no config.json)")
        saved = json.loads((run_dir / io.CONFIG).read_text())
        check_same_run(saved.get("fingerprint", {}), fingerprint)
    else:
        def populate(folder: Path) -> None:
            (folder / io.CHUNKS).mkdir()
            io.write_json(folder / io.CONFIG, {"fingerprint": fingerprint, **(config or {})})

        io.create_output_dir(run_dir, force=force, kind="run", populate=populate)
    return run_dir


def load_checkpoint(run_dir: Path, key, states: Any, tuner_state: Any) -> dict | None:
    """The checkpoint of ``run_dir`` as ``{next, total_grads, num_chunks, states,
    tuner_state, record, chunks}`` (``states`` and ``tuner_state`` are templates of the
    trees to restore), or None when there is none; chunks written after it are deleted."""
    if not (run_dir / io.CHECKPOINT).is_file():
        io.remove_chunks_from(run_dir, 0)
        return None
    ckpt = io.load_npz(run_dir / io.CHECKPOINT)
    meta = json.loads(bytes(ckpt["meta"]).decode())
    if not np.array_equal(ckpt["key"], np.asarray(jax.random.key_data(key))):
        raise ValueError("cannot resume: the checkpoint's PRNG key differs from this run's")
    states = jax.tree.map(jnp.asarray, io.arrays_to_tree("chain", ckpt, states))
    record = {k[len("record/"):]: list(v) for k, v in ckpt.items() if k.startswith("record/")}
    io.remove_chunks_from(run_dir, meta["chunks"])
    return {
        "next": meta["next"],
        "total_grads": meta["total_grads"],
        "num_chunks": meta["chunks"],
        "states": states,
        "tuner_state": io.arrays_to_tree("tuner", ckpt, tuner_state),
        "record": record,
        "chunks": [io.load_npz(io.chunk_path(run_dir, i)) for i in range(meta["chunks"])],
    }


def write_checkpoint(run_dir: Path, pending: list[dict], num_chunks: int, next_index: int,
                     total_grads: int, states, tuner_state, record: dict, key) -> int:
    """Write the draws since the last checkpoint as a chunk, then the state (chains, tuner,
    PRNG key data, counters, tuning record), each atomically; returns the chunk count."""
    io.atomic_savez(io.chunk_path(run_dir, num_chunks), merge_chunks(pending))
    num_chunks += 1
    meta = {"next": next_index, "total_grads": total_grads, "chunks": num_chunks}
    arrays = {"meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
              "key": np.asarray(jax.random.key_data(key))}
    arrays.update(io.tree_to_arrays("chain", states))
    arrays.update(io.tree_to_arrays("tuner", tuner_state))
    arrays.update({f"record/{k}": np.asarray(v) for k, v in record.items()})
    io.atomic_savez(run_dir / io.CHECKPOINT, arrays)
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


def write_draws(run_dir: Path, idata) -> None:
    """The final InferenceData to ``draws.nc``, atomically."""
    tmp = run_dir / (io.DRAWS + ".tmp")
    idata.to_netcdf(str(tmp), engine="h5netcdf")
    tmp.replace(run_dir / io.DRAWS)
