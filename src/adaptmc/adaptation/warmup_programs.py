"""The early warm-up's compiled programs (`adaptmc.adaptation.early`): the first, at the
chains' starts, and the chunk of `CHUNK` NUTS transitions per chain
(`adaptmc.adaptation.compact_nuts`, parameters at call time: Hoffman & Gelman 2014, Alg. 3
and 6), each one program per target and shape whose key, states, step sizes and metric are
arguments, the key splits and the dual averaging's start inside the first."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.adaptation.chains import over_chains
from adaptmc.adaptation.compact_nuts import NutsState, nuts_step, transition_bits
from adaptmc.adaptation.dual_averaging import (
    DualAveragingState,
    da_init,
    da_update,
    on_host,
)
from adaptmc.adaptation.low_rank import LowRankInverseMass
from adaptmc.adaptation.window import reasonable_step_size
from adaptmc.targets.base import QUICK_COMPILE, compile_ahead, compiled

CHUNK = 10
"""NUTS transitions per chain in one call of the chunk program."""


def first_program(target):
    """``(key, positions: (chains, dim), ten) -> (next key, log densities, gradients,
    inverse masses, dual averaging, gradients spent)``: the warm-up's key split (`split_keys`)
    and per chain the log density and gradient at the start, nutpie's initial inverse mass
    ``1 / |grad|`` and the first step under it (`reasonable_step_size`), whose dual
    averaging starts there (`da_init`; ``ten`` an argument, as `da_init_compiled` takes
    it); one program where each part compiled one of its own."""

    def one(row):
        key, x = row
        logdensity, grad = target.logdensity_and_grad(x)
        scale = jnp.abs(grad)
        inverse_mass = jnp.clip(jnp.where(scale > 0, 1.0 / scale, 1.0), 1e-20, 1e20)
        step, grads = reasonable_step_size(key, target, x, inverse_mass=inverse_mass,
                                           start=(logdensity, grad))
        return logdensity, grad, inverse_mass, step, grads

    def first(key, positions, ten):
        key, keys = split_keys(key, positions.shape[0])
        logdensity, grad, inverse_mass, step, grads = over_chains(one)((keys, positions))
        return key, logdensity, grad, inverse_mass, da_init(step, ten), grads

    return compiled(target, "early_warmup_first", lambda: jax.jit(
        first, compiler_options=QUICK_COMPILE))


def chunk_program(target, target_accept: float):
    """Per chain, `CHUNK` NUTS transitions (`adaptmc.adaptation.compact_nuts`) under a
    shared low-rank-plus-diagonal metric with dual averaging of the chain's step size:
    ``(keys, states, dual averaging, metric, jitter) -> (states, dual averaging,
    outputs)``, per chain its key (`split`), state, dual averaging and a jitter ``j``, the
    metric's arrays ``(diag, vectors, values)`` every chain's: each transition's step is
    dual averaging's times ``U(1 - j, 1 + j)`` (0 in the warm-up; sampling's, Neal 2011,
    Sec. 5.4.2.2); outputs per transition: position, gradient, log density, leapfrog
    steps, divergent, acceptance statistic, step size. A chain's random words for the
    whole chunk come from one threefry call; its carry and outputs travel packed in one
    array each (fewer programs for XLA to compile)."""
    dim = target.dim
    words = transition_bits(dim) + 1

    def nuts_chunk(rows):
        keys, state, da, metric, jitter = rows
        diag, vectors, values = metric
        metric = (jnp.sqrt(diag), vectors, values)

        def body(carry, _):  # a chain's carry: its state, the chunk's words, jitter, index
            packed, bits, jitter, i = carry
            state = NutsState(packed[:dim], packed[2 * dim], packed[dim:2 * dim])
            da = DualAveragingState(*(packed[2 * dim + 1 + j] for j in range(5)))
            u = _unit(bits[i, -1], packed.dtype) * 2.0 - 1.0
            step = jnp.exp(da.log_step_size) * (1.0 + jitter * u)
            state, info = nuts_step(bits[i, :-1], state, target.logdensity_and_grad, step,
                                    metric)
            packed = _pack(state, da_update(da, info.acceptance_rate, target_accept))
            return (packed, bits, jitter, i + 1), jnp.concatenate([packed[:2 * dim + 1], jnp.stack([
                info.num_integration_steps.astype(packed.dtype),
                info.is_divergent.astype(packed.dtype), info.acceptance_rate, step])])

        bits = jax.vmap(lambda key: jax.random.bits(key, (CHUNK, words), jnp.uint32))(keys)
        # a partial of `lax.scan`, no function of ours: the path to a kernel step stays short
        (packed, *_), out = over_chains(functools.partial(jax.lax.scan, body, length=CHUNK))(
            (_pack(state, da, axis=1), bits, jitter, jnp.zeros(keys.shape[0], jnp.int32)))
        state = NutsState(packed[:, :dim], packed[:, 2 * dim], packed[:, dim:2 * dim])
        da = DualAveragingState(*(packed[:, 2 * dim + 1 + j] for j in range(5)))
        lp, steps, div, acc, step = (out[..., 2 * dim + j] for j in range(5))
        return state, da, (out[..., :dim], out[..., dim:2 * dim], lp, steps.astype(jnp.int32),
                           div > 0, acc, step)

    return jax.jit(nuts_chunk)


def _pack(state, da, axis=0):
    """``state`` and dual averaging ``da`` as one array: position, gradient, log density
    and the five dual-averaging numbers (along ``axis``, the last)."""
    scalars = jnp.stack([state.logdensity, *da], axis=axis)
    return jnp.concatenate([state.position, state.logdensity_grad, scalars], axis=axis)


def _unit(word, dtype):
    """A uniform on (0, 1) from a random 32-bit ``word``."""
    return (word.astype(dtype) + 0.5) * 2.0**-32


def chunk_key(target_accept: float, rank: int) -> tuple:
    """The chunk program's key in the target's program store (`compiled`)."""
    return ("early_warmup_chunk", CHUNK, target_accept, rank)


def compile_chunk_ahead(target, target_accept: float, rank: int, first_out,
                        positions) -> None:
    """Start compiling the chunk program in a thread of its own (`compile_ahead`) for the
    rows the warm-up will give it: their shapes and dtypes from ``first_out`` (the first
    program's outputs as `jax.eval_shape` gives them) and ``positions: (chains, dim)``.
    XLA compiles it on another core while the first program runs."""
    chains, dim = positions.shape
    key, logdensity, grad, _, da, _ = first_out
    real = jax.dtypes.canonicalize_dtype(np.float64)  # the host arrays `_rows` gives
    shapes = ((dim,), (dim, rank), (rank,))  # the metric: every chain's, not broadcast
    state = NutsState(jax.ShapeDtypeStruct(positions.shape, positions.dtype), logdensity, grad)
    rows = (jax.ShapeDtypeStruct((chains,), key.dtype), state, da,
            tuple(jax.ShapeDtypeStruct(s, real) for s in shapes),
            jax.ShapeDtypeStruct((chains,), real))
    compile_ahead(target, chunk_key(target_accept, rank),
                  lambda: chunk_program(target, target_accept), rows)


def split(key, chains: int, fold: int | None = None):
    """`split_keys` of ``key`` (folded with ``fold`` first, if given), for the chunk's keys:
    in the one program of `adaptmc.adaptation.dual_averaging.on_host` (run eagerly, the
    same operations compile three)."""
    out = on_host(key, chains, fold)
    return out.key, out.chain_keys


def split_keys(key, chains: int):
    """``(next key, one key per chain)``: ``key`` split in two, the second split per chain
    (inside the warm-up's programs: no program of its own)."""
    key, key_chains = jax.random.split(key)
    return key, jax.random.split(key_chains, chains)


def padded(metric: LowRankInverseMass, rank: int):
    """``metric`` as the program's arrays: ``rank`` directions, the unused ones with
    eigenvalue 1 (no effect)."""
    diag, vectors, values = (np.asarray(a, dtype=float) for a in metric)
    dim, k = vectors.shape
    padded_vectors = np.zeros((dim, rank))
    padded_values = np.ones(rank)
    padded_vectors[:, :k], padded_values[:k] = vectors[:, :rank], values[:rank]
    return diag, padded_vectors, padded_values
