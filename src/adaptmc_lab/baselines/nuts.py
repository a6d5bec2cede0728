"""One NUTS driver: BlackJAX NUTS (Hoffman & Gelman 2014, Algorithm 6, with multinomial
sampling as in Stan) after Stan-style window adaptation of the step size and the mass matrix
(BlackJAX ``window_adaptation``), chains vmapped, warm-up and sampling in one compiled
program; and NumPyro's NUTS (Phan et al. 2019) as an optional second implementation.

Gradient evaluations are counted exactly: one per leapfrog step (``num_integration_steps``),
plus one per chain at its initial position, which is counted as warm-up.

Keys. Chain ``c`` of a run with key ``key`` uses ``jax.random.split(key, num_chains)[c]``,
itself split into a warm-up key and a sampling key; draw ``i`` is made with
``jax.random.split(sampling_key, num_draws)[i]``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class NutsResult(NamedTuple):
    """One NUTS run.

    positions
        ``(chains, draws, dim)`` flat draws after warm-up.
    num_grads
        ``(chains, draws)`` gradient evaluations of each draw's transition (0 after a
        ``gradient_budget`` stopped the chain).
    divergent, acceptance_rate
        ``(chains, draws)`` per-draw statistics of BlackJAX's ``NUTSInfo``.
    warmup_grads
        ``(chains,)`` gradient evaluations of the warm-up, the initial gradient included.
    num_draws
        ``(chains,)`` draws made (fewer than ``positions.shape[1]`` when a gradient budget
        stopped a chain; the rest of its rows repeat its last position).
    step_size, inverse_mass
        ``(chains,)`` and ``(chains, dim)`` (``(chains, dim, dim)`` dense) adapted parameters.
    wall_s, compile_s
        Seconds of the compiled run and of its compilation.
    """

    positions: np.ndarray
    num_grads: np.ndarray
    divergent: np.ndarray
    acceptance_rate: np.ndarray
    warmup_grads: np.ndarray
    num_draws: np.ndarray
    step_size: np.ndarray
    inverse_mass: np.ndarray
    wall_s: float
    compile_s: float

    @property
    def sampling_grads(self) -> int:
        """Gradient evaluations of sampling, all chains."""
        return int(np.sum(self.num_grads))

    @property
    def total_grads(self) -> int:
        """Gradient evaluations of warm-up and sampling, all chains."""
        return int(np.sum(self.warmup_grads)) + self.sampling_grads


class NutsProgram(NamedTuple):
    """A compiled NUTS run: ``run(keys: (chains,) keys, starts: (chains, dim))`` gives a
    `NutsResult` (its ``compile_s`` is the program's); ``compile_s`` the compilation time."""

    run: Callable[[jax.Array, jax.Array], NutsResult]
    compile_s: float


def _sample_scan(kernel, state, key, num_draws: int):
    """``num_draws`` NUTS transitions; per-draw outputs ``(position, steps, divergent,
    acceptance)``."""

    def body(s, k):
        s, info = kernel.step(k, s)
        return s, (s.position, info.num_integration_steps, info.is_divergent,
                   info.acceptance_rate)

    return jax.lax.scan(body, state, jax.random.split(key, num_draws))[1]


def _sample_budget(kernel, state, key, num_draws: int, spent, budget: int):
    """At most ``num_draws`` transitions, stopping once ``spent`` plus the transitions'
    gradients reaches ``budget``; a ``while_loop``, so that vmapped chains stop apart."""
    keys = jax.random.split(key, num_draws)
    dim = state.position.shape[0]
    buffers = (jnp.zeros((num_draws, dim), state.position.dtype),
               jnp.zeros(num_draws, jnp.int32), jnp.zeros(num_draws, bool),
               jnp.zeros(num_draws, state.position.dtype))

    def cond(carry):
        i, _, spent, _ = carry
        return (i < num_draws) & (spent < budget)

    def body(carry):
        i, s, spent, (pos, steps, div, acc) = carry
        s, info = kernel.step(keys[i], s)
        n = info.num_integration_steps
        out = (pos.at[i].set(s.position), steps.at[i].set(n),
               div.at[i].set(info.is_divergent), acc.at[i].set(info.acceptance_rate))
        return i + 1, s, spent + n, out

    made, last, _, (pos, steps, div, acc) = jax.lax.while_loop(
        cond, body, (jnp.asarray(0), state, spent, buffers))
    # rows after the last draw repeat the final position (no transition, no gradient)
    pos = jnp.where((jnp.arange(num_draws) < made)[:, None], pos, last.position)
    return (pos, steps, div, acc), made


def compile_nuts(target, *, num_chains: int, num_warmup: int, num_draws: int,
                 dense: bool = False, gradient_budget: int | None = None,
                 max_num_doublings: int = 10) -> NutsProgram:
    """Compile window adaptation (``num_warmup`` iterations; diagonal mass, or ``dense``)
    then ``num_draws`` NUTS draws for ``num_chains`` vmapped chains.

    ``gradient_budget`` (per chain, warm-up included) stops a chain's sampling once spent;
    ``num_draws`` is then a cap. ``max_num_doublings`` bounds the tree depth (BlackJAX and
    Stan: 10), in warm-up and sampling.
    """
    import blackjax

    logdensity = target.logdensity
    warmup = blackjax.window_adaptation(blackjax.nuts, logdensity,
                                        is_mass_matrix_diagonal=not dense,
                                        max_num_doublings=max_num_doublings)

    def one_chain(key, start):
        key_warm, key_draw = jax.random.split(key)
        (state, params), warm_info = warmup.run(key_warm, start, num_warmup)
        # params: step size, inverse mass and the extra parameters (max_num_doublings)
        kernel = blackjax.nuts(logdensity, **params)
        warm_grads = jnp.sum(warm_info.info.num_integration_steps) + 1
        if gradient_budget is None:
            draws = _sample_scan(kernel, state, key_draw, num_draws)
            made = jnp.asarray(num_draws)
        else:
            draws, made = _sample_budget(kernel, state, key_draw, num_draws, warm_grads,
                                         gradient_budget)
        return draws, warm_grads, made, params["step_size"], params["inverse_mass_matrix"]

    starts = jax.ShapeDtypeStruct((num_chains, target.dim), jnp.result_type(float))
    keys = jax.random.split(jax.random.key(0), num_chains)
    tick = time.perf_counter()
    compiled = jax.jit(jax.vmap(one_chain)).lower(keys, starts).compile()
    compile_s = time.perf_counter() - tick

    def run(keys, starts) -> NutsResult:
        tick = time.perf_counter()
        out = jax.block_until_ready(compiled(keys, jnp.asarray(starts, starts_dtype)))
        wall = time.perf_counter() - tick
        (pos, steps, div, acc), warm_grads, made, step_size, inverse_mass = (
            jax.tree.map(np.asarray, out))
        return NutsResult(pos, steps.astype(np.int64), div, acc, warm_grads.astype(np.int64),
                          made.astype(np.int64), step_size, inverse_mass, wall, compile_s)

    starts_dtype = starts.dtype
    return NutsProgram(run, compile_s)


def nuts(target, key: jax.Array | int, *, num_chains: int = 4, num_warmup: int = 1000,
         num_draws: int = 1000, initial_positions=None, dense: bool = False,
         gradient_budget: int | None = None, max_num_doublings: int = 10) -> NutsResult:
    """Compile and run BlackJAX NUTS once (`compile_nuts`).

    Parameters
    ----------
    key
        A JAX key, or an integer seed for ``jax.random.key``; chain keys are
        ``jax.random.split(key, num_chains)``.
    initial_positions
        ``(num_chains, dim)``; default: every chain at ``target.initial_position``.
    """
    if isinstance(key, int):
        key = jax.random.key(key)
    if initial_positions is None:
        initial_positions = jnp.broadcast_to(target.initial_position, (num_chains, target.dim))
    program = compile_nuts(target, num_chains=num_chains, num_warmup=num_warmup,
                           num_draws=num_draws, dense=dense, gradient_budget=gradient_budget,
                           max_num_doublings=max_num_doublings)
    return program.run(jax.random.split(key, num_chains), initial_positions)


def numpyro_nuts(target, key: jax.Array | int, *, num_chains: int = 4, num_warmup: int = 1000,
                 num_draws: int = 1000, initial_positions=None) -> NutsResult:
    """NumPyro NUTS on ``potential_fn = -log density`` (Phan et al. 2019), Stan-style warm-up
    with a diagonal mass matrix, chains vectorised. Gradients from NumPyro's ``num_steps``
    (warm-up collected apart, the initial gradient added). NumPyro compiles inside its calls,
    so ``compile_s`` is NaN and ``wall_s`` includes compilation; ``step_size`` and
    ``inverse_mass`` are NaN (not exposed per chain)."""
    from numpyro.infer import MCMC, NUTS

    if isinstance(key, int):
        key = jax.random.key(key)
    if initial_positions is None:
        initial_positions = jnp.broadcast_to(target.initial_position, (num_chains, target.dim))
    kernel = NUTS(potential_fn=lambda x: -target.logdensity(x))
    mcmc = MCMC(kernel, num_warmup=num_warmup, num_samples=num_draws, num_chains=num_chains,
                chain_method="vectorized", progress_bar=False)
    fields = ("num_steps", "diverging", "accept_prob")
    tick = time.perf_counter()
    mcmc.warmup(key, init_params=jnp.asarray(initial_positions), extra_fields=fields,
                collect_warmup=True)
    warm_steps = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["num_steps"])
    mcmc.run(mcmc.post_warmup_state.rng_key, extra_fields=fields)
    wall = time.perf_counter() - tick
    extra = mcmc.get_extra_fields(group_by_chain=True)
    nan = np.full(num_chains, np.nan)
    return NutsResult(np.asarray(mcmc.get_samples(group_by_chain=True)),
                      np.asarray(extra["num_steps"], np.int64), np.asarray(extra["diverging"]),
                      np.asarray(extra["accept_prob"]), warm_steps.sum(axis=1) + 1,
                      np.full(num_chains, num_draws), nan, np.full((num_chains, target.dim),
                                                                   np.nan), wall, float("nan"))
