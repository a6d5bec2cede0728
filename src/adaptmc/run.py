"""The run loop: chains advance in super-transitions of a fixed gradient budget.

A super-transition (Wang, Mohamed & de Freitas 2013, Sec. 3; Neal 1996) spends a budget of
S gradient evaluations per chain: a kernel whose step costs c evaluations (HMC with L
leapfrog steps: c = L) makes ``floor(S / c)`` steps. Parameters change only between
super-transitions, chosen by a tuner from the reward an objective computes on the draws of
the previous one, so settings are compared at equal cost. Chains run vectorised (``vmap``)
under ``jit``, sharing the parameters of the super-transition; the number of steps is a
traced value, so changing it never recompiles (the draw buffer is sized to a power of two).

Every gradient evaluation is counted: one per chain for the initial point, then what each
step reports. The PRNG key of super-transition ``i`` is ``fold_in(key, i)``, so a run
resumed from a checkpoint makes exactly the draws of an uninterrupted one.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc import io
from adaptmc.kernels.base import Kernel
from adaptmc.targets.base import Target, check_position
from adaptmc.tuners.base import Tuner
from adaptmc.tuners.fixed import fixed

STEP_FIELDS = ("acceptance_rate", "accepted", "is_divergent", "energy_error", "num_grads")
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
    initial points, warm-up and tuning included; output_dir: the run folder (or None).
    """

    idata: Any
    num_grads: int
    wall_s: float
    compile_s: float
    output_dir: Path | None


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
    init_jitter: float = 0.5,
    output_dir: str | Path | None = None,
    force: bool = False,
    resume: bool = False,
    checkpoint_every: int = 10,
    thin: int = 1,
    progress: bool = True,
    config: dict | None = None,
    stop_after: int | None = None,
) -> RunResult:
    """Run ``num_chains`` chains for ``num_super_transitions`` super-transitions.

    Parameters
    ----------
    target, kernel, params
        What to sample, with which kernel and its starting ``Params`` (default: the kernel's
        defaults).
    gradient_budget
        S, gradient evaluations per chain per super-transition.
    tuner, objective
        The tuner proposes parameters before each super-transition and is updated with
        ``objective(positions, stats, num_grads)`` afterwards. Default: fixed parameters.
    num_warmup
        The first super-transitions whose draws go to the ``warmup_*`` groups.
    adapt_until
        After this many super-transitions the tuner's ``best`` setting is frozen (default:
        adapt throughout; diminishing-adaptation tuners keep adapting safely).
    initial_positions
        ``(num_chains, dim)``; default: the target's initial position plus
        ``U(-init_jitter, init_jitter)`` per coordinate.
    output_dir, force, resume, checkpoint_every
        Run folder; overwrite it; continue the run checkpointed there; super-transitions
        between checkpoints.
    thin
        Keep every ``thin``-th draw (gradients, divergences and acceptance are still counted
        over every step).
    stop_after
        Stop (as if killed) after this many super-transitions in this call; for tests.
    """
    started = time.perf_counter()
    params = kernel.Params() if params is None else params
    tuner = fixed() if tuner is None else tuner
    _check_run_args(
        target, kernel, params, tuner, objective, num_super_transitions, gradient_budget,
        num_chains, num_warmup, checkpoint_every, thin,
    )
    key_init, key_run = jax.random.split(jax.random.key(seed))
    if initial_positions is None:
        jitter = jax.random.uniform(
            key_init, (num_chains, target.dim), minval=-init_jitter, maxval=init_jitter
        )
        initial_positions = target.initial_position + jitter.astype(target.initial_position.dtype)
    initial_positions = jnp.asarray(initial_positions, dtype=target.initial_position.dtype)
    if initial_positions.shape != (num_chains, target.dim):
        raise ValueError(
            f"initial_positions must have shape ({num_chains}, {target.dim}), "
            f"got {initial_positions.shape}"
        )
    for c in range(num_chains):
        check_position(target, initial_positions[c], what=f"initial position of chain {c}")

    fingerprint = _fingerprint(
        target, kernel, params, tuner, num_super_transitions, gradient_budget, num_chains,
        num_warmup, adapt_until, seed, thin,
    )
    run_dir = None
    if output_dir is not None:
        run_dir = Path(output_dir)
        if resume:
            if not (run_dir / io.CONFIG).is_file():
                raise FileNotFoundError(f"no run to resume in {str(run_dir)!r} (no config.json)")
            saved = json.loads((run_dir / io.CONFIG).read_text())
            _check_same_run(saved.get("fingerprint", {}), fingerprint)
        else:
            io.prepare_output_dir(run_dir, force=force)
            io.create_output_dir(run_dir, force=force)
            io.write_json(
                run_dir / io.CONFIG, {"fingerprint": fingerprint, **(config or {})}
            )
    elif resume:
        raise ValueError("resume=True needs output_dir")

    states = jax.vmap(lambda x: kernel.init(x, target))(initial_positions)
    tuner_state = tuner.init(jax.random.fold_in(key_init, 1))
    loop = _Loop(target, kernel, num_chains, max_kept=gradient_budget // thin)
    start_index, total_grads, chunks, record = 0, num_chains, [], _empty_record(tuner)
    num_chunks = 0
    if resume and (run_dir / io.CHECKPOINT).is_file():
        ckpt = io.load_npz(run_dir / io.CHECKPOINT)
        meta = json.loads(bytes(ckpt["meta"]).decode())
        start_index, total_grads, num_chunks = meta["next"], meta["total_grads"], meta["chunks"]
        if not np.array_equal(ckpt["key"], np.asarray(jax.random.key_data(key_run))):
            raise ValueError("cannot resume: the checkpoint's PRNG key differs from this run's")
        states = io.arrays_to_tree("chain", ckpt, states)
        states = jax.tree.map(jnp.asarray, states)
        tuner_state = io.arrays_to_tree("tuner", ckpt, tuner_state)
        record = {k[len("record/"):]: list(v) for k, v in ckpt.items() if k.startswith("record/")}
        io.remove_chunks_from(run_dir, num_chunks)
        chunks = [io.load_npz(io.chunk_path(run_dir, i)) for i in range(num_chunks)]
    elif resume:
        io.remove_chunks_from(run_dir, 0)

    pending: list[dict] = []
    frozen = None  # the tuner's best setting, computed once when adaptation stops
    bar = _progress(progress, num_super_transitions, start_index)
    stopped_early = False
    for index in range(start_index, num_super_transitions):
        if stop_after is not None and index - start_index >= stop_after:
            stopped_early = True
            break
        key_tune, key_chains = jax.random.split(jax.random.fold_in(key_run, index))
        tick = time.perf_counter()
        adapting = adapt_until is None or index < adapt_until
        if adapting:
            proposal, tuner_state = tuner.propose(key_tune, tuner_state)
        else:
            frozen = tuner.best(tuner_state) if frozen is None else frozen
            proposal = frozen
        step_params = _with_proposal(kernel, params, proposal, target.dim)
        tuner_s = time.perf_counter() - tick

        num_steps = gradient_budget // kernel.cost(step_params)
        keys = jax.random.split(key_chains, num_chains)
        tick = time.perf_counter()
        states, positions, stats, logdensity, totals = loop(
            keys, states, step_params, num_steps, thin
        )
        positions, stats = np.asarray(positions), {k: np.asarray(v) for k, v in stats.items()}
        wall_s = time.perf_counter() - tick
        spent = int(np.sum(totals[0]))
        total_grads += spent

        tick = time.perf_counter()
        reward = float("nan")
        if objective is not None:
            reward = float(objective(positions, stats, spent))
        objective_s = time.perf_counter() - tick
        tick = time.perf_counter()
        summary = {
            "acceptance_rate": float(np.sum(totals[2]) / (num_steps * num_chains)),
            "divergences": int(np.sum(totals[1])),
            "num_grads": spent,
        }
        if adapting:
            tuner_state = tuner.update(
                tuner_state, proposal, reward, {**summary, "positions": positions}
            )
        tuner_s += time.perf_counter() - tick

        warmup = index < num_warmup
        for name in tuner.names:
            record[f"param/{name}"].append(float(np.mean(getattr(step_params, name))))
        for name, value in (
            ("reward", reward),
            ("acceptance_rate", summary["acceptance_rate"]),
            ("divergences", summary["divergences"]),
            ("num_grads", spent),
            ("num_steps", num_steps),
            ("num_draws", num_steps // thin),
            ("warmup", warmup),
            ("wall_s", wall_s),
            ("tuner_s", tuner_s),
            ("objective_s", objective_s),
        ):
            record[name].append(value)
        pending.append(_chunk_arrays(index, positions, stats, logdensity, step_params))
        if bar is not None:
            bar.update(1)
            bar.set_postfix(_postfix(step_params, summary, reward), refresh=False)

        last = index == num_super_transitions - 1
        if run_dir is not None and ((index + 1 - start_index) % checkpoint_every == 0 or last):
            num_chunks = _checkpoint(
                run_dir, pending, num_chunks, index + 1, total_grads, states, tuner_state, record,
                key_run,
            )
            chunks.extend(pending)
            pending = []
    if bar is not None:
        bar.close()
    chunks.extend(pending)
    if stopped_early:
        if run_dir is not None and pending:
            _checkpoint(run_dir, pending, num_chunks, index, total_grads, states, tuner_state,
                        record, key_run)
        return RunResult(None, total_grads, time.perf_counter() - started, loop.compile_s,
                         run_dir)

    wall = time.perf_counter() - started
    idata = to_inference_data(
        target, kernel, chunks, record, tuner, num_warmup,
        attrs={
            "target": target.name,
            "kernel": kernel.name,
            "tuner": tuner.name,
            "gradient_budget": gradient_budget,
            "num_super_transitions": num_super_transitions,
            "num_chains": num_chains,
            "seed": seed,
            "thin": thin,
            "total_grad_evals": total_grads,
            "wall_s": wall,
            "compile_s": loop.compile_s,
        },
    )
    if run_dir is not None:
        tmp = run_dir / (io.DRAWS + ".tmp")
        idata.to_netcdf(str(tmp), engine="h5netcdf")
        tmp.replace(run_dir / io.DRAWS)
    return RunResult(idata, total_grads, wall, loop.compile_s, run_dir)


_COMPILED: dict = {}  # (target, kernel, chains, capacity, argument signature) -> executable


class _Loop:
    """The jitted, vmapped inner loop of one super-transition, compiled once per buffer
    capacity (a power of two at least the number of kept draws) and argument signature, and
    shared by every run on the same target object (grids of fixed settings, repeats)."""

    # A buffer for the most draws any setting can keep (one step per gradient) means one
    # compilation per run; past this many bytes, buffers are sized per setting instead.
    MAX_BUFFER_BYTES = 256 * 2**20

    def __init__(self, target: Target, kernel: Kernel, num_chains: int, max_kept: int = 0):
        self.target, self.kernel, self.num_chains = target, kernel, num_chains
        itemsize = target.initial_position.dtype.itemsize
        fits = num_chains * max_kept * target.dim * itemsize <= self.MAX_BUFFER_BYTES
        self.min_capacity = max_kept if fits else 0
        self.compile_s = 0.0

    def __call__(self, keys, states, params, num_steps: int, thin: int = 1):
        num_kept = num_steps // thin
        wanted = max(num_kept, self.min_capacity, 1)
        capacity = 1 << math.ceil(math.log2(wanted))
        params = jax.tree.map(jnp.asarray, params)
        args = (
            keys, states, params, jnp.asarray(num_steps, jnp.int32), jnp.asarray(thin, jnp.int32)
        )
        signature = (
            jax.tree.structure(args),
            tuple((leaf.shape, str(leaf.dtype)) for leaf in jax.tree.leaves(args)),
        )
        cache_key = (self.target, self.kernel, self.num_chains, capacity, signature)
        if cache_key not in _COMPILED:
            tick = time.perf_counter()
            fn = jax.jit(jax.vmap(self._one_chain(capacity), in_axes=(0, 0, None, None, None)))
            _COMPILED[cache_key] = fn.lower(*args).compile()
            self.compile_s += time.perf_counter() - tick
        states, positions, stats, logdensity, totals = _COMPILED[cache_key](*args)
        return (
            states,
            positions[:, :num_kept],
            {k: v[:, :num_kept] for k, v in stats.items()},
            logdensity[:, :num_kept],
            totals,
        )

    def _one_chain(self, capacity: int):
        target, kernel = self.target, self.kernel

        def one_chain(key, state, params, num_steps, thin):
            _, info_shape = jax.eval_shape(
                lambda k, s: kernel.step(k, s, target, params), key, state
            )
            positions = jnp.zeros((capacity,) + state.position.shape, state.position.dtype)
            stats = {
                name: jnp.zeros((capacity,), getattr(info_shape, name).dtype)
                for name in STEP_FIELDS
            }
            logdensity = jnp.zeros((capacity,), state.logdensity.dtype)
            # totals over every step, kept or thinned away: gradients, divergences, acceptance
            totals = (jnp.zeros((), jnp.int64 if jax.config.jax_enable_x64 else jnp.int32),
                      jnp.zeros((), jnp.int32), jnp.zeros((), logdensity.dtype))

            def body(t, carry):
                state, positions, stats, logdensity, totals = carry
                state, info = kernel.step(jax.random.fold_in(key, t), state, target, params)
                keep = (t + 1) % thin == 0
                slot = jnp.where(keep, t // thin, capacity)  # out of range: dropped
                positions = positions.at[slot].set(state.position, mode="drop")
                stats = {
                    name: stats[name].at[slot].set(getattr(info, name), mode="drop")
                    for name in stats
                }
                logdensity = logdensity.at[slot].set(state.logdensity, mode="drop")
                totals = (
                    totals[0] + info.num_grads,
                    totals[1] + info.is_divergent.astype(jnp.int32),
                    totals[2] + info.acceptance_rate,
                )
                return state, positions, stats, logdensity, totals

            return jax.lax.fori_loop(
                0, num_steps, body, (state, positions, stats, logdensity, totals)
            )

        return one_chain


def _with_proposal(kernel: Kernel, params: Any, proposal: dict, dim: int) -> Any:
    unknown = set(proposal) - set(kernel.Params._fields)
    if unknown:
        raise ValueError(f"tuner proposed unknown parameters {sorted(unknown)} for {kernel.name}")
    proposal = dict(proposal)
    if "num_leapfrog" in proposal:
        proposal["num_leapfrog"] = int(round(proposal["num_leapfrog"]))
    new = params._replace(**proposal)
    kernel.check_params(new)
    _check_shapes(new, dim)
    return new


def _check_shapes(params: Any, dim: int) -> None:
    """Vector and matrix parameters must match the target's dimension."""
    for name in ("inverse_mass", "step_size"):
        if name not in getattr(params, "_fields", ()):
            continue
        shape = np.shape(getattr(params, name))
        allowed = [(), (dim,)] + ([(dim, dim)] if name == "inverse_mass" else [])
        if shape not in allowed:
            raise ValueError(
                f"{name} has shape {shape}; for a target of dimension {dim} it must be one "
                f"of {', '.join(map(str, allowed))}"
            )


def _chunk_arrays(index, positions, stats, logdensity, params) -> dict:
    shape = positions.shape[:2]
    out = {"positions": positions, "lp": logdensity, **{f"stat/{k}": v for k, v in stats.items()}}
    out["stat/super_transition"] = np.full(shape, index, dtype=np.int32)
    out["stat/step_size"] = np.full(shape, float(np.mean(params.step_size)))
    out["stat/n_steps"] = np.full(shape, int(getattr(params, "num_leapfrog", 1)), np.int32)
    return out


def _checkpoint(run_dir, pending, num_chunks, next_index, total_grads, states, tuner_state,
                record, key) -> int:
    """Write the draws since the last checkpoint as a chunk, then the state (chains, tuner,
    PRNG key data, counters, tuning record), each atomically; returns the chunk count."""
    merged = {k: np.concatenate([c[k] for c in pending], axis=1) for k in pending[0]}
    io.atomic_savez(io.chunk_path(run_dir, num_chunks), merged)
    num_chunks += 1
    meta = {"next": next_index, "total_grads": total_grads, "chunks": num_chunks}
    arrays = {"meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
              "key": np.asarray(jax.random.key_data(key))}
    arrays.update(io.tree_to_arrays("chain", states))
    arrays.update(io.tree_to_arrays("tuner", tuner_state))
    arrays.update({f"record/{k}": np.asarray(v) for k, v in record.items()})
    io.atomic_savez(run_dir / io.CHECKPOINT, arrays)
    return num_chunks


def _empty_record(tuner: Tuner) -> dict[str, list]:
    record = {f"param/{name}": [] for name in tuner.names}
    record.update({name: [] for name in RECORD_FIELDS})
    return record


def to_inference_data(target, kernel, chunks, record, tuner, num_warmup, attrs):
    """Assemble draws and statistics into InferenceData: posterior variables named as the
    target's pytree, per-draw sample_stats, warm-up groups and a ``tuning`` group indexed by
    super-transition."""
    import xarray as xr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az

    merged = {k: np.concatenate([c[k] for c in chunks], axis=1) for k in chunks[0]}
    st_index = merged["stat/super_transition"][0]
    is_warm = st_index < num_warmup
    positions = merged["positions"]
    named = jax.vmap(jax.vmap(target.unravel))(jnp.asarray(positions))
    paths = jax.tree_util.tree_flatten_with_path(named)[0]
    variables = {}
    for path, leaf in paths:
        name = ".".join(str(getattr(p, "key", getattr(p, "name", getattr(p, "idx", p))))
                        for p in path) or "x"
        variables[name] = np.asarray(leaf)
    stats = {
        "acceptance_rate": merged["stat/acceptance_rate"],
        "accepted": merged["stat/accepted"],
        "diverging": merged["stat/is_divergent"],
        "energy_error": merged["stat/energy_error"],
        "n_grad_evals": merged["stat/num_grads"],
        "lp": merged["lp"],
        "step_size": merged["stat/step_size"],
        "n_steps": merged["stat/n_steps"],
        "super_transition": merged["stat/super_transition"],
    }
    groups = {
        "posterior": {k: v[:, ~is_warm] for k, v in variables.items()},
        "sample_stats": {k: v[:, ~is_warm] for k, v in stats.items()},
    }
    if is_warm.any():
        groups["warmup_posterior"] = {k: v[:, is_warm] for k, v in variables.items()}
        groups["warmup_sample_stats"] = {k: v[:, is_warm] for k, v in stats.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = az.from_dict(**groups, save_warmup=bool(is_warm.any()), attrs=attrs)
        tuning = xr.Dataset(
            {
                name.replace("param/", ""): ("super_transition", np.asarray(values))
                for name, values in record.items()
            },
            coords={"super_transition": np.arange(len(record["reward"]))},
            attrs={"tuner": tuner.name},
        )
        idata.add_groups({"tuning": tuning})
    return idata


def _check_run_args(target, kernel, params, tuner, objective, num_super_transitions,
                    gradient_budget, num_chains, num_warmup, checkpoint_every, thin):
    if not isinstance(target, Target):
        raise TypeError(f"target must be a Target, got {type(target).__name__}")
    if not isinstance(params, kernel.Params):
        raise TypeError(
            f"params for kernel {kernel.name!r} must be {kernel.Params.__name__}, "
            f"got {type(params).__name__}"
        )
    kernel.check_params(params)
    _check_shapes(params, target.dim)
    for name in tuner.names:
        if name not in kernel.Params._fields:
            raise ValueError(
                f"tuner {tuner.name!r} sets {name!r}, which kernel {kernel.name!r} does not "
                f"have (its parameters: {', '.join(kernel.Params._fields)})"
            )
    for name, value, low in (
        ("num_super_transitions", num_super_transitions, 1),
        ("gradient_budget", gradient_budget, 1),
        ("num_chains", num_chains, 1),
        ("num_warmup", num_warmup, 0),
        ("checkpoint_every", checkpoint_every, 1),
        ("thin", thin, 1),
    ):
        if int(value) != value or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value}")
    if num_warmup >= num_super_transitions:
        raise ValueError("num_warmup must be smaller than num_super_transitions")
    if kernel.cost(params) * thin > gradient_budget:
        raise ValueError(
            f"one kept draw costs {kernel.cost(params) * thin} gradient evaluations (thin "
            f"{thin}), more than the gradient_budget {gradient_budget} of a super-transition"
        )


def _fingerprint(target, kernel, params, tuner, num_super_transitions, gradient_budget,
                 num_chains, num_warmup, adapt_until, seed, thin) -> dict:
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


def _check_same_run(saved: dict, now: dict) -> None:
    now = json.loads(json.dumps(now))
    diff = [k for k in now if saved.get(k) != now[k]]
    if diff:
        details = ", ".join(f"{k}: saved {saved.get(k)!r}, now {now[k]!r}" for k in diff)
        raise ValueError(f"cannot resume: the run differs from the checkpointed one ({details})")


def _progress(enabled: bool, total: int, initial: int):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, unit="st", desc="super-transitions",
                dynamic_ncols=True)


def _postfix(params, summary, reward) -> dict:
    out = {"acc": f"{summary['acceptance_rate']:.2f}"}
    if hasattr(params, "step_size"):
        out["eps"] = f"{float(np.mean(params.step_size)):.3g}"
    if hasattr(params, "num_leapfrog"):
        out["L"] = int(params.num_leapfrog)
    if not math.isnan(reward):
        out["reward"] = f"{reward:.3g}"
    if summary["divergences"]:
        out["div"] = summary["divergences"]
    return out
