"""The chunk programs' XLA options (`adaptmc.adaptation.warmup_programs.chunk_compiler_options`):
XLA's older CPU emitter for a model whose arithmetic XLA compiles is cheap, custom calls (a
Stan program through the FFI, a host callback) not counted as XLA's."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.adaptation.warmup_programs import (
    QUICK_CHUNK,
    chunk_compiler_options,
    computed_elements,
)
from adaptmc.targets import make_target

pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu", reason="CPU options")


def _host_model(big: int = 0):
    """A log density through a host callback (a custom call to XLA), plus ``big`` elements
    of XLA arithmetic around it."""

    def host(x):
        return np.asarray(-0.5 * np.sum(np.asarray(x) ** 2), dtype=np.asarray(x).dtype)

    @jax.custom_vjp
    def called(x):
        return jax.pure_callback(host, jax.ShapeDtypeStruct((), x.dtype), x)

    called.defvjp(lambda x: (called(x), x), lambda x, g: (-g * x,))

    def logdensity(x):
        extra = jnp.sum(jnp.sin(jnp.outer(jnp.arange(big, dtype=x.dtype), x))) if big else 0.0
        return called(x) + 1e-9 * extra

    return make_target(logdensity, jnp.zeros(3), name="host")


def test_elements_count_xlas_arithmetic_not_the_custom_call():
    """A custom call's result is not counted; an elementwise operation counts its
    elements, a scalar one."""
    target = _host_model()
    lowered = jax.jit(jax.value_and_grad(target.logdensity)).lower(jnp.zeros(3))
    text = lowered.as_text(dialect="hlo")
    assert "custom-call" in text
    assert computed_elements(text) < 50
    square = jax.jit(lambda x: jnp.sin(x) * x).lower(jnp.zeros((100, 30))).as_text(dialect="hlo")
    assert 6000 <= computed_elements(square) <= 6100  # sine and product, or one fusion of 3000


def test_a_model_called_as_one_custom_call_takes_the_quick_options():
    """XLA's cost analysis cannot count a custom call: a model that is one (a Stan program,
    a host callback) leaves XLA the sampler's arithmetic alone, cheap to compile either
    way: `QUICK_CHUNK`; with 2e5 elements of XLA's arithmetic around it, XLA's defaults."""
    assert chunk_compiler_options(_host_model()) == QUICK_CHUNK
    assert chunk_compiler_options(_host_model(big=70_000)) is None


def _regression(rows: int, columns: int):
    design = jnp.asarray(np.random.default_rng(0).normal(size=(rows, columns)))
    return make_target(lambda b: -0.5 * jnp.sum((design @ b - 1.0) ** 2), jnp.zeros(columns))


def test_a_jax_model_by_its_flops():
    """A pure JAX model by XLA's cost analysis: a 10-d Gaussian is cheap, a regression of
    5000 rows on 30 columns (3e5 flops per gradient) is not."""
    gaussian = make_target(lambda x: -0.5 * jnp.sum(x**2), jnp.zeros(10))
    assert chunk_compiler_options(gaussian) == QUICK_CHUNK
    assert chunk_compiler_options(_regression(5000, 30)) is None


def test_mams_takes_the_quick_options_where_the_nuts_chunk_does(monkeypatch):
    """MAMS's chunk compiles under the NUTS chunk's options (`chunk_compiler_options` at
    its one threshold): a regression of 400 rows on 3 columns (kidiq's size) and a
    Stan-like model (one custom call) under `QUICK_CHUNK`."""
    from adaptmc.kernels import mams_chunk

    asked = []
    monkeypatch.setattr(mams_chunk, "chunk_compiler_options",
                        lambda *args, **kw: asked.append((args, kw)) or QUICK_CHUNK)
    small = _regression(400, 3)
    mams_chunk.chunk_program(small)
    assert asked == [((small,), {})]
    assert chunk_compiler_options(small) == chunk_compiler_options(_host_model()) == QUICK_CHUNK
