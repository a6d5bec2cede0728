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
    variables = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(named)[0]:
        name = ".".join(str(getattr(p, "key", getattr(p, "name", getattr(p, "idx", p))))
                        for p in path) or "x"
        variables[name] = np.asarray(leaf)
    return variables


def to_inference_data(target, kernel, chunks, record, tuner, num_warmup, attrs):
    """Assemble draws and statistics into InferenceData.

    Parameters
    ----------
    target, kernel, tuner
        What was run: posterior variables come from the target (`posterior_variables`), the
        per-draw parameter columns from the kernel's tunables that name a ``stat``.
    chunks
        Chunk dicts (`adaptmc.run.store.chunk_arrays`), in order.
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

    merged = merge_chunks(chunks)
    is_warm = merged["stat/super_transition"][0] < num_warmup
    variables = posterior_variables(target, merged["positions"])
    stats = {name: merged[key] for name, key in _STEP_STATS}
    stats.update({t.stat: merged[f"stat/{t.stat}"] for t in kernel.tunables if t.stat})
    stats["super_transition"] = merged["stat/super_transition"]
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
