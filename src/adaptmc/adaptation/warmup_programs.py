"""The early warm-up's compiled programs (`adaptmc.adaptation.early`): the first, at the
chains' starts, and the chunk of `CHUNK` NUTS transitions per chain (BlackJAX's kernel,
parameters at call time: Hoffman & Gelman 2014, Alg. 3 and 6), each one program per target
and shape whose key, states, step sizes and metric are arguments, the key splits and the
dual averaging's start inside them."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.adaptation.chains import over_chains
from adaptmc.adaptation.dual_averaging import da_init, da_update
from adaptmc.adaptation.low_rank import LowRankInverseMass
from adaptmc.adaptation.window import reasonable_step_size
from adaptmc.targets.base import QUICK_COMPILE, compiled

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
        step, grads = reasonable_step_size(key, target, x, inverse_mass=inverse_mass)
        return logdensity, grad, inverse_mass, step, grads

    def first(key, positions, ten):
        key, keys = split_keys(key, positions.shape[0])
        logdensity, grad, inverse_mass, step, grads = over_chains(one)((keys, positions))
        return key, logdensity, grad, inverse_mass, da_init(step, ten), grads

    return compiled(target, "early_warmup_first", lambda: jax.jit(
        first, compiler_options=QUICK_COMPILE))


def chunk_program(target, target_accept: float):
    """``(key, states, dual averaging, metric) -> (next key, states, dual averaging,
    outputs)``: the key split (`split_keys`), then per chain `CHUNK` NUTS transitions under the
    shared low-rank-plus-diagonal metric ``(diag, vectors, values)`` with dual averaging of
    the chain's step size; outputs per transition: position, gradient, log density,
    leapfrog steps, divergent."""
    import blackjax
    from blackjax.mcmc.metrics import LowRankInverseMassMatrix

    kernel = blackjax.nuts.build_kernel()

    def body(carry, _):
        # one chain's transition t; its keys and the metric ride in the carry, so that
        # the chains' map runs `jax.lax.scan` itself (the path to a kernel step stays short)
        state, da, keys, t, (diag, vectors, values) = carry
        inverse_mass = LowRankInverseMassMatrix(jnp.sqrt(diag), vectors, values)
        state, info = kernel(keys[t], state, target.logdensity, jnp.exp(da.log_step_size),
                             inverse_mass)
        da = da_update(da, info.acceptance_rate, target_accept)
        return (state, da, keys, t + 1, (diag, vectors, values)), (
            state.position, state.logdensity_grad, state.logdensity,
            info.num_integration_steps, info.is_divergent)

    def chunk(key, state, da, metric):
        chains = state.position.shape[0]
        key, keys = split_keys(key, chains)
        steps = jax.vmap(functools.partial(jax.random.split, num=CHUNK))(keys)
        shared = tuple(jnp.broadcast_to(a, (chains, *a.shape)) for a in metric)
        start = (state, da, steps, jnp.zeros(chains, jnp.int32), shared)
        (state, da, *_), out = over_chains(functools.partial(
            jax.lax.scan, body, length=CHUNK))(start)
        return key, state, da, out

    return jax.jit(chunk)


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
