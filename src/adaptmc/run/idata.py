"""Draws and statistics of a run as ArviZ InferenceData (ArviZ's ``(chain, draw, ...)``
convention): posterior variables, per-draw ``sample_stats``, warm-up groups and a ``tuning``
group indexed by super-transition."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.run.store import merge_chunks

# per-draw statistics every kernel reports: InferenceData name <- chunk key
_STEP_STATS = (
    ("acceptance_rate", "stat/acceptance_rate"),
    ("accepted", "stat/accepted"),
    ("diverging", "stat/is_divergent"),
    ("energy_error", "stat/energy_error"),
    ("n_grad_evals", "stat/num_grads"),
    ("lp", "lp"),
)


def posterior_variables(target, positions: np.ndarray) -> dict[str, np.ndarray]:
    """``positions: (chains, draws, dim)`` -> named variables ``(chains, draws, ...)``: the
    dict ``target.constrain(position)`` returns when the target has ``constrain``, else the
    leaves of ``target.unravel(position)`` named by their pytree paths (``"x"`` for a flat
    array)."""
    positions = jnp.asarray(positions)
    constrain = getattr(target, "constrain", None)
    if constrain is not None:
        named = jax.vmap(jax.vmap(constrain))(positions)
        return {str(k): np.asarray(v) for k, v in named.items()}
    named = jax.vmap(jax.vmap(target.unravel))(positions)
    return {_leaf_name(path): np.asarray(leaf)
            for path, leaf in jax.tree_util.tree_flatten_with_path(named)[0]}


def to_inference_data(target, kernel, chunks, record, tuner, num_warmup, attrs):
    """Assemble draws and statistics into InferenceData.

    Parameters
    ----------
    target, kernel, tuner
        What was run: posterior variables come from the target (`posterior_variables`), the
        per-draw parameter columns from the kernel's tunables that name a ``stat``.
    chunks
        Chunk dicts (`adaptmc.run.store.chunk_arrays`), in order, or paths of chunk files:
        then every array is a Dask array read one chunk file at a time, so writing the
        InferenceData (`adaptmc.run.store.write_draws`) never holds more than a chunk.
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

    if chunks and not isinstance(chunks[0], dict):
        variables, stats = _lazy_columns(target, kernel, chunks)
    else:
        merged = merge_chunks(chunks)
        variables = posterior_variables(target, merged["positions"])
        stats = {name: merged[key] for name, key in _stat_keys(kernel)}
    num_warm_draws = int(sum(n for n, warm in zip(record["num_draws"], record["warmup"],
                                                  strict=True) if warm))
    del num_warmup  # the record's warm-up flags say which draws are warm-up draws
    groups = {
        "posterior": {k: v[:, num_warm_draws:] for k, v in variables.items()},
        "sample_stats": {k: v[:, num_warm_draws:] for k, v in stats.items()},
    }
    if num_warm_draws:
        groups["warmup_posterior"] = {k: v[:, :num_warm_draws] for k, v in variables.items()}
        groups["warmup_sample_stats"] = {k: v[:, :num_warm_draws] for k, v in stats.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = az.from_dict(**groups, save_warmup=bool(num_warm_draws), attrs=attrs)
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


def _stat_keys(kernel) -> list[tuple[str, str]]:
    """(InferenceData name, chunk key) of every per-draw statistic."""
    keys = list(_STEP_STATS)
    keys += [(t.stat, f"stat/{t.stat}") for t in kernel.tunables if t.stat]
    keys.append(("super_transition", "stat/super_transition"))
    return keys


def _lazy_columns(target, kernel, paths) -> tuple[dict, dict]:
    """Posterior variables and statistics as Dask arrays over the chunk files ``paths``,
    each block read (and constrained) when written."""
    import dask
    import dask.array as da

    from adaptmc.io import npz_headers

    headers = [npz_headers(path) for path in paths]
    shape = headers[0]["positions"][0]
    dtype = headers[0]["positions"][1]
    template = jax.eval_shape(
        lambda x: posterior_variables_jax(target, x),
        jax.ShapeDtypeStruct((shape[0], 1, shape[2]), dtype))
    variables: dict[str, list] = {name: [] for name in template}
    stats: dict[str, list] = {name: [] for name, _ in _stat_keys(kernel)}
    for path, header in zip(paths, headers, strict=True):
        num_chains, num_draws = header["positions"][0][:2]
        named = dask.delayed(_constrained_chunk, pure=True)(target, str(path))
        for name, leaf in template.items():
            variables[name].append(da.from_delayed(
                named[name], (num_chains, num_draws, *leaf.shape[2:]), leaf.dtype))
        for name, key in _stat_keys(kernel):
            block = dask.delayed(_chunk_column, pure=True)(str(path), key)
            stats[name].append(da.from_delayed(block, header[key][0], header[key][1]))
    variables = {k: da.concatenate(v, axis=1) for k, v in variables.items()}
    return variables, {k: da.concatenate(v, axis=1) for k, v in stats.items()}


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


def _constrained_chunk(target, path: str) -> dict:
    from adaptmc.io import load_npz_member

    return posterior_variables(target, load_npz_member(path, "positions"))


def _chunk_column(path: str, key: str) -> np.ndarray:
    from adaptmc.io import load_npz_member

    return load_npz_member(path, key)


def summary_in_blocks(idata, max_bytes: int = 2**25):
    """`adaptmc.diagnostics.summary_table` of the posterior, computed a few coordinates at a
    time (at most ``max_bytes`` of draws in memory), so a lazily read InferenceData (a run
    folder's ``draws.nc``) is never loaded whole."""
    import pandas as pd

    from adaptmc.diagnostics import summary_table

    tables = []
    for name, value in idata.posterior.data_vars.items():
        num_draws = value.shape[0] * value.shape[1]
        if value.ndim == 2:
            tables.append(summary_table(np.asarray(value.values, float)[..., None], [name]))
            continue
        # slice along the first event axis, lazily (``.data`` would read the whole array)
        first, rest = value.dims[2], value.shape[3:]
        per_index = max(1, num_draws * int(np.prod(rest, dtype=int)) * 8)
        step = max(1, max_bytes // per_index)
        step -= step % 8 if step >= 8 else 0  # whole HDF5 chunks (`store._hdf5_chunks`)
        for start in range(0, value.shape[2], step):
            block = value.isel({first: slice(start, start + step)}).values
            block = np.asarray(block, dtype=float).reshape(*value.shape[:2], -1)
            names = [f"{name}[{','.join(map(str, (start + i[0], *i[1:])))}]"
                     for i in np.ndindex(block.shape[2] // max(int(np.prod(rest)), 1), *rest)]
            tables.append(summary_table(block, names))
    return pd.concat(tables)
