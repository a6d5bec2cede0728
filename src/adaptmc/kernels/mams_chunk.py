"""MAMS's one compiled program: every transition a MAMS run makes after the warm-up.

The dual averaging of MAMS's step, the measurement that sets its trajectory length and
thinning, and the sampling blocks (`adaptmc.recipes.mams_sampling`, `adaptmc.run.mams_stage`)
all call `chunk_program`, whose settings are arguments, so one program per target and shape
(chains, dimension, rank of the metric, dtype) is compiled, and its shapes are known when
the warm-up starts (`chunk_ahead` compiles it alongside the warm-up).

One call runs ``count`` transitions (a traced number) of every chain
(`adaptmc.kernels.mams`: a fresh unit velocity, isokinetic velocity Verlet steps, M-H on
``W``), the chains stepping together at one step size ``eps``: ``fixed`` steps per
transition when positive, else ``max(1, round(length / eps))``, each chain's step jittered
by ``U(1 - j, 1 + j)`` (Neal 2011, Sec. 5.4.2.2). With ``adapt`` the step is dual-averaged
(Hoffman & Gelman 2014, Alg. 5) after every transition on the chains' mean acceptance
probability; without, it stays where the state given puts it. A transition never steps below
``floor`` (the dual averaging's own state may: its caller reads that as the floor hit).
Every ``thin``-th transition is kept in a buffer of `CAPACITY` draws; per chain the
gradients, divergences and acceptance probabilities of every transition (kept or not) are
summed.

The metric is the warm-up's ``M^-1 = D^1/2 (I + U (Lambda - 1) U^T) D^1/2`` as padded
arrays (`as_padded`: a diagonal, dense or low-rank inverse mass alike), its square root
``S = D^1/2 (I + U (Lambda^1/2 - 1) U^T)`` (`adaptmc.kernels.metrics.low_rank_metric`). The
random numbers come from a counter-based hash (as compact NUTS's uniforms,
`adaptmc.adaptation.compact_nuts`) seeded per chain and call by one threefry call: the
velocity's normals by Box-Muller, the jitter's and the acceptance's uniforms.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.adaptation.counter_random import normals, words
from adaptmc.adaptation.dual_averaging import DualAveragingState, da_update
from adaptmc.adaptation.host_random import split
from adaptmc.adaptation.low_rank import LowRankInverseMass
from adaptmc.adaptation.warmup_programs import chunk_compiler_options
from adaptmc.kernels.base import accept_with, select
from adaptmc.kernels.mams import MAMSState, propose
from adaptmc.kernels.metrics import low_rank_metric
from adaptmc.targets.base import compile_ahead, compiled

CAPACITY = 150
"""Kept draws per chain one call returns at most (the most any stage keeps per call)."""

KEY = ("mams_chunk", CAPACITY)
"""The program's key in the target's program store (`compiled`)."""

_STATS = 4  # per kept draw after position and log density: acceptance, accepted, divergent,
#             energy error


class ChunkOut(NamedTuple):
    """One call's results, on the host: states (`MAMSState` of ``(chains, ...)`` arrays);
    da: the dual averaging's five numbers after it; positions ``(chains, kept, dim)``;
    logdensity, acceptance, accepted, divergent, energy_error ``(chains, kept)``; steps
    ``(kept,)`` isokinetic steps of each kept transition; grads, divergences, acceptance_sum
    ``(chains,)``: per chain over every transition of the call."""

    states: MAMSState
    da: np.ndarray
    positions: np.ndarray
    logdensity: np.ndarray
    acceptance: np.ndarray
    accepted: np.ndarray
    divergent: np.ndarray
    energy_error: np.ndarray
    steps: np.ndarray
    grads: np.ndarray
    divergences: np.ndarray
    acceptance_sum: np.ndarray


def steps_for(length, step_size):
    """Isokinetic steps of a transition of length ``length`` at ``step_size``: at least 1."""
    return jnp.maximum(1, jnp.round(length / step_size)).astype(jnp.int32)


def _transition(target, metric, dim: int):
    """One chain's transition ``(seed, packed, t, eps, n, jitter) -> (packed, StepInfo)``,
    ``packed`` its position, gradient and log density in one vector."""
    half = -(-dim // 2)

    def one(seed, packed, t, eps, n, jitter):
        dtype = packed.dtype
        state = MAMSState(packed[:dim], packed[2 * dim], packed[dim:2 * dim])
        bits = words(seed, t, 2 * half + 2)
        z = normals(bits[:2 * half], dtype)[:dim]
        u = (bits[-2:].astype(dtype) + 0.5) * 2.0**-32
        step = eps * (1.0 + jitter * (2.0 * u[0] - 1.0))
        proposal, log_ratio = propose(target, metric, state, z / jnp.linalg.norm(z), step, n)
        accept, info = accept_with(jnp.log(u[1]), log_ratio, n)
        new = select(accept, proposal, state)
        return jnp.concatenate([new.position, new.logdensity_grad, new.logdensity[None]]), info

    return one


def chunk_program(target):
    """``(chain_keys, packed: (chains, 2 dim + 1), metric, da: (5,), reals, ints) ->
    (packed, da, out: (chains, CAPACITY, dim + 5), steps: (CAPACITY,), int_totals: (chains,
    2), acceptance_sum: (chains,))``: ``reals = (length, jitter, target_accept)``, ``ints =
    (fixed, adapt, thin, count)`` (module docstring); ``out`` per kept draw its position,
    log density, acceptance probability, accepted, divergent and energy error;
    ``int_totals`` gradients and divergences."""
    dim = target.dim

    def mams_chunk(chain_keys, packed, metric, da, reals, ints):
        length, jitter, target_accept, floor = reals[0], reals[1], reals[2], reals[3]
        fixed, adapt, thin, count = ints[0], ints[1], ints[2], ints[3]
        seeds = jax.vmap(lambda k: jax.random.bits(k, (2,), jnp.uint32))(chain_keys)
        step = jax.vmap(_transition(target, low_rank_metric(LowRankInverseMass(*metric)), dim),
                        in_axes=(0, 0, None, None, None, None))
        dtype, chains = packed.dtype, packed.shape[0]

        def body(t, carry):
            packed, da, out, steps, totals, acc_sum = carry
            averaging = DualAveragingState(*(da[i] for i in range(5)))
            eps = jnp.maximum(jnp.exp(averaging.log_step_size), floor).astype(dtype)
            n = jnp.where(fixed > 0, fixed, steps_for(length, eps))
            packed, info = step(seeds, packed, t, eps, n, jitter)
            updated = jnp.stack(da_update(averaging, jnp.mean(info.acceptance_rate),
                                          target_accept))
            da = jnp.where(adapt > 0, updated, da)
            slot = jnp.where((t + 1) % thin == 0, t // thin, CAPACITY)  # out of range: dropped
            row = jnp.concatenate([packed[:, :dim], packed[:, 2 * dim:], jnp.stack(
                [info.acceptance_rate, info.accepted, info.is_divergent, info.energy_error],
                axis=1).astype(dtype)], axis=1)
            totals = totals + jnp.stack([jnp.broadcast_to(n, (chains,)),
                                         info.is_divergent.astype(jnp.int32)], axis=1)
            return (packed, da, out.at[:, slot].set(row, mode="drop"),
                    steps.at[slot].set(n, mode="drop"), totals,
                    acc_sum + info.acceptance_rate.astype(acc_sum.dtype))

        start = (packed, da, jnp.zeros((chains, CAPACITY, dim + 1 + _STATS), dtype),
                 jnp.zeros(CAPACITY, jnp.int32), jnp.zeros((chains, 2), jnp.int32),
                 jnp.zeros(chains, da.dtype))
        return jax.lax.fori_loop(0, count, body, start)

    return jax.jit(mams_chunk, compiler_options=chunk_compiler_options(target))


def as_padded(inverse_mass, dim: int, rank: int, dtype) -> tuple[np.ndarray, ...]:
    """``(diag (dim,), vectors (dim, rank), values (rank,))`` of ``M^-1 = diag^1/2 (I +
    U (Lambda - 1) U^T) diag^1/2`` for a scalar, ``(dim,)``, ``(dim, dim)`` or
    `LowRankInverseMass` inverse mass, the unused directions with eigenvalue 1 (no effect);
    a dense one by the eigenvectors of its correlation matrix (needs ``rank >= dim``)."""
    vectors, values = np.zeros((dim, rank)), np.ones(rank)
    if isinstance(inverse_mass, LowRankInverseMass):
        diag, u, lam = (np.asarray(a, dtype=float) for a in inverse_mass)
        k = min(rank, lam.shape[0])
        vectors[:, :k], values[:k] = u[:, :k], lam[:k]
    elif np.ndim(inverse_mass) <= 1:
        diag = np.broadcast_to(np.asarray(inverse_mass, dtype=float), (dim,))
    else:
        if rank < dim:
            raise ValueError(f"a dense inverse mass needs rank {dim}, got {rank}")
        dense = np.asarray(inverse_mass, dtype=float)
        diag = np.diag(dense).copy()
        root = np.sqrt(diag)
        lam, u = np.linalg.eigh(dense / np.outer(root, root))
        vectors[:, :dim], values[:dim] = u, lam
    return tuple(np.asarray(a, dtype=dtype) for a in (diag, vectors, values))


def _arguments(chains: int, dim: int, rank: int, dtype, key_dtype) -> tuple:
    """The program's arguments' shapes and dtypes (`jax.ShapeDtypeStruct`)."""
    real, shaped = jax.dtypes.canonicalize_dtype(np.float64), jax.ShapeDtypeStruct
    return (shaped((chains,), key_dtype), shaped((chains, 2 * dim + 1), dtype),
            (shaped((dim,), dtype), shaped((dim, rank), dtype), shaped((rank,), dtype)),
            shaped((5,), real), shaped((4,), real), shaped((4,), np.int32))


def chunk_ahead(target, chains: int, rank: int, dtype, key) -> None:
    """Start compiling `chunk_program` for ``chains`` chains, a metric of ``rank``
    directions, positions of ``dtype`` and keys like ``key`` (a typed key) in a thread of
    its own (`adaptmc.targets.base.compile_ahead`), while the warm-up runs."""
    if KEY not in target.programs:
        key_dtype = jax.eval_shape(lambda k: jax.random.split(k, chains), key).dtype
        compile_ahead(target, KEY, lambda: chunk_program(target),
                      *_arguments(chains, target.dim, rank,
                                  jax.dtypes.canonicalize_dtype(dtype), key_dtype),
                      settings=("mams_chunk", KEY, CAPACITY, _STATS,
                                chunk_compiler_options(target)))


def run_chunk(target, key, states, metric, da, *, count: int, length: float = 0.0,
              fixed_steps: int = 0, adapt: bool = False, thin: int = 1, jitter: float = 0.0,
              target_accept: float = 0.9, floor: float = 0.0, fold: int = 0) -> ChunkOut:
    """``count`` transitions of every chain from ``states`` (position, log density and
    gradient ``(chains, ...)``) under ``metric`` (`as_padded`), dual averaging ``da`` (five
    numbers: its state; the step ``exp(da[0])``, never below ``floor``), keeping every
    ``thin``-th (at most `CAPACITY`): `chunk_program`. ``key``: a PRNG key, folded with
    ``fold`` and split per chain on the host (`adaptmc.adaptation.host_random.split`: no
    program)."""
    if count // thin > CAPACITY or count < 1:
        raise ValueError(f"1 to {CAPACITY} kept draws per call, got {count} // {thin}")
    position = np.asarray(states.position)
    chains, dim = position.shape
    packed = np.concatenate([position, np.asarray(states.logdensity_grad, position.dtype),
                             np.asarray(states.logdensity, position.dtype)[:, None]], axis=1)
    real = jax.dtypes.canonicalize_dtype(np.float64)
    _, chain_keys = split(key, chains, fold)
    program = compiled(target, KEY, lambda: chunk_program(target))
    out = program(chain_keys, packed, tuple(metric), np.asarray(da, real),
                  np.asarray([length, jitter, target_accept, floor], real),
                  np.asarray([fixed_steps, int(adapt), thin, count], np.int32))
    packed, da, rows, steps, totals, acc_sum = (np.asarray(a) for a in out)
    kept = count // thin
    rows, stats = rows[:, :kept], rows[:, :kept, dim + 1:]
    states = MAMSState(packed[:, :dim], packed[:, 2 * dim], packed[:, dim:2 * dim])
    return ChunkOut(states, da, rows[..., :dim], rows[..., dim], stats[..., 0],
                    stats[..., 1] > 0, stats[..., 2] > 0, stats[..., 3], steps[:kept],
                    totals[:, 0], totals[:, 1], acc_sum)


def da_start(step_size: float, ten: float = 10.0) -> np.ndarray:
    """`adaptmc.adaptation.dual_averaging.da_init` on the host: the five numbers of a dual
    averaging from ``step_size``, shrinking toward ``log(ten step_size)``."""
    log = float(np.log(step_size))
    return np.array([log, 0.0, 0.0, float(np.log(ten)) + log, 0.0])


def da_fixed(step_size: float) -> np.ndarray:
    """The dual averaging's numbers of a fixed step (not updated: ``adapt`` off)."""
    log = float(np.log(step_size))
    return np.array([log, log, 0.0, log, 0.0])
