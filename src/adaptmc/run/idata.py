"""Draws and statistics of a run as ArviZ InferenceData (ArviZ's ``(chain, draw, ...)``
convention): posterior variables, per-draw ``sample_stats``, warm-up groups and a ``tuning``
group indexed by super-transition."""

from __future__ import annotations

import functools
import itertools
import json
import math
import uuid
import warnings

import jax
import numpy as np

from adaptmc.run.store import merge_chunks
from adaptmc.targets.base import compile_ahead, compiled
from adaptmc.targets.observations import observation_groups

# the most bytes of draws a block of a run folder's lazily read columns holds (`_LazyColumns`)
BLOCK_BYTES = 2**23

# per-draw statistics every kernel reports: InferenceData name <- chunk key
_STEP_STATS = (
    ("acceptance_rate", "stat/acceptance_rate"),
    ("accepted", "stat/accepted"),
    ("diverging", "stat/is_divergent"),
    ("energy_error", "stat/energy_error"),
    ("n_grad_evals", "stat/num_grads"),
    ("lp", "lp"),
    ("energy", "stat/energy"),
)


def posterior_variables(target, positions: np.ndarray) -> dict[str, np.ndarray]:
    """``positions: (chains, draws, dim)`` -> named variables ``(chains, draws, ...)``: the
    dict ``target.constrain(position)`` returns when the target has ``constrain``, else the
    leaves of ``target.unravel(position)`` named by their pytree paths (``"x"`` for a flat
    array). One compiled call per block, its rows padded to a power of two, so blocks of
    any size share a few programs (op by op, every primitive compiled again for every new
    block shape); a constrain that runs on the host (``constrain.host``) is called on the
    block's points as they are."""
    positions = np.asarray(positions)
    batch, dim = positions.shape[:-1], positions.shape[-1]
    flat = positions.reshape(-1, dim)
    constrain = getattr(target, "constrain", None)
    host = _host_constrain(target)
    if host is not None:  # on NumPy points as they are: no program, no padding
        return {str(k): np.asarray(v).reshape(batch + v.shape[1:])
                for k, v in host(flat).items()}
    rows = _rows(flat.shape[0])
    if rows > flat.shape[0]:
        filler = flat[-1:] if flat.shape[0] else np.zeros((1, dim), flat.dtype)
        flat = np.concatenate([flat, np.repeat(filler, rows - flat.shape[0], axis=0)])
    named = _as_it_is(_variables_fn(target), flat)
    if named is None:
        named = compiled(target, ("posterior_variables", rows, str(flat.dtype)),
                         lambda: _variables_program(target))(flat)
    count = int(np.prod(batch))
    if constrain is not None:
        return {str(k): np.asarray(v)[:count].reshape(batch + v.shape[1:])
                for k, v in named.items()}
    return {_leaf_name(path): np.asarray(leaf)[:count].reshape(batch + leaf.shape[1:])
            for path, leaf in jax.tree_util.tree_flatten_with_path(named)[0]}


def variables_ahead(target, shape: tuple[int, ...], dtype) -> None:
    """Start compiling `posterior_variables`' program for positions of ``shape`` and
    ``dtype`` (e.g. ``(chains, draws, dim)`` before the draws are made) in a thread of its
    own (`compile_ahead`); nothing for a target whose variables are its positions or whose
    ``constrain`` runs on the host (its ``host``)."""
    rows = _rows(int(np.prod(shape[:-1])))
    flat = jax.ShapeDtypeStruct((rows, shape[-1]), jax.dtypes.canonicalize_dtype(dtype))
    if _host_constrain(target) is not None:
        return  # `posterior_variables` compiles nothing
    if _as_it_is(_variables_fn(target), flat) is None:
        compile_ahead(target, ("posterior_variables", rows, str(flat.dtype)),
                      lambda: _variables_program(target), flat)


def _host_constrain(target):
    """The target's constrain on NumPy points ``(n, dim)``, when it has one (its ``host``
    attribute: `adaptmc.targets.stan.stan_constrain`'s), else None."""
    return getattr(getattr(target, "constrain", None), "host", None)


def _rows(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def _variables_fn(target):
    constrain = getattr(target, "constrain", None)
    return constrain if constrain is not None else target.unravel


def _variables_program(target):
    return jax.jit(jax.vmap(_variables_fn(target)))


def _as_it_is(fn, flat: np.ndarray):
    """``vmap(fn)(flat)`` when ``fn`` returns its argument as it is (a flat target's
    ``unravel``: a split into one piece), with no program compiled; else None."""
    closed, shape = jax.make_jaxpr(jax.vmap(fn), return_shape=True)(flat)
    leaves, tree = jax.tree_util.tree_flatten(shape)
    if len(leaves) != 1 or leaves[0].shape != flat.shape or leaves[0].dtype != flat.dtype:
        return None
    source = {}  # each variable a one-piece split made, from the variable it split
    for eqn in closed.jaxpr.eqns:
        if eqn.primitive.name != "split" or len(eqn.outvars) != 1:
            return None
        source[eqn.outvars[0]] = eqn.invars[0]
    var = closed.jaxpr.outvars[0]
    while var in source:
        var = source[var]
    return jax.tree_util.tree_unflatten(tree, [flat]) if var is closed.jaxpr.invars[0] \
        else None


def to_inference_data(target, kernel, chunks, record, tuner, num_warmup, attrs):
    """Assemble draws and statistics into InferenceData.

    Parameters
    ----------
    target, kernel, tuner
        What was run: posterior variables come from the target (`posterior_variables`), the
        per-draw parameter columns from the kernel's tunables that name a ``stat``.
    chunks
        Chunk dicts (`adaptmc.run.store.chunk_arrays`), in order, or paths of chunk files:
        then every array is a Dask array in blocks of at most `BLOCK_BYTES`, each read from
        the chunk files (only its draws) when it is computed, so writing the InferenceData
        (`adaptmc.run.store.write_draws`) holds a block of draws, not a chunk.
    record
        The tuning record ``{name: (super_transitions,)}``.
    num_warmup
        Super-transitions whose draws go to ``warmup_posterior`` / ``warmup_sample_stats``.
    attrs
        Attributes of the InferenceData.
    """
    import xarray as xr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az

    num_warm_draws = int(sum(n for n, warm in zip(record["num_draws"], record["warmup"],
                                                  strict=True) if warm))
    del num_warmup  # the record's warm-up flags say which draws are warm-up draws
    if chunks and not isinstance(chunks[0], dict):
        columns = _LazyColumns(target, kernel, chunks)
        total = columns.offsets[-1]
        groups = dict(zip(("posterior", "sample_stats"),
                          columns.between(num_warm_draws, total), strict=True))
        if num_warm_draws:
            groups.update(zip(("warmup_posterior", "warmup_sample_stats"),
                              columns.between(0, num_warm_draws), strict=True))
    else:
        merged = merge_chunks(chunks)
        variables = posterior_variables(target, merged["positions"])
        stats = {name: merged[key] for name, key in _stat_keys(kernel)}
        groups = _split_warmup(variables, stats, num_warm_draws)
    groups = observation_groups(target, groups)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = az.from_dict(**groups, save_warmup=bool(num_warm_draws), attrs=attrs)
        idata.posterior.attrs.update(_naming(target))
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


def _naming(target) -> dict:
    """The posterior's attributes that say how to read its variables: ``index_origin``
    of flat labels (1 for Stan) and ``derived``, the variables diagnostics do not judge."""
    info = getattr(target, "info", {})
    return {"index_origin": int(info.get("index_origin", 0)),
            "derived": json.dumps(list(info.get("derived", ())))}


def describe_tuning(idata, tuner, tuner_state, objective, check_box: bool) -> None:
    """The tuner's own description of its final state (box, surrogate hyperparameters,
    schedule: what the plots refit with), the objective's name, and the convergence
    warnings (`adaptmc.diagnostics.convergence_warnings`) and the tuning notes (the frozen
    setting checked against the tuner's box when ``check_box``: the tuner froze;
    `adaptmc.diagnostics.tuning_notes`) as attributes."""
    from adaptmc import io
    from adaptmc.diagnostics import (
        convergence_warnings,
        divergences_by_phase,
        summary_in_blocks,
        tuning_notes,
    )
    from adaptmc.tuners.describe import box_from_config, innermost

    facts = tuner.describe(tuner_state) if tuner.describe else None
    tuning = idata.tuning
    tuning.attrs["objective"] = getattr(objective, "__name__", "none") \
        if objective is not None else "none"
    box, integer = None, ()
    if facts is not None:
        tuning.attrs["tuner_config"] = json.dumps(facts, default=io.json_default)
        config = innermost(facts)
        if config is not None and "box" in config and check_box:
            found = box_from_config(config["box"])
            box = {n: (lo, hi) for n, lo, hi in zip(found.names, found.lower, found.upper,
                                                      strict=True)}
            integer = [n for n, i in zip(found.names, found.integer, strict=True) if i]
    table = summary_in_blocks(idata, parameters_only=True)
    idata.attrs["warnings"] = json.dumps(convergence_warnings(idata, table))
    idata.attrs["tuning_notes"] = json.dumps(tuning_notes(idata, box, integer))
    idata.attrs["divergences"] = json.dumps(divergences_by_phase(idata))


def _stat_keys(kernel) -> list[tuple[str, str]]:
    """(InferenceData name, chunk key) of every per-draw statistic."""
    keys = list(_STEP_STATS)
    keys += [(t.stat, f"stat/{t.stat}") for t in kernel.tunables if t.stat]
    keys.append(("super_transition", "stat/super_transition"))
    return keys


def _split_warmup(variables: dict, stats: dict, num_warm_draws: int) -> dict:
    """InferenceData groups of in-memory columns: the first ``num_warm_draws`` draws of every
    chain to the ``warmup_*`` groups (when there are any), the rest to the others."""
    groups = {
        "posterior": {k: v[:, num_warm_draws:] for k, v in variables.items()},
        "sample_stats": {k: v[:, num_warm_draws:] for k, v in stats.items()},
    }
    if num_warm_draws:
        groups["warmup_posterior"] = {k: v[:, :num_warm_draws] for k, v in variables.items()}
        groups["warmup_sample_stats"] = {k: v[:, :num_warm_draws] for k, v in stats.items()}
    return groups


class _LazyColumns:
    """Posterior variables and statistics of the chunk files ``paths`` as Dask arrays whose
    blocks hold at most ``block_bytes`` (a block is read from its chunk files, only its
    draws, and constrained when it is written), so writing them holds one small block, not
    a checkpoint's chunk."""

    def __init__(self, target, kernel, paths, block_bytes: int | None = None):
        from adaptmc.io import npz_headers

        block_bytes = BLOCK_BYTES if block_bytes is None else block_bytes
        self.target, self.paths = target, [str(p) for p in paths]
        self.headers = [npz_headers(path) for path in self.paths]
        (self.num_chains, _, dim), dtype = self.headers[0]["positions"]
        self.template = jax.eval_shape(
            lambda x: posterior_variables_jax(target, x),
            jax.ShapeDtypeStruct((self.num_chains, 1, dim), dtype))
        self.offsets = np.cumsum([0] + [h["positions"][0][1] for h in self.headers]).tolist()
        self.stat_keys = _stat_keys(kernel)
        # a block of positions and its constrained variables; of statistics, one column
        per_draw = self.num_chains * dim * dtype.itemsize + sum(
            int(np.prod(leaf.shape)) * leaf.dtype.itemsize for leaf in self.template.values())
        self.variable_block = max(1, block_bytes // per_draw)
        self.stat_block = max(1, block_bytes // (self.num_chains * 8))
        self.token = uuid.uuid4().hex  # Dask keys without hashing the target per block

    def between(self, start: int, stop: int) -> tuple[dict, dict]:
        """``(variables, stats)`` of the draws ``start:stop`` of every chain."""
        import dask
        import dask.array as da

        variables: dict[str, list] = {name: [] for name in self.template}
        for first in range(start, stop, self.variable_block):
            last = min(first + self.variable_block, stop)
            named = dask.delayed(functools.partial(_constrained_block, self.target))(
                self.paths, self.pieces(first, last),
                dask_key_name=f"adaptmc-draws-{self.token}-{first}-{last}")
            for name, leaf in self.template.items():
                variables[name].append(da.from_delayed(
                    named[name], (self.num_chains, last - first, *leaf.shape[2:]), leaf.dtype))
        stats: dict[str, list] = {name: [] for name, _ in self.stat_keys}
        for name, key in self.stat_keys:
            for first in range(start, stop, self.stat_block):
                last = min(first + self.stat_block, stop)
                block = dask.delayed(_read_draws)(
                    self.paths, self.pieces(first, last), key,
                    dask_key_name=f"adaptmc-{key}-{self.token}-{first}-{last}")
                stats[name].append(da.from_delayed(
                    block, (self.num_chains, last - first), self.headers[0][key][1]))
        return ({k: da.concatenate(v, axis=1) for k, v in variables.items()},
                {k: da.concatenate(v, axis=1) for k, v in stats.items()})

    def pieces(self, start: int, stop: int) -> list[tuple[int, int, int]]:
        """``(file index, first draw, end draw)`` in the chunk files of the draws
        ``start:stop`` of the whole run."""
        out = []
        for index, (begin, end) in enumerate(itertools.pairwise(self.offsets)):
            if max(start, begin) < min(stop, end):
                out.append((index, max(start, begin) - begin, min(stop, end) - begin))
        return out


def _read_draws(paths: list[str], pieces, key: str) -> np.ndarray:
    """The chunk arrays ``key`` over ``pieces`` (`_LazyColumns.pieces`), along draws."""
    from adaptmc.io import load_npz_draws

    parts = [load_npz_draws(paths[index], key, first, end) for index, first, end in pieces]
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)


def _constrained_block(target, paths: list[str], pieces) -> dict:
    return posterior_variables(target, _read_draws(paths, pieces, "positions"))


def posterior_variables_jax(target, positions):
    """`posterior_variables` as a traceable function of ``positions: (chains, draws, dim)``
    (for shapes)."""
    constrain = getattr(target, "constrain", None)
    if constrain is not None:
        return {str(k): v for k, v in jax.vmap(jax.vmap(constrain))(positions).items()}
    named = jax.vmap(jax.vmap(target.unravel))(positions)
    return {_leaf_name(path): leaf
            for path, leaf in jax.tree_util.tree_flatten_with_path(named)[0]}


def _leaf_name(path) -> str:
    return ".".join(str(getattr(p, "key", getattr(p, "name", getattr(p, "idx", p))))
                    for p in path) or "x"
