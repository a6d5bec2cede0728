"""A Stan model's log density inside a compiled JAX program, through XLA's FFI.

The model's library carries two XLA FFI handlers (``adaptmc_stan_ffi.cpp``): the log density
with its gradient, and the log density alone. `ffi_logdensity` calls them with
``jax.ffi.ffi_call``: the compiled program calls Stan's C++ directly, once per batch of
points (every chain's, under ``vmap``), with no Python and no host round trip per gradient.
The handlers count every evaluation (`evaluations`).
"""

from __future__ import annotations

import ctypes
from functools import cache, partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.targets.stan.model import StanModel


@cache
def _handlers(library: str) -> tuple[ctypes.CDLL, str, str]:
    """The library with its FFI functions typed, and the names of its two registered
    targets (named by the library's file: the same in every process)."""
    lib = ctypes.CDLL(library)
    lib.adaptmc_ffi_register.restype = ctypes.c_int64
    lib.adaptmc_ffi_register.argtypes = [ctypes.c_void_p]
    lib.adaptmc_ffi_release.restype = None
    lib.adaptmc_ffi_release.argtypes = [ctypes.c_int64]
    lib.adaptmc_ffi_counts.restype = None
    lib.adaptmc_ffi_counts.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)]
    path = Path(library)
    stem = f"adaptmc_stan_{path.parent.name}_{path.stem.replace('-', '_')}"
    names = (f"{stem}_gradient", f"{stem}_value")
    for name, function in zip(names, (lib.adaptmc_ffi_log_density_gradient,
                                      lib.adaptmc_ffi_log_density), strict=True):
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(function), platform="cpu")
    return lib, *names


def ffi_available(model: StanModel) -> bool:
    """Whether ``model``'s library has the FFI handlers (else: `jax.pure_callback`)."""
    try:
        _handlers(str(model.library))
    except (AttributeError, OSError):
        return False
    return True


def model_id(model: StanModel) -> int:
    """The id compiled programs name ``model`` by, registered on first use and released
    when the model is freed."""
    if getattr(model, "_ffi_id", None) is None:
        lib = _handlers(str(model.library))[0]
        model._ffi_id = int(lib.adaptmc_ffi_register(model.handle))
        model.on_free.append(partial(lib.adaptmc_ffi_release, model._ffi_id))
    return model._ffi_id


def evaluations(model: StanModel) -> dict[str, int]:
    """Evaluations of ``model`` by compiled programs so far: ``{"gradients": n, "values":
    m}`` (points, every chain's counted; a value alone is not a gradient)."""
    lib = _handlers(str(model.library))[0]
    out = (ctypes.c_int64 * 2)()
    lib.adaptmc_ffi_counts(model_id(model), out)
    return {"gradients": int(out[0]), "values": int(out[1])}


def ffi_logdensity(model: StanModel, propto: bool = True, jacobian: bool = True):
    """``position: (..., dim) float64 -> (...)``: Stan's log density (by default constants
    dropped, Jacobian included), its gradient by a custom VJP from the same call; a point
    the model rejects has ``-inf`` and a zero gradient. The value alone (no reverse pass)
    when no gradient is asked for."""
    _, gradient_target, value_target = _handlers(str(model.library))
    attributes = {"model": np.int64(model_id(model)), "propto": np.int64(propto),
                  "jacobian": np.int64(jacobian)}

    def value_and_grad(position):
        shapes = (jax.ShapeDtypeStruct(position.shape[:-1], jnp.float64),
                  jax.ShapeDtypeStruct(position.shape, jnp.float64))
        call = jax.ffi.ffi_call(gradient_target, shapes, vmap_method="expand_dims")
        return call(position, **attributes)

    @jax.custom_vjp
    def logdensity(position):
        shape = jax.ShapeDtypeStruct(position.shape[:-1], jnp.float64)
        call = jax.ffi.ffi_call(value_target, shape, vmap_method="expand_dims")
        return call(position, **attributes)

    def backward(grad, cotangent):
        return (cotangent[..., None] * grad,)

    logdensity.defvjp(value_and_grad, backward)
    return logdensity
