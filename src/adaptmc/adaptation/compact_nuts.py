"""A compact multinomial NUTS transition: one ``lax.while_loop`` over leapfrog steps.

The No-U-Turn Sampler (Hoffman & Gelman 2014, Alg. 3 and 6) with multinomial sampling of
the trajectory's points and the generalised U-turn criterion (Betancourt 2017, "A conceptual
introduction to Hamiltonian Monte Carlo", App. A.3-A.4): from the start, subtrees of
``2^j`` leapfrog steps (``j = 0, 1, ...``, at most `MAX_DEPTH`) are built in random
directions, one leaf at a time. Within a subtree a leaf replaces the subtree's proposal
with probability ``w_leaf / W_subtree`` (multinomial sampling, progressively); a finished
subtree replaces the trajectory's proposal with probability ``min(1, W_subtree / W_old)``
(biased progressive sampling, Betancourt 2017, A.3.2), ``w = exp(H_0 - H)``.

A merged tree turns when, with ``rho`` its momenta's sum and ``v = M^-1 p`` the
velocities at its ends, ``v_- . rho <= 0`` or ``v_+ . rho <= 0`` (Betancourt 2017, A.4.2);
checked for every merge of two halves (inside a subtree and of the trajectory with a new
subtree), each with the two extra checks across the merge (the left half plus the right
half's first point, the left half's last point plus the right half), as Stan
(``base_nuts.hpp``) and nuts-rs check. A leaf whose energy error exceeds `DIVERGENCE` (or
is NaN) diverges; a subtree that turns inside or diverges is not sampled from, and the
transition ends.

Iterative, so that it compiles small: the leaves of the subtree being built are numbered
``k = 0, 1, ...``; for each level ``m`` a slot holds the first leaf of the block of ``2^m``
leaves that ``k`` lies in (its velocity and momentum, the momenta's prefix sum before it,
and the leaf before it). A leaf that closes blocks (``k + 1`` a multiple of ``2^m``) checks
each from its slot and its right half's (level ``m - 1``). Every check of a step is one
array expression; a leaf is one vector (position, momentum, gradient, ``M^-1`` gradient,
velocity, log density). The per-leaf uniforms come from a counter-based hash
(`adaptmc.adaptation.counter_random`) seeded once per transition by JAX's threefry: one
threefry call per transition.

The metric is the warm-up's ``M^-1 = diag(s) (I + U (Lambda - 1) U^T) diag(s)``
(`adaptmc.adaptation.low_rank`), applied directly; the velocity is carried through the
step (``v += eps/2 M^-1 grad``). The acceptance statistic is the mean of
``min(1, exp(H_0 - H))`` over the trajectory's leaves (Hoffman & Gelman 2014, Sec. 3.2.1).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from adaptmc.adaptation.counter_random import normals, uniform

MAX_DEPTH = 10
"""Subtrees of up to ``2^(MAX_DEPTH - 1)`` steps: at most ``2^MAX_DEPTH - 1`` per transition."""

DIVERGENCE = 1000.0
"""An energy error above this is a divergence (Stan's and BlackJAX's threshold)."""


class NutsState(NamedTuple):
    """Where a chain stands: position ``(dim,)``, its log density and gradient (the fields
    of BlackJAX's ``HMCState``, so either serves)."""

    position: jax.Array
    logdensity: jax.Array
    logdensity_grad: jax.Array


class NutsInfo(NamedTuple):
    """One transition: leapfrog steps taken, whether it diverged, its acceptance statistic."""

    num_integration_steps: jax.Array
    is_divergent: jax.Array
    acceptance_rate: jax.Array


class _Tree(NamedTuple):
    counts: jax.Array  # int32 (leaves built, depth, next leaf k in the subtree, direction)
    ends: jax.Array  # (2, 5 dim + 1): the trajectory's ends, [0] backward (`_leaf`)
    proposal: jax.Array  # (5 dim + 1,) sampled from the trajectory ...
    sub_proposal: jax.Array  # ... and from the subtree being built
    sums: jax.Array  # (2, dim): momenta over the trajectory before the subtree, over it
    slots: jax.Array  # (MAX_DEPTH, 5, dim): v, p, prefix sum before, v and p before
    weights: jax.Array  # (3,): log sums of weights of the trajectory, of the subtree; and
    #                     the sum of min(1, exp(H_0 - H))
    flags: jax.Array  # bool (done, divergent)


def velocity(metric, momentum):
    """``M^-1 p`` for ``metric = (s, U, lam)``: ``s * (I + U (lam - 1) U^T) (s * p)``."""
    s, vectors, values = metric
    y = s * momentum
    return s * (y + vectors @ ((values - 1.0) * (vectors.T @ y)))


def momentum_from_normal(z, metric):
    """``p ~ N(0, M)`` from ``z ~ N(0, I)``: ``(I + U (lam^-1/2 - 1) U^T) z / s``."""
    s, vectors, values = metric
    return (z + vectors @ ((jax.lax.rsqrt(values) - 1.0) * (vectors.T @ z))) / s


def _leaf(x, p, g, mg, v, lp):
    return jnp.concatenate([x, p, g, mg, v, lp[None]])


def _leapfrog(logdensity_and_grad, metric, leaf, step, dim):
    """One velocity Verlet step of ``step`` (negative: backward in time), the velocity
    carried: ``v(p + a g) = v + a M^-1 g``."""
    x, p, g, mg, v = (leaf[i * dim:(i + 1) * dim] for i in range(5))
    p, v = p + 0.5 * step * g, v + 0.5 * step * mg
    x = x + step * v
    lp, g = logdensity_and_grad(x)
    mg = velocity(metric, g)
    return _leaf(x, p + 0.5 * step * g, g, mg, v + 0.5 * step * mg, lp)


def _turns(slots, sums, far_v, v, k, depth):
    """Which merges a leaf closes turn, as one array expression: rows ``m = 1..`` are the
    blocks of ``2^m`` leaves of the subtree (first leaf slot ``m``, right half's slot
    ``m - 1``), the last row the trajectory merged with the subtree (``far_v`` the other
    end's velocity). Returns (a block closed by leaf ``k`` turns, the trajectory turns)."""
    v_s, p_s, before, v_prev, p_prev = (slots[:, i] for i in range(5))
    top = (sums[0], sums[1], p_prev[depth], v_prev[depth], p_s[depth], v_s[depth], far_v)
    inner = (before[:-1] - before[1:], sums[1] - before[:-1], p_prev[:-1], v_prev[:-1],
             p_s[:-1], v_s[:-1], v_s[1:])
    rho_a, rho_b, pa, va, pb, vb, far_a = (jnp.concatenate([i, t[None]])
                                           for i, t in zip(inner, top, strict=True))
    rho = jnp.stack([rho_a + rho_b, rho_a + pb, pa + rho_b], axis=1)
    minus = jnp.stack([far_a, far_a, va], axis=1)
    plus = jnp.stack([jnp.broadcast_to(v, far_a.shape), vb, jnp.broadcast_to(v, vb.shape)],
                     axis=1)
    turned = jnp.any((jnp.sum(rho * minus, -1) <= 0) | (jnp.sum(rho * plus, -1) <= 0), axis=1)
    levels = jnp.arange(1, MAX_DEPTH)
    closes = (((k + 1) & ((1 << levels) - 1)) == 0) & (levels <= depth)
    return jnp.any(closes & turned[:-1]), turned[-1]


def _extend(tree: _Tree, seed, h0, logdensity_and_grad, step_size, metric) -> _Tree:
    """One leapfrog step from the trajectory's end in the subtree's direction, then the
    subtree's and (when it is complete) the trajectory's sampling and U-turn checks."""
    dim = tree.sums.shape[1]
    n, depth, k, direction = tree.counts[0], tree.counts[1], tree.counts[2], tree.counts[3]
    start = k == 0
    direction = jnp.where(start, (seed[2] >> depth) & 1, direction).astype(jnp.int32)
    previous = tree.ends[direction]
    leaf = _leapfrog(logdensity_and_grad, metric, previous,
                     jnp.where(direction == 1, step_size, -step_size), dim)
    p, v = leaf[dim:2 * dim], leaf[4 * dim:5 * dim]
    log_w = h0 + leaf[-1] - 0.5 * jnp.dot(p, v)
    log_w = jnp.where(jnp.isnan(log_w), -jnp.inf, log_w)
    w_tree, w_sub = tree.weights[0], jnp.where(start, log_w, jnp.logaddexp(tree.weights[1],
                                                                          log_w))
    dtype = tree.weights.dtype
    sub = jnp.where(start | (uniform(seed, 2 * n, dtype) < jnp.exp(log_w - w_sub)), leaf,
                    tree.sub_proposal)
    before = jnp.where(start, 0.0, tree.sums[1])
    sums = jnp.stack([tree.sums[0], before + p])
    opens = (k & ((1 << jnp.arange(MAX_DEPTH)) - 1)) == 0
    new = jnp.stack([v, p, before, previous[4 * dim:5 * dim], previous[dim:2 * dim]])
    slots = jnp.where(opens[:, None, None], new[None], tree.slots)
    inner, top = _turns(slots, sums, tree.ends[1 - direction, 4 * dim:5 * dim], v, k, depth)
    divergent = log_w < -DIVERGENCE
    ok = ~divergent & ~inner
    merge = ok & (k + 1 == (1 << depth))
    take = merge & (uniform(seed, 2 * n + 1, dtype) < jnp.exp(w_sub - w_tree))
    depth = jnp.where(merge, depth + 1, depth)
    return _Tree(
        counts=jnp.stack([n + 1, depth, jnp.where(merge, 0, k + 1), direction]),
        ends=tree.ends.at[direction].set(leaf),
        proposal=jnp.where(take, sub, tree.proposal), sub_proposal=sub,
        sums=jnp.where(merge, jnp.stack([sums[0] + sums[1], sums[1]]), sums), slots=slots,
        weights=jnp.stack([jnp.where(merge, jnp.logaddexp(w_tree, w_sub), w_tree), w_sub,
                           tree.weights[2] + jnp.exp(jnp.minimum(log_w, 0.0))]),
        flags=jnp.stack([~ok | (merge & (top | (depth >= MAX_DEPTH))), divergent]))


def transition_bits(dim: int) -> int:
    """The random 32-bit words one transition in ``dim`` dimensions takes (`nuts_step`)."""
    return 2 * (-(-dim // 2)) + 3


def nuts_step(key, state, logdensity_and_grad, step_size, metric):
    """One NUTS transition from ``state`` (a `NutsState`, or any NamedTuple with its
    fields) under ``metric = (s, U, lam)`` (``s``
    the square root of the diagonal, `velocity`): ``(new state, NutsInfo)``. ``key``: a
    JAX key, or `transition_bits` random ``uint32`` words (drawn together for many
    transitions, one threefry call for all)."""
    x0, lp0, g0 = state.position, state.logdensity, state.logdensity_grad
    dim = x0.shape[0]
    bits = key if getattr(key, "dtype", None) == jnp.uint32 else \
        jax.random.bits(key, (transition_bits(dim),), jnp.uint32)
    p0 = momentum_from_normal(normals(bits[:-3], x0.dtype)[:dim], metric)
    v0 = velocity(metric, p0)
    h0 = 0.5 * jnp.dot(p0, v0) - lp0
    start = _leaf(x0, p0, g0, velocity(metric, g0), v0, lp0)
    tree = _Tree(
        counts=jnp.zeros(4, jnp.int32), ends=jnp.stack([start, start]), proposal=start,
        sub_proposal=start, sums=jnp.stack([p0, jnp.zeros_like(p0)]),
        slots=jnp.zeros((MAX_DEPTH, 5, dim), x0.dtype), weights=jnp.zeros(3, x0.dtype),
        flags=jnp.zeros(2, bool))
    tree = jax.lax.while_loop(
        lambda t: ~t.flags[0],
        lambda t: _extend(t, bits[-3:], h0, logdensity_and_grad, step_size, metric), tree)
    x, g, lp = tree.proposal[:dim], tree.proposal[2 * dim:3 * dim], tree.proposal[-1]
    n = tree.counts[0]
    info = NutsInfo(n, tree.flags[1], tree.weights[2] / n)
    return state._replace(position=x, logdensity=lp, logdensity_grad=g), info
