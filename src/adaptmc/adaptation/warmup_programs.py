"""The early warm-up's program (`adaptmc.adaptation.early`), the chunk of `CHUNK` NUTS
transitions per chain (`adaptmc.adaptation.compact_nuts`, parameters at call time: Hoffman &
Gelman 2014, Alg. 3 and 6), one program per target and shape whose keys, states, step sizes
and metric are arguments; and its start at the chains' starts (`first_on_host`), on the
host through the target's single-point program."""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.adaptation.chains import over_chains
from adaptmc.adaptation.compact_nuts import NutsState, nuts_step, transition_bits
from adaptmc.adaptation.counter_random import unit
from adaptmc.adaptation.dual_averaging import DualAveragingState, da_update
from adaptmc.adaptation.first_step import reasonable_step_size_on_host
from adaptmc.adaptation.host_random import key_rng
from adaptmc.adaptation.low_rank import LowRankInverseMass
from adaptmc.targets.base import (
    compile_ahead,
    compiled,
    compiled_logdensity_and_grad,
    lowered_logdensity_and_grad,
)

CHUNK = 10
"""NUTS transitions per chain in one call of the chunk program."""


def first_on_host(target, key, positions: np.ndarray):
    """``(log densities, gradients, inverse masses, step sizes, trials)`` per chain at the
    warm-up's starts ``positions: (chains, dim)``: the log density and gradient, nutpie's
    initial inverse mass ``1 / |grad|`` and the first step under it (Hoffman & Gelman 2014,
    Alg. 4, `reasonable_step_size_on_host`; its momentum drawn from ``key``'s stream of
    the chain, `host_random.key_rng`), all on the host through the target's single-point
    program (`compiled_logdensity_and_grad`, the start checks'): the model's gradient in
    no program of its own."""
    program = compiled_logdensity_and_grad(target)
    rows = []
    for chain, x in enumerate(positions):
        logdensity, grad = (np.asarray(a) for a in program(x))
        scale = np.abs(grad)
        with np.errstate(divide="ignore"):
            inverse_mass = np.clip(np.where(scale > 0, 1.0 / scale, 1.0), 1e-20, 1e20)
        momentum = key_rng(key, FIRST_STEP_STREAM, chain).standard_normal(x.shape[0])
        step, trials = reasonable_step_size_on_host(momentum / np.sqrt(inverse_mass), program,
                                                    x, (logdensity, grad), inverse_mass)
        rows.append((logdensity, grad, inverse_mass, step, trials))
    logdensity, grad, inverse_mass, steps, trials = (np.stack(c) for c in zip(*rows, strict=True))
    return logdensity, grad, inverse_mass, steps, trials


FIRST_STEP_STREAM = 2
"""The warm-up key's stream (path ``(2, chain)``) of the first step's momenta; the chunks'
keys are its stream ``()`` (`host_random.split`)."""


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
            u = unit(bits[i, -1], packed.dtype) * 2.0 - 1.0
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

    return jax.jit(nuts_chunk, compiler_options=chunk_compiler_options(target, options=QUICK_NUTS))


QUICK_CHUNK = {"xla_cpu_use_fusion_emitters": False}
"""XLA's options for the chunk program of a cheap model on a CPU: XLA's older CPU loop
emitter compiles it in about 60% of the seconds, and runs a model whose gradient is a few
thousand operations as fast; a model of 5e5 operations per gradient ran 35% slower per
gradient (docs/notes/cold-compile.md). A model called as one custom call (a Stan program
through XLA's FFI) leaves XLA the sampler's arithmetic alone, which compiles faster under it
and runs as fast (docs/notes/stan-compile.md)."""
QUICK_NUTS = {**QUICK_CHUNK, "xla_backend_optimization_level": 0}
"""`QUICK_CHUNK` for the NUTS chunk (the warm-up's program, NUTS's sampling where MAMS does
not sample), without LLVM's optimisation: it is the first program a run waits for, and
compiles in a quarter of the CPU seconds (arK 0.49 against 2.0 s, kidiq 0.41 against 1.8,
Stan's arK 0.42 against 2.1) for 0-30 % more CPU per gradient of the warm-up (most of a
chunk's seconds are the host's between chunks) (docs/notes/cold-compile.md)."""
QUICK_CHUNK_FLOPS = 1e5
"""The most operations per gradient that XLA compiles (`model_operations`) of a model whose
chunk programs (the NUTS chunk, MAMS's `adaptmc.kernels.mams_chunk`) compile under
`QUICK_CHUNK`. Below it the seconds a run loses to slower transitions are a small part of
the compile seconds saved: MAMS's chunk on kidiq (1e4 operations) runs 1.6x slower per
gradient under it (2.9 against 1.9 us over four chains), 0.015 s over a default run's 14k
gradients, and compiles 0.6 s sooner (docs/notes/stan-compile.md)."""


def chunk_compiler_options(target, most: float = QUICK_CHUNK_FLOPS,
                           options: dict = QUICK_CHUNK) -> dict | None:
    """``options`` (`QUICK_CHUNK`) on a CPU for a model of at most ``most`` operations per
    gradient that XLA compiles (`model_operations`: the older emitter's work), None (XLA's
    defaults) for a heavier one or another backend; the same for every run of the model (the
    same program and draws)."""
    if jax.default_backend() != "cpu":
        return None
    flops = compiled(target, "model_operations", lambda: model_operations(target))
    return options if flops <= most else None


def model_operations(target) -> float:
    """Operations per gradient of the model that XLA compiles: XLA's cost analysis of its
    lowered value and gradient (the start checks' program, `compiled_logdensity_and_grad`),
    or, where it has custom calls (Stan's model through the FFI, LAPACK, a host callback:
    their own code under any XLA option, and uncounted), the elements of the arrays its
    other instructions compute (`computed_elements`)."""
    lowered = lowered_logdensity_and_grad(target)
    flops = (lowered.cost_analysis() or {}).get("flops")
    if flops is None or flops < 0:  # XLA cannot count a custom call (-1)
        return float(computed_elements(lowered.as_text(dialect="hlo")))
    return float(flops)


_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?\S+ = [a-z]\w*\[([\d,]*)\]\S* ([\w-]+)\(", re.M)
_NO_WORK = {"parameter", "constant", "get-tuple-element", "custom-call", "reshape", "bitcast"}


def computed_elements(hlo: str) -> int:
    """The elements of the arrays computed by the instructions of an HLO module's text
    ``hlo`` other than custom calls (and parameters, constants, reshapes): a count of the
    arithmetic XLA emits, one operation per element computed."""
    return sum(int(np.prod([int(d) for d in shape.split(",") if d], dtype=np.int64))
               for shape, op in _INSTRUCTION.findall(hlo) if op not in _NO_WORK)


def _pack(state, da, axis=0):
    """``state`` and dual averaging ``da`` as one array: position, gradient, log density
    and the five dual-averaging numbers (along ``axis``, the last)."""
    scalars = jnp.stack([state.logdensity, *da], axis=axis)
    return jnp.concatenate([state.position, state.logdensity_grad, scalars], axis=axis)


def chunk_key(target_accept: float, rank: int) -> tuple:
    """The chunk program's key in the target's program store (`compiled`)."""
    return ("early_warmup_chunk", CHUNK, target_accept, rank)


def compile_chunk_ahead(target, target_accept: float, rank: int, positions, key) -> None:
    """Start compiling the chunk program in a thread of its own (`compile_ahead`) for the
    rows the warm-up will give it: chains at positions like ``positions: (chains, dim)``
    with keys like ``key`` (arrays or their ``jax.ShapeDtypeStruct``), their log densities
    and gradients of the model's dtypes. XLA compiles it on another core while the run
    makes its starts and their first steps."""
    chains, dim = positions.shape
    # the start checks' program's trace, in memory: the model is not traced again
    logdensity, grad = compiled_logdensity_and_grad(target).trace(
        jax.ShapeDtypeStruct((dim,), positions.dtype)).out_info
    real = jax.dtypes.canonicalize_dtype(np.float64)  # the host arrays `_rows` gives
    shapes = ((dim,), (dim, rank), (rank,))  # the metric: every chain's, not broadcast
    state = NutsState(jax.ShapeDtypeStruct(positions.shape, positions.dtype),
                      jax.ShapeDtypeStruct((chains,), logdensity.dtype),
                      jax.ShapeDtypeStruct((chains, dim), grad.dtype))
    da = DualAveragingState(*(jax.ShapeDtypeStruct((chains,), real) for _ in range(5)))
    rows = (jax.ShapeDtypeStruct((chains,), key.dtype), state, da,
            tuple(jax.ShapeDtypeStruct(s, real) for s in shapes),
            jax.ShapeDtypeStruct((chains,), real))
    compile_ahead(target, chunk_key(target_accept, rank),
                  lambda: chunk_program(target, target_accept), rows,
                  settings=chunk_settings(target, target_accept, rank))


def chunk_settings(target, target_accept: float, rank: int) -> tuple:
    """What the chunk program closes over besides the model: the key of its stored
    executable (`adaptmc.targets.executables`) with the arguments' shapes."""
    return ("nuts_chunk", chunk_key(target_accept, rank), float(target_accept), CHUNK,
            transition_bits(target.dim), chunk_compiler_options(target, options=QUICK_NUTS))


def padded(metric: LowRankInverseMass, rank: int):
    """``metric`` as the program's arrays: ``rank`` directions, the unused ones with
    eigenvalue 1 (no effect)."""
    diag, vectors, values = (np.asarray(a, dtype=float) for a in metric)
    dim, k = vectors.shape
    padded_vectors = np.zeros((dim, rank))
    padded_values = np.ones(rank)
    padded_vectors[:, :k], padded_values[:k] = vectors[:, :rank], values[:rank]
    return diag, padded_vectors, padded_values
