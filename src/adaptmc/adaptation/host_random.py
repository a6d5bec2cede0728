"""Random numbers the host needs between compiled programs, with no program of their own.

A JAX key's data (two 32-bit words for threefry) seed NumPy's ``SeedSequence`` (O'Neill's
seed hashing), extended by a ``path`` of integers (which draw, which chain), and NumPy's
PCG64 (`numpy.random.default_rng`) draws from it: the run's keys from its seed, the chains'
jittered starts, the first step's momenta and every chunk's per-chain keys. New JAX keys are
PCG64's 32-bit words wrapped as key data (`jax.random.wrap_key_data`), so the programs that
take them draw their streams with JAX's own generator. Computed through ``jax.random`` on
the host, each of these is a compiled program (threefry is integer work XLA must compile:
0.1-0.8 s each, cold), and NumPy's generators are stable across JAX's versions.
"""

from __future__ import annotations

import functools

import jax
import numpy as np


@functools.cache
def _key_data_shape() -> tuple[int, ...]:
    """The shape of one key's data under JAX's default generator (threefry: ``(2,)``)."""
    return tuple(jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0))).shape)


def key_rng(key, *path: int) -> np.random.Generator:
    """A NumPy generator seeded by ``key``'s data (a JAX key array of one key) and ``path``:
    another path, another stream."""
    words = np.asarray(jax.random.key_data(key), dtype=np.uint32).ravel()
    return np.random.default_rng(np.random.SeedSequence(
        [int(w) for w in words], spawn_key=tuple(int(p) for p in path)))


def seed_rng(seed: int, *path: int) -> np.random.Generator:
    """A NumPy generator seeded by an integer ``seed`` and ``path``."""
    return np.random.default_rng(np.random.SeedSequence(int(seed),
                                                        spawn_key=tuple(int(p) for p in path)))


def new_keys(rng: np.random.Generator, shape: tuple[int, ...] = (), like=None):
    """JAX keys of ``shape`` (``()``: one) whose data ``rng`` draws, of ``like``'s generator
    (default: JAX's default one)."""
    impl = None if like is None else jax.random.key_impl(like)
    words = _key_data_shape() if like is None else tuple(jax.random.key_data(like).shape)
    data = rng.integers(0, 2**32, (*shape, *words), dtype=np.uint32)
    return jax.random.wrap_key_data(data, impl=impl)


def split(key, chains: int, fold: int | None = None):
    """``(next key, one key per chain: (chains,))`` from ``key`` (with ``fold``, another
    stream per value): the warm-up's and NUTS sampling's keys between chunks."""
    rng = key_rng(key, *(() if fold is None else (1, fold)))
    return new_keys(rng, like=key), new_keys(rng, (chains,), like=key)
