"""The compiled super-transition: ``num_steps`` kernel steps of every chain, vectorised over
chains (``vmap``) under ``jit``, with the draws kept in a fixed-size buffer.

The number of steps is a traced value, so changing it never recompiles; the draw buffer is
sized to a power of two at least the number of kept draws. Executables are stored on the
target (`adaptmc.targets.base.compiled`) per (kernel, chains, capacity, argument signature)
and shared by every run on the same target object (grids of fixed settings, repeats).
"""

from __future__ import annotations

import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.kernels.base import Kernel
from adaptmc.run.plan import jittered, run_keys, run_start
from adaptmc.run.starts import Starts, finite_starts
from adaptmc.targets.base import QUICK_COMPILE, Target, check_position, compile_ahead, compiled

STEP_FIELDS = ("acceptance_rate", "accepted", "is_divergent", "energy_error", "num_grads",
               "energy")


class SuperTransitionLoop:
    """The jitted, vmapped inner loop of up to ``max_group`` consecutive super-transitions of
    the same parameters, compiled once per buffer capacity and argument signature.

    Calling it with ``(keys: (chains, max_group), states, params, num_steps, thin, n)`` runs
    ``n`` super-transitions of ``num_steps`` steps each, the ``j``-th with the chains' keys
    ``keys[:, j]``, in one device call (``1 <= n <= max_group``), and returns ``(states,
    positions: (chains, n, kept, dim), stats: {field: (chains, n, kept)}, logdensity:
    (chains, n, kept), totals)``, where ``kept = num_steps // thin`` and ``totals`` are
    per-chain, per-super-transition ``(chains, n)`` sums over every step (kept or thinned
    away): gradient evaluations, divergences and acceptance probabilities.

    ``n`` is a traced value, so a tuning call (``n = 1``) and a frozen chunk (``n`` up to the
    next checkpoint) run the same executable: a super-transition's draws do not depend on how
    super-transitions are grouped (a resumed run makes the draws of an uninterrupted one).
    """

    # A buffer for the most draws any setting can keep (one step per gradient) means one
    # compilation per run; past this many bytes, buffers are sized per setting instead.
    MAX_BUFFER_BYTES = 256 * 2**20
    # Grouped super-transitions share one buffer of at most this many bytes.
    MAX_GROUP_BYTES = 64 * 2**20

    def __init__(self, target: Target, kernel: Kernel, num_chains: int, max_kept: int = 0,
                 max_group: int = 1):
        self.target, self.kernel, self.num_chains = target, kernel, num_chains
        self.bytes_per_draw = num_chains * target.dim * target.initial_position.dtype.itemsize
        fits = self.bytes_per_draw * _power_of_two(max_kept) <= self.MAX_BUFFER_BYTES
        self.min_capacity = max_kept if fits else 0
        one = self.bytes_per_draw * _power_of_two(max_kept)
        self.max_group = max(1, min(int(max_group), self.MAX_GROUP_BYTES // max(one, 1))) \
            if fits else 1
        self.compile_s = 0.0

    def capacity(self, num_kept: int) -> int:
        """The buffer's length for ``num_kept`` draws: a power of two (few compilations),
        unless that would pass ``MAX_BUFFER_BYTES`` (the cap holds after rounding)."""
        wanted = max(num_kept, self.min_capacity, 1)
        rounded = _power_of_two(wanted)
        return rounded if self.bytes_per_draw * rounded <= self.MAX_BUFFER_BYTES else wanted

    def __call__(self, keys, states, params, num_steps: int, thin: int = 1,
                 count: int = 1):
        """``keys: (chains, max_group)``, of which the first ``count`` are used."""
        if not 1 <= count <= self.max_group or keys.shape[1] != self.max_group:
            raise ValueError(f"keys (chains, {self.max_group}) and 1 to {self.max_group} "
                             f"super-transitions per call, got {keys.shape} and {count}")
        num_kept = num_steps // thin
        capacity = self.capacity(num_kept)
        # host values as they are (a Python number stays weakly typed): the compiled
        # program takes them, where converting each on the device compiles a program
        params = jax.tree.map(_host, params)
        args = (keys, states, params, np.int32(num_steps), np.int32(thin), np.int32(count))
        signature = (
            jax.tree.structure(args),
            tuple((np.shape(leaf), str(jnp.result_type(leaf)))
                  for leaf in jax.tree.leaves(args)),
        )
        cache_key = ("super_transition", self.kernel, self.num_chains, capacity, signature)
        if cache_key not in self.target.programs:
            tick = time.perf_counter()  # traced here: the chains' loop is one frame deep
            program = jax.jit(jax.vmap(self._one_chain(capacity),
                                       in_axes=(0, 0, None, None, None, None))
                              ).lower(*args).compile()
            compiled(self.target, cache_key, lambda: program)
            self.compile_s += time.perf_counter() - tick
        states, positions, stats, logdensity, totals = self.target.programs[cache_key](*args)
        # sliced on the host (a device slice compiles again for every new ``num_kept``) and
        # copied: a view would keep the whole buffer alive as long as the draws are held
        return (
            states,
            _kept(positions, count, num_kept),
            {k: _kept(v, count, num_kept) for k, v in stats.items()},
            _kept(logdensity, count, num_kept),
            tuple(np.array(np.asarray(t)[:, :count]) for t in totals),
        )

    def _one_chain(self, capacity: int):
        target, kernel, groups = self.target, self.kernel, self.max_group

        def one_chain(keys, state, params, num_steps, thin, count):
            _, info_shape = jax.eval_shape(
                lambda k, s: kernel.step(k, s, target, params), keys[0], state
            )
            positions = jnp.zeros((groups, capacity) + state.position.shape,
                                  state.position.dtype)
            stats = {
                name: jnp.zeros((groups, capacity), getattr(info_shape, name).dtype)
                for name in STEP_FIELDS
            }
            logdensity = jnp.zeros((groups, capacity), state.logdensity.dtype)
            # totals over every step, kept or thinned away: gradients, divergences, acceptance
            totals = (jnp.zeros(groups, jnp.int64 if jax.config.jax_enable_x64 else jnp.int32),
                      jnp.zeros(groups, jnp.int32), jnp.zeros(groups, logdensity.dtype))

            def body(i, carry):
                # step t of super-transition g: one loop over both, one frame at trace time
                state, positions, stats, logdensity, totals = carry
                g, t = i // num_steps, i % num_steps
                state, info = kernel.step(jax.random.fold_in(keys[g], t), state, target, params)
                keep = (t + 1) % thin == 0
                slot = jnp.where(keep, t // thin, capacity)  # out of range: dropped
                positions = positions.at[g, slot].set(state.position, mode="drop")
                stats = {
                    name: stats[name].at[g, slot].set(getattr(info, name), mode="drop")
                    for name in stats
                }
                logdensity = logdensity.at[g, slot].set(state.logdensity, mode="drop")
                totals = (
                    totals[0].at[g].add(info.num_grads),
                    totals[1].at[g].add(info.is_divergent.astype(jnp.int32)),
                    totals[2].at[g].add(info.acceptance_rate),
                )
                return state, positions, stats, logdensity, totals

            return jax.lax.fori_loop(
                0, count * num_steps, body, (state, positions, stats, logdensity, totals)
            )

        return one_chain


def _kept(buffer, count: int, num_kept: int) -> np.ndarray:
    """The first ``count`` super-transitions' first ``num_kept`` draws of a device buffer
    ``(chains, groups, capacity, ...)``, in an array of their own."""
    return np.array(np.asarray(buffer)[:, :count, :num_kept])


_KEYS: dict = {}  # num_chains -> jitted key derivation


def _host(value):
    """A parameter as the compiled program takes it: a number or an array as it is, anything
    else (a list) as a NumPy array."""
    if isinstance(value, (bool, int, float, np.ndarray, np.generic, jax.Array)):
        return value
    return np.asarray(value)


def default_positions(target: Target, num_chains: int, seed: int,
                      init_jitter: float = 0.5, check: bool = True) -> jax.Array:
    """The starting points `run` draws when given none: the target's initial position plus
    ``U(-init_jitter, init_jitter)`` per coordinate, from the run's key; ``check``: each
    evaluated (one gradient per chain) and, where not finite, retried as Stan does
    (`adaptmc.run.starts.finite_starts`), else left to the run that starts from them."""
    keys, starts = run_start(seed, target.initial_position, num_chains,
                             checked_jitter(init_jitter))
    if not check:
        return starts
    return finite_starts(target, starts, keys["init"]).positions


def checked_jitter(init_jitter) -> float:
    """``init_jitter`` as a float; one `ValueError` unless it is a finite number >= 0."""
    value = float(init_jitter)
    if not (np.isfinite(value) and value >= 0):
        raise ValueError(f"init_jitter must be a finite number >= 0, got {init_jitter}")
    return value


def default_starts(target: Target, num_chains: int, key_init, init_jitter: float = 0.5,
                   what: str = "initial position") -> Starts:
    """The run's own starts under its ``"init"`` key: the target's initial position plus
    ``U(-init_jitter, init_jitter)``, each chain's retried where its log density or gradient
    is not finite (`adaptmc.run.starts.finite_starts`), with the points evaluated."""
    init_jitter = checked_jitter(init_jitter)
    first = jittered(key_init, target.initial_position, num_chains, init_jitter)
    return finite_starts(target, first, key_init, what)


def starting_positions(target: Target, num_chains: int, seed: int, init=None,
                       init_jitter: float = 0.5, check: bool = True) -> jax.Array:
    """The chains' starting points from a user's ``init`` (unconstrained space): ``None``,
    the target's initial position, or a ``(dim,)`` point, each plus ``U(-init_jitter,
    init_jitter)`` per chain and coordinate from the run's key (``init_jitter = 0``: every
    chain at the point); or ``(num_chains, dim)`` points, taken as they are. Checked:
    shapes, ``init_jitter >= 0`` and, if ``check`` (one gradient per chain; `run` checks
    the starts it is given again), a finite log density and gradient at every start (the
    target's own start, ``init`` None, retried where not, `default_starts`)."""
    init_jitter = checked_jitter(init_jitter)
    if init is None:
        return default_positions(target, num_chains, seed, init_jitter, check)
    init = np.asarray(init, dtype=float)
    if init.shape == (num_chains, target.dim):
        positions = init
    elif init.shape != (target.dim,):
        raise ValueError(f"init must have shape ({target.dim},) (one point, jittered per "
                         f"chain) or ({num_chains}, {target.dim}) (one per chain), got "
                         f"{init.shape}")
    else:
        start = init.astype(np.asarray(target.initial_position).dtype)
        positions = jittered(run_keys(seed, "init"), start, num_chains, init_jitter)
    if not check:
        return jnp.asarray(positions, dtype=target.initial_position.dtype)
    return initial_positions_checked(target, num_chains, positions, init_jitter, None)


def initial_positions_checked(target: Target, num_chains: int, initial_positions,
                              init_jitter: float, key,
                              what: str = "initial position") -> jax.Array:
    """``(num_chains, dim)`` starting points, checked finite with finite gradients (one
    `ValueError` where one is not: never replaced); None: the run's own, `default_starts`.
    ``what`` names them in an error (the positions a warm-up ended at are not the starts)."""
    if initial_positions is None:
        return default_starts(target, num_chains, key, init_jitter, what).positions
    initial_positions = jnp.asarray(initial_positions, dtype=target.initial_position.dtype)
    if initial_positions.shape != (num_chains, target.dim):
        raise ValueError(
            f"initial_positions must have shape ({num_chains}, {target.dim}), "
            f"got {initial_positions.shape}"
        )
    rows = np.asarray(initial_positions)  # rows on the host: no slice compiled per chain
    for c in range(num_chains):
        check_position(target, rows[c], what=f"{what} of chain {c}")
    return initial_positions


def init_states(target: Target, kernel: Kernel, positions):
    """Every chain's kernel state at ``positions: (chains, dim)``, in one compiled call
    (vmapped op by op, each primitive of the model would compile on its own)."""
    return compiled(target, ("init", kernel), lambda: _init_program(target, kernel))(positions)


def init_ahead(target: Target, kernel: Kernel, positions: np.ndarray) -> None:
    """Start compiling `init_states`' program for positions like ``positions: (chains,
    dim)`` (their shape and dtype, as the warm-up returns them) in a thread of its own
    (`compile_ahead`), while the warm-up runs."""
    compile_ahead(target, ("init", kernel), lambda: _init_program(target, kernel),
                  jax.ShapeDtypeStruct(positions.shape,
                                       jax.dtypes.canonicalize_dtype(positions.dtype)))


def _init_program(target: Target, kernel: Kernel):
    # at the default level: the states' log densities and gradients start the chains, and
    # -O0 computes some models' gradients differently in the last bits (gp_pois_regr: 7e-15)
    return jax.jit(jax.vmap(lambda x: kernel.init(x, target)))


def super_transition_keys(key, index: int, num_chains: int, count: int = 1):
    """``(key_tune, chain_keys: (num_chains, count))`` of super-transitions ``index`` to
    ``index + count - 1``: ``split(fold_in(key, i))`` gives super-transition ``i``'s tuner
    key (returned for ``i = index``) and, split once per chain, its chains' keys; one compiled
    call (the keys of the operations run one by one)."""
    if (num_chains, count) not in _KEYS:
        def derive(key, index):
            def one(i):
                key_tune, key_chains = jax.random.split(jax.random.fold_in(key, i))
                return key_tune, jax.random.split(key_chains, num_chains)

            tune, chains = jax.vmap(one)(index + jnp.arange(count, dtype=jnp.uint32))
            return tune[0], jnp.swapaxes(chains, 0, 1)

        _KEYS[num_chains, count] = jax.jit(derive, compiler_options=QUICK_COMPILE)
    return _KEYS[num_chains, count](key, np.uint32(index))


def _power_of_two(n: int) -> int:
    return 1 << math.ceil(math.log2(max(n, 1)))
