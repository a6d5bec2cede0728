"""Stan's flat parameter names and the constrained quantities of many draws: ``theta[1]``,
``theta[2]``... (1-based, as posteriordb's reference draws name them) to and from arrays, and
a target's ``(chains, draws, dim)`` positions mapped through its ``info["constrain"]``."""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.targets.base import Target


def flatten_named(values: dict[str, np.ndarray], batch_ndim: int) -> dict[str, np.ndarray]:
    """``{"theta": (..., 8)}`` -> ``{"theta[1]": (...), ...}``: Stan's 1-based flat names.

    ``batch_ndim`` leading axes (chains, draws) are kept.
    """
    out = {}
    for name, value in values.items():
        value = np.asarray(value)
        event = value.shape[batch_ndim:]
        if event == ():
            out[name] = value
            continue
        for idx in np.ndindex(*event):
            label = ",".join(str(i + 1) for i in idx)
            out[f"{name}[{label}]"] = value[(Ellipsis, *idx)]
    return out


_FLAT_NAME = re.compile(r"^(?P<base>[^\[]+)(\[(?P<idx>[0-9,]+)\])?$")


def group_named(flat: dict[str, Any]) -> dict[str, np.ndarray]:
    """Inverse of `flatten_named` for scalars and vectors: ``{"theta[1]": a, ...}`` ->
    ``{"theta": array([a, ...])}``."""
    groups: dict[str, dict[int, Any]] = {}
    scalars = {}
    for name, value in flat.items():
        match = _FLAT_NAME.match(name)
        if match is None:
            raise ValueError(f"cannot parse parameter name {name!r}")
        if match["idx"] is None:
            scalars[match["base"]] = np.asarray(value, float)
        else:
            groups.setdefault(match["base"], {})[int(match["idx"]) - 1] = value
    for base, entries in groups.items():
        scalars[base] = np.asarray([entries[i] for i in range(len(entries))], float)
    return scalars


def constrained_draws(target: Target, positions: np.ndarray) -> dict[str, np.ndarray]:
    """``positions: (chains, draws, dim)`` -> reference name -> ``(chains, draws)`` array of
    the constrained quantity, through ``target.info["constrain"]``."""
    constrain = target.info.get("constrain")
    if constrain is None:
        raise ValueError(f"target {target.name!r} has no constrain function in its info")
    values = jax.jit(jax.vmap(jax.vmap(constrain)))(jnp.asarray(positions))
    flat = flatten_named(jax.tree.map(np.asarray, values), batch_ndim=2)
    order = tuple(flat) if target.reference is None else target.reference.names
    return {name: flat[name] for name in order}
