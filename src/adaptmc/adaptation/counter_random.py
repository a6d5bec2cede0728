"""Random numbers inside compiled samplers from a counter-based hash: a chain's transition
draws its uniforms and normals from ``(seed, counter)`` with no PRNG state carried, one
threefry call per chain and program call giving the seed (Salmon, Moraes, Dror & Shaw
2011, "Parallel random numbers: as easy as 1, 2, 3": counter-based generators). The mixing
is MurmurHash3's 32-bit finaliser (Appleby), the normals Box & Muller (1958). Used by the
compact NUTS (`adaptmc.adaptation.compact_nuts`), its chunk program
(`adaptmc.adaptation.warmup_programs`) and MAMS's program (`adaptmc.kernels.mams_chunk`)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np


def fmix(h):
    """MurmurHash3's 32-bit finaliser (Appleby): an avalanching bijection of ``uint32``."""
    h = (h ^ (h >> 16)) * np.uint32(0x85EBCA6B)
    h = (h ^ (h >> 13)) * np.uint32(0xC2B2AE35)
    return h ^ (h >> 16)


def unit(word, dtype):
    """A uniform on (0, 1) from a random 32-bit ``word``."""
    return (word.astype(dtype) + 0.5) * 2.0**-32


def mixed(seed, counter):
    """One random 32-bit word of ``(seed, counter)``: the finaliser twice over the counter
    mixed with two seed words."""
    return fmix(fmix(seed[0] ^ (counter.astype(jnp.uint32) * np.uint32(0x9E3779B9))) ^ seed[1])


def uniform(seed, counter, dtype):
    """A uniform on (0, 1) from ``(seed, counter)`` (`mixed`)."""
    return unit(mixed(seed, counter), dtype)


def words(seed, counter, n: int):
    """``n`` random 32-bit words of ``(seed, counter)``: `mixed`, then the finaliser over
    each word's index."""
    h = mixed(seed, counter)
    j = jnp.arange(n, dtype=jnp.uint32) * np.uint32(0x85EBCA77)
    return fmix(fmix(h ^ j) ^ seed[0])


def normals(bits, dtype):
    """Box-Muller (1958) on pairs of 32-bit words: ``bits.size`` standard normals."""
    u = unit(bits, dtype)
    half = bits.size // 2
    r = jnp.sqrt(-2.0 * jnp.log(u[:half]))
    return jnp.concatenate([r * jnp.cos(2 * np.pi * u[half:]), r * jnp.sin(2 * np.pi * u[half:])])
