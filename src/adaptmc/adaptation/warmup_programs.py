"""The early warm-up's compiled programs (`adaptmc.adaptation.early`): the first, at the
chains' starts, and the chunk of `CHUNK` NUTS transitions per chain (BlackJAX's kernel,
parameters at call time: Hoffman & Gelman 2014, Alg. 3 and 6), each one program per target
and shape whose key, states, step sizes and metric are arguments, the key splits and the
dual averaging's start inside the first."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.adaptation.chains import over_chains
from adaptmc.adaptation.dual_averaging import da_init, da_update, on_host
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
    """Per chain, `CHUNK` NUTS transitions under a shared low-rank-plus-diagonal metric with
    dual averaging of the chain's step size: ``rows -> (states, dual averaging, outputs)``,
    ``rows`` per chain its key (`split`), state, dual averaging, the metric's arrays
    (broadcast) and a jitter ``j``: each transition's step is dual averaging's times
    ``U(1 - j, 1 + j)`` (0 in the warm-up; sampling's, Neal 2011, Sec. 5.4.2.2); outputs per
    transition: position, gradient, log density, leapfrog steps, divergent, acceptance
    statistic, step size."""
    import blackjax
    from blackjax.mcmc.metrics import LowRankInverseMassMatrix

    kernel = blackjax.nuts.build_kernel()

    def one(row):
        key, state, da, metric, jitter = row  # the metric is every chain's (broadcast)
        diag, vectors, values = metric
        inverse_mass = LowRankInverseMassMatrix(jnp.sqrt(diag), vectors, values)

        def body(carry, key):
            state, da = carry
            # a key of its own: with jitter 0 the transitions are those without it
            u = jax.random.uniform(jax.random.fold_in(key, 1), minval=-1.0, maxval=1.0)
            step = jnp.exp(da.log_step_size) * (1.0 + jitter * u)
            state, info = kernel(key, state, target.logdensity, step, inverse_mass)
            da = da_update(da, info.acceptance_rate, target_accept)
            return (state, da), (state.position, state.logdensity_grad, state.logdensity,
                                 info.num_integration_steps, info.is_divergent,
                                 info.acceptance_rate, step)

        (state, da), out = jax.lax.scan(body, (state, da), jax.random.split(key, CHUNK))
        return state, da, out

    return jax.jit(over_chains(one))


def chunk_key(target_accept: float, rank: int) -> tuple:
    """The chunk program's key in the target's program store (`compiled`)."""
    return ("early_warmup_chunk", CHUNK, target_accept, rank)


def compile_chunk_ahead(target, target_accept: float, rank: int, first_out,
                        positions) -> None:
    """Start compiling the chunk program in a thread of its own (`compile_ahead`) for the
    rows the warm-up will give it: their shapes and dtypes from ``first_out`` (the first
    program's outputs as `jax.eval_shape` gives them) and ``positions: (chains, dim)``.
    XLA compiles it on another core while the first program runs."""
    from blackjax.mcmc.hmc import HMCState

    chains, dim = positions.shape
    key, logdensity, grad, _, da, _ = first_out
    real = jax.dtypes.canonicalize_dtype(np.float64)  # the host arrays `_rows` gives
    shapes = ((chains, dim), (chains, dim, rank), (chains, rank))
    state = HMCState(jax.ShapeDtypeStruct(positions.shape, positions.dtype), logdensity, grad)
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
