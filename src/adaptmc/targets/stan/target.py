"""A Stan program as a `Target`: its log density and gradient on Stan's unconstrained space,
called from JAX.

The compiled program calls Stan's C++ through XLA's FFI (`adaptmc.targets.stan.ffi`): one
call returns the log density and its gradient, both computed by Stan's reverse mode (or the
value alone where no gradient is asked for); a ``jax.custom_vjp`` hands the gradient to JAX,
so the log density works under ``jit``, ``vmap`` (the chains: one call evaluates every
chain's point) and ``lax.scan``. Without the FFI (float32 positions), a host callback
(``jax.pure_callback``) does the same. Draws are stored constrained and named as Stan names
them: one variable per Stan variable, in its shape (``theta``, ``(8,)``; `flatten_named`
gives ``theta[1]``...), transformed parameters and, if asked, generated quantities
included.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.targets.base import Reference, Target
from adaptmc.targets.stan.build import build_model
from adaptmc.targets.stan.ffi import ffi_available, ffi_logdensity
from adaptmc.targets.stan.model import StanModel, Variable, data_json

INIT_RADIUS = 2.0  # Stan's default: initial values uniform in (-2, 2) on the unconstrained space
INIT_TRIES = 100


def stan_logdensity(model: StanModel):
    """``position: (..., dim) -> (...)``, Stan's log density (Jacobian included, constants
    dropped) with a custom VJP whose gradient comes from the same call: through XLA's FFI
    (`ffi_logdensity`, no Python per call) for float64 positions, else a host callback."""
    callback = callback_logdensity(model)
    if not ffi_available(model):
        return callback
    compiled = ffi_logdensity(model)

    def logdensity(position):
        position = jnp.asarray(position)
        return compiled(position) if position.dtype == jnp.float64 else callback(position)

    return logdensity


def callback_logdensity(model: StanModel):
    """`stan_logdensity` through ``jax.pure_callback``: one host call per batch."""

    def host(points):
        points = np.asarray(points)
        values, grads, _ = model.log_density_gradient(points.reshape(-1, model.dim))
        with np.errstate(over="ignore"):  # in float32, beyond its range is -inf: a rejection
            return (values.reshape(points.shape[:-1]).astype(points.dtype),
                    grads.reshape(points.shape).astype(points.dtype))

    def value_and_grad(position):
        shapes = (jax.ShapeDtypeStruct(position.shape[:-1], position.dtype),
                  jax.ShapeDtypeStruct(position.shape, position.dtype))
        return jax.pure_callback(host, shapes, position, vmap_method="expand_dims")

    @jax.custom_vjp
    def logdensity(position):
        return value_and_grad(position)[0]

    def forward(position):
        return value_and_grad(position)

    def backward(grad, cotangent):
        return (cotangent[..., None] * grad,)

    logdensity.defvjp(forward, backward)
    return logdensity


def stan_constrain(model: StanModel, generated: bool):
    """``position: (dim,) -> {variable: array in its Stan shape}``, through Stan's
    ``write_array`` in one host call. Its attribute ``host`` does the same on NumPy points
    ``(n, dim)`` without a JAX program (a program with a host callback is not kept in JAX's
    compile cache, so the run's draws would compile it again in every process)."""
    variables = [v for v in model.variables if generated or v.block != "generated quantities"]
    width = sum(int(np.prod(v.shape, dtype=int)) for v in variables)

    def host(points):
        points = np.asarray(points)
        flat = model.constrain(points.reshape(-1, model.dim), True, generated)
        return flat.reshape(points.shape[:-1] + (width,)).astype(points.dtype)

    def split(flat, transpose):
        out, start = {}, 0
        for variable in variables:
            size = int(np.prod(variable.shape, dtype=int))
            out[variable.name] = _column_major(flat[..., start:start + size], variable,
                                               transpose)
            start += size
        return out

    def constrain(position):
        shape = jax.ShapeDtypeStruct(position.shape[:-1] + (width,), position.dtype)
        flat = jax.pure_callback(host, shape, position, vmap_method="expand_dims")
        return split(flat, jnp.transpose)

    constrain.host = lambda points: split(host(points), np.transpose)
    return constrain


def _column_major(values, variable: Variable, transpose=jnp.transpose):
    """Stan's flat column-major values ``(..., size)`` as an array ``(..., *shape)``."""
    batch = values.shape[:-1]
    reversed_shape = tuple(reversed(variable.shape))
    array = values.reshape(batch + reversed_shape)
    axes = tuple(range(len(batch))) + tuple(len(batch) + i for i in
                                            reversed(range(len(variable.shape))))
    return transpose(array, axes)


def initial_point(model: StanModel, name: str, seed: int = 0) -> np.ndarray:
    """Zero (Stan's ``init=0``), else the first of `INIT_TRIES` points uniform in
    ``(-2, 2)`` where the log density and its gradient are finite; `ValueError` if none."""
    rng = np.random.default_rng(seed)
    candidates = np.concatenate([np.zeros((1, model.dim)),
                                 rng.uniform(-INIT_RADIUS, INIT_RADIUS, (INIT_TRIES, model.dim))])
    first_message = ""
    for point in candidates:
        value, grad, message = model.log_density_gradient(point[None])
        if np.isfinite(value[0]) and np.all(np.isfinite(grad)):
            return point
        first_message = first_message or message or (
            f"log density {value[0]}" if not np.isfinite(value[0]) else "gradient not finite")
    raise ValueError(
        f"Stan model {name!r} rejects every initial point tried (zero and {INIT_TRIES} "
        f"uniform in (-{INIT_RADIUS:g}, {INIT_RADIUS:g})): {first_message}")


def stan_target(stan_file: str | Path, data: Any = None, *, name: str | None = None,
                generated_quantities: bool = True, seed: int = 0) -> Target:
    """A `Target` from a Stan program and its data.

    Parameters
    ----------
    stan_file
        The ``.stan`` file; compiled on first use and cached (`build_model`).
    data
        The data block's values: a dict, a JSON string, a ``.json`` file or a
        ``.json.zip`` holding one; ``None`` for a model without data.
    generated_quantities
        Store the generated quantities with the draws (transformed parameters always are).
    seed
        Seed of the model's transformed data and of the search for an initial point.

    The target's ``info`` carries the `StanModel` (``"stan_model"``), the ``constrain``
    function and the file; a posteriordb folder (reference draws, or ``mean_value.json``)
    gives the target its reference and ``info["posterior"]``, the folder's name.
    """
    stan_file = Path(stan_file)
    if not stan_file.is_file():
        raise ValueError(f"Stan program {str(stan_file)!r} not found")
    library = build_model(stan_file)
    text = data_json(data)
    try:
        model = StanModel(library, text, seed)
    except ValueError as err:
        raise ValueError(f"data of {stan_file.name}: {_data_message(str(err), text)}") from None
    name = name or _default_name(stan_file)
    if model.dim == 0:
        raise ValueError(f"Stan model {name!r} has no parameters to sample")
    start = jnp.asarray(initial_point(model, name, seed))
    constrain = stan_constrain(model, generated_quantities)
    target = Target(
        name=name, logdensity=stan_logdensity(model), dim=model.dim,
        unravel=lambda position: position, initial_position=start,
        parameter_names=model.unconstrained_names, constrain=constrain,
        info={"stan_model": model, "stan_file": str(stan_file), "constrain": constrain,
              "observations": _observations(model, text, generated_quantities),
              "index_origin": 1, "derived": [v.name for v in model.variables
                                             if v.block == "generated quantities"]},
    )
    reference = _folder_reference(stan_file)
    if reference is not None:  # a posteriordb folder: the bench compares on its quantities
        target.info["posterior"] = stan_file.resolve().parent.name
    return dataclasses.replace(target, reference=reference)


def _observations(model: StanModel, text: str, generated: bool):
    """The program's data and, with its generated quantities, its ``log_lik`` and
    ``<y>_rep`` (`adaptmc.targets.observations.stan_observations`)."""
    from adaptmc.targets.observations import stan_observations

    data = json.loads(text) if text.strip() else {}
    variables = [v for v in model.variables if generated or v.block != "generated quantities"]
    return stan_observations(variables, data)


def _data_message(message: str, text: str) -> str:
    """Stan's message, or ``no value for 'y' (declared at line 3, column 2)`` when the
    variable it names is missing from the data (Stan reports a missing array as a
    dimension mismatch)."""
    named = re.search(r"variable name=(\w+)", message)
    try:
        given = json.loads(text) if text.strip() else {}
    except ValueError as err:
        return f"not valid JSON ({err})"
    if named is None or not isinstance(given, dict) or named[1] in given:
        return message
    where = re.search(r"line \d+, column \d+", message)
    return f"no value for {named[1]!r}" + (f" (declared at {where[0]})" if where else "")


def _default_name(stan_file: Path) -> str:
    """``stan-<posterior>`` for a posteriordb folder's ``model.stan``, else the file's stem."""
    if stan_file.stem == "model" and (stan_file.parent / "posterior.json").is_file():
        return f"stan-{stan_file.resolve().parent.name}"
    return stan_file.stem


def _folder_reference(stan_file: Path) -> Reference | None:
    """posteriordb's reference of the folder holding ``stan_file``, if it has one: from the
    reference draws (`posteriordb.posterior_reference`), else from ``mean_value.json`` and
    ``mean_squared_value.json`` (``sd = sqrt(E[x^2] - E[x]^2)``)."""
    folder = stan_file.resolve().parent
    means_file, squares_file = folder / "mean_value.json", folder / "mean_squared_value.json"
    if not means_file.is_file():
        return None
    if (folder / "reference_draws.json.zip").is_file():
        from adaptmc.datasets.posteriordb import load_posterior
        from adaptmc.targets.posteriordb import posterior_reference

        return posterior_reference(load_posterior(folder))
    if not squares_file.is_file():
        return None
    means, squares = json.loads(means_file.read_text()), json.loads(squares_file.read_text())
    mean = np.asarray(means["mean_value"], float)
    square = dict(zip(squares["names"], squares["mean_squared_value"], strict=True))
    sd = np.sqrt(np.maximum([square[n] for n in means["names"]] - mean**2, 0.0))
    return Reference(tuple(means["names"]), mean, sd,
                     np.asarray(means["mcse_mean"], float) if "mcse_mean" in means else None)
