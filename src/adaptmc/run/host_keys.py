"""A run's keys and jittered starts computed on the host, bit for bit as JAX computes them.

JAX's default keys are Threefry-2x32 (Salmon, Moraes, Dror & Shaw 2011, "Parallel random
numbers: as easy as 1, 2, 3", Sec. 3; 20 rounds, JAX's ``threefry2x32.py``); splitting,
folding in and drawing bits hash counters with it, integer work that NumPy's wrapping
``uint32`` arithmetic does exactly. A uniform draw sets a float's mantissa from the bits,
subtracts 1, scales and shifts (JAX's ``random._uniform``): IEEE operations, each exact in
NumPy as in XLA. Done on the host, the run's first program (`adaptmc.run.plan.run_start`)
is not compiled at all. `available` says when this holds: JAX's default Threefry keys,
split the partitionable way (``jax_threefry_partitionable``, the default), in 64-bit mode
(as ``adaptmc sample`` runs); otherwise the run compiles the program as before.
"""

from __future__ import annotations

import jax
import numpy as np

ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
PARITY = np.uint32(0x1BD11BDA)


def available() -> bool:
    """Whether JAX's keys are the ones computed here: its default Threefry keys, split the
    partitionable way, from a 64-bit seed (with x64 off, JAX takes the seed as 32 bits)."""
    return jax.config.jax_default_prng_impl == "threefry2x32" and \
        bool(jax.config.jax_threefry_partitionable) and bool(jax.config.jax_enable_x64)


def threefry2x32(key: np.ndarray, x1: np.ndarray, x2: np.ndarray) -> tuple:
    """Threefry-2x32 of the counters ``(x1, x2)`` (``uint32`` arrays) under ``key: (2,)``."""
    k1, k2 = np.asarray(key, np.uint32)
    ks = (k1, k2, k1 ^ k2 ^ PARITY)
    x1, x2 = np.asarray(x1, np.uint32) + ks[0], np.asarray(x2, np.uint32) + ks[1]
    for i in range(5):
        for r in ROTATIONS[i % 2]:
            x1 = x1 + x2
            x2 = x1 ^ ((x2 << np.uint32(r)) | (x2 >> np.uint32(32 - r)))
        x1 = x1 + ks[(i + 1) % 3]
        x2 = x2 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x1, x2


def seed_key(seed: int) -> np.ndarray:
    """``jax.random.key(seed)``'s data: the 64-bit seed as two words."""
    seed = int(seed)
    return np.array([(seed >> 32) & 0xFFFFFFFF, seed & 0xFFFFFFFF], np.uint32)


def split(key: np.ndarray, num: int) -> np.ndarray:
    """``jax.random.split(key, num)``'s data, ``(num, 2)``."""
    b1, b2 = threefry2x32(key, np.zeros(num, np.uint32), np.arange(num, dtype=np.uint32))
    return np.stack([b1, b2], axis=1)


def fold_in(key: np.ndarray, data: int) -> np.ndarray:
    """``jax.random.fold_in(key, data)``'s data."""
    b1, b2 = threefry2x32(key, np.zeros(1, np.uint32), np.array([data], np.uint32))
    return np.concatenate([b1, b2])


def uniform(key: np.ndarray, shape: tuple, minval: float, maxval: float,
            dtype) -> np.ndarray:
    """``jax.random.uniform(key, shape, dtype, minval, maxval)``."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    b1, b2 = threefry2x32(key, np.zeros(n, np.uint32), np.arange(n, dtype=np.uint32))
    finfo = np.finfo(dtype)
    if finfo.bits == 64:
        bits = (b1.astype(np.uint64) << np.uint64(32)) | b2.astype(np.uint64)
        uint = np.uint64
    else:
        bits, uint = b1 ^ b2, np.uint32
    float_bits = (bits >> uint(finfo.bits - finfo.nmant)) | np.array(1.0, dtype).view(uint)
    floats = float_bits.view(dtype) - dtype.type(1.0)
    low, high = dtype.type(minval), dtype.type(maxval)
    return np.maximum(low, (floats * (high - low) + low).reshape(shape))


def run_keys(seed: int) -> dict[str, np.ndarray]:
    """The data of `adaptmc.run.plan`'s keys of ``seed``: ``root`` its key, ``init`` and
    ``run`` its split, ``tuner`` ``init`` folded with 1, ``warmup`` ``root`` folded with
    ``2**31 - 1``."""
    root = seed_key(seed)
    init, run = split(root, 2)
    return {"init": init, "run": run, "tuner": fold_in(init, 1),
            "warmup": fold_in(root, 2**31 - 1), "root": root}


def run_start(seed: int, start: np.ndarray, num_chains: int, init_jitter: float) -> tuple:
    """`adaptmc.run.plan.run_start` on the host: ``(keys, positions)``, the keys JAX key
    arrays (their data wrapped: no program) and ``start + U(-init_jitter, init_jitter)``."""
    data = run_keys(seed)
    start = np.asarray(start)
    real = jax.dtypes.canonicalize_dtype(np.float64)  # `jax.random.uniform`'s default
    jitter = uniform(data["init"], (num_chains, start.shape[0]), -init_jitter, init_jitter,
                     real)
    keys = {name: jax.random.wrap_key_data(value) for name, value in data.items()}
    return keys, start + jitter.astype(start.dtype)
