"""Kernels on binary states constrained to a Hamming shell: the intra-cluster
self-avoiding-walk move and a Kawasaki pair-exchange Metropolis baseline.

The target is ``pi(x) ∝ exp(-beta E(x))`` on ``x in {0, 1}^M`` with
``E(x) = -sum_{i<j} J_ij x_i x_j - sum_i b_i x_i``, restricted to
``S_n(c) = {x : |x - c|_1 = n}``, the states at Hamming distance ``n`` from a reference ``c``
(a conserved order parameter; Hamze & de Freitas 2010, Sec. 2). The couplings are a
`SpinGraph` of padded neighbour lists, so memory is O(M x degree). A `Target` carries its
graph in ``target.info["graph"]`` (built by `adaptmc_lab.models.ising`).

Both kernels keep the local fields ``h_i = b_i + sum_j J_ij x_j`` in their state: flipping
site ``i`` changes the energy by ``dE_i = -(1 - 2 x_i) h_i`` and changes only the fields of
its neighbours, so energies are updated incrementally in O(degree) per flip and never
recomputed. Costs are counted in flips (reported as ``StepInfo.num_grads``): a walk of
length ``L`` up and ``L`` down costs ``2 L``, a pair exchange 2.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.kernels.base import Kernel, Param, Tunable, metropolis_hastings, select

Array = jax.Array

LOG_WEIGHT_CLIP = 60.0
"""Walk log-weights ``-gamma dE`` are clipped to ``[-60, 60]`` so that sums stay finite in
float32; the acceptance uses the same clipped weights, so the move stays exact."""


class SpinGraph(NamedTuple):
    """A pairwise binary model on ``M`` sites with at most ``D`` neighbours each.

    neighbours: ``(M, D)`` int32, padded with the site itself; couplings: ``(M, D)``
    ``J_{i, neighbours[i, d]}`` (symmetric, 0 on padding); bias: ``(M,)``; reference:
    ``(M,)`` int8, the state ``c``; beta: inverse temperature; distance: ``n``, the Hamming
    distance to ``c`` every state keeps.
    """

    neighbours: Array
    couplings: Array
    bias: Array
    reference: Array
    beta: float
    distance: int

    @property
    def num_sites(self) -> int:
        return int(self.bias.shape[0])


def local_fields(graph: SpinGraph, x: Array) -> Array:
    """``x: (M,) -> (M,)`` fields ``h_i = b_i + sum_j J_ij x_j`` (O(M x degree))."""
    xf = x.astype(graph.couplings.dtype)
    return graph.bias + jnp.sum(graph.couplings * xf[graph.neighbours], axis=1)


def energy(graph: SpinGraph, x: Array) -> Array:
    """``E(x) = -sum_{i<j} J_ij x_i x_j - sum_i b_i x_i = -1/2 sum_i x_i (h_i + b_i)``."""
    xf = x.astype(graph.couplings.dtype)
    return -0.5 * jnp.sum(xf * (local_fields(graph, x) + graph.bias))


def flip_energy_change(x: Array, field: Array) -> Array:
    """``dE_i = E(x with x_i flipped) - E(x) = -(1 - 2 x_i) h_i``, elementwise."""
    return -(1 - 2 * x.astype(field.dtype)) * field


class SpinState(NamedTuple):
    """position: ``(M,)`` int8 in {0, 1}; logdensity: ``-beta E``; field: ``(M,)`` local
    fields; energy: ``E`` (kept separately so that beta = 0 models still report it)."""

    position: Array
    logdensity: Array
    field: Array
    energy: Array


def graph_of(target) -> SpinGraph:
    graph = target.info.get("graph") if hasattr(target, "info") else None
    if not isinstance(graph, SpinGraph):
        raise ValueError(
            f"target {getattr(target, 'name', target)!r} has no SpinGraph in info['graph']; "
            "discrete kernels sample models of adaptmc_lab.models.ising"
        )
    return graph


def spin_init(position: Array, target) -> SpinState:
    graph = graph_of(target)
    position = jnp.asarray(position).astype(jnp.int8)
    e = energy(graph, position)
    return SpinState(position, -graph.beta * e, local_fields(graph, position), e)


# --- sum trees: sampling a site in proportion to its weight in O(log M) ---------------------


def _tree_build(weights: Array) -> Array:
    """``weights: (M,) -> (2P,)`` a binary sum tree (root at 1, leaves at ``P + i``). Each
    level is the sum of the even and odd entries of the one below (strided slices, which XLA
    vectorises; a ``reshape(-1, 2).sum(1)`` per level cost 3x more on CPU)."""
    size = 1 << max(1, math.ceil(math.log2(weights.shape[0])))
    level = jnp.pad(weights, (0, size - weights.shape[0]))
    levels = [level]
    while level.shape[0] > 1:
        level = level[0::2] + level[1::2]
        levels.append(level)
    return jnp.concatenate([jnp.zeros(1, weights.dtype)] + levels[::-1])


def _tree_set(tree: Array, sites: Array, values: Array) -> Array:
    """Set leaves ``sites`` to ``values`` and recompute their ancestors from their children
    (no running sums, so a tree is a function of its leaves: no drift). When the sites are
    many (dense RBM couplings) the whole tree is rebuilt instead, O(M) vectorised."""
    size = tree.shape[0] // 2
    depth = int(math.log2(size))
    if sites.shape[0] * depth > size:
        leaves = tree[size:].at[sites].set(values)
        return _tree_build(leaves)
    node = size + sites
    tree = tree.at[node].set(values)
    for _ in range(depth):
        node = node // 2
        tree = tree.at[node].set(tree[2 * node] + tree[2 * node + 1])
    return tree


def _tree_sample(tree: Array, u: Array) -> Array:
    """The leaf where ``u * total`` falls, ``u`` uniform in [0, 1); never a zero-weight leaf."""
    size = tree.shape[0] // 2
    target = u * tree[1]
    node = jnp.asarray(1)
    for _ in range(int(math.log2(size))):
        left, right = tree[2 * node], tree[2 * node + 1]
        go_left = (target < left) | (right <= 0)
        target = jnp.where(go_left, target, target - left)
        node = jnp.where(go_left, 2 * node, 2 * node + 1)
    return node - size


# --- the self-avoiding walk -------------------------------------------------------------------


def walk_trees(graph: SpinGraph, state: SpinState, gamma, up: bool):
    """The sum trees ``(forward, reverse)`` of a walk in direction ``up`` from ``state``:
    leaf ``i`` is ``exp(-gamma dE_i)`` where flipping ``i`` moves in that direction (away from
    ``c``) or in the other one, 0 elsewhere. The two directions' allowed sites are
    complementary, so one exponential over the sites serves both. O(M)."""
    x, field = state.position, state.field
    weights = jnp.exp(jnp.clip(-gamma * flip_energy_change(x, field), -LOG_WEIGHT_CLIP,
                               LOG_WEIGHT_CLIP))
    away = x == graph.reference
    up_tree = _tree_build(jnp.where(away, weights, 0.0))
    down_tree = _tree_build(jnp.where(away, 0.0, weights))
    return (up_tree, down_tree) if up else (down_tree, up_tree)


def walk(graph: SpinGraph, state: SpinState, gamma, length, up: bool, *, key=None,
         sites=None, trees=None):
    """A self-avoiding walk of ``length`` flips, each moving away from ``c`` (``up``) or
    toward it, site ``i`` chosen with probability ``∝ exp(-gamma E(x with i flipped))`` among
    the allowed sites (Hamze & de Freitas 2010, the talk's ``f_up`` / ``f_down``). A walk in
    one direction never revisits a site: a flipped site is no longer allowed.

    Exactly one of ``key`` (sample the sites) or ``sites: (max_length,)`` (follow them; for
    enumerating the transition matrix) is given; ``trees``: `walk_trees` of ``state`` (built
    here when not given). Returns ``(state, log_forward, log_reverse, trees)``: the
    log-probability of the walk, of the reverse walk (the opposite direction, sites in
    reverse order) from where it ends, and the walk's trees where it ends (so the return walk
    starts from them swapped, without an O(M) rebuild). Cost O(length x degree x log M): both
    trees are updated at the flipped site and its neighbours.
    """
    neighbours, couplings = graph.neighbours, graph.couplings
    x, field, e = state.position, state.field, state.energy
    dtype = field.dtype
    tree_fwd, tree_rev = walk_trees(graph, state, gamma, up) if trees is None else trees

    def body(t, carry):
        x, field, e, tree_fwd, tree_rev, log_fwd, log_rev = carry
        if sites is None:
            site = _tree_sample(tree_fwd, jax.random.uniform(jax.random.fold_in(key, t),
                                                              dtype=dtype))
        else:
            site = sites[t]
        lw = _log_weights_at(graph, x, field, gamma, up, site)
        log_fwd = log_fwd + lw - jnp.log(tree_fwd[1])
        sign = (1 - 2 * x[site]).astype(dtype)
        e = e - sign * field[site]
        x = x.at[site].set((1 - x[site]).astype(x.dtype))
        field = field.at[neighbours[site]].add(sign * couplings[site])
        changed = jnp.concatenate([site[None], neighbours[site]])
        tree_fwd = _tree_set(tree_fwd, changed,
                             jnp.exp(_log_weights_at(graph, x, field, gamma, up, changed)))
        rev_weights = jnp.exp(_log_weights_at(graph, x, field, gamma, not up, changed))
        tree_rev = _tree_set(tree_rev, changed, rev_weights)
        log_rev = log_rev + jnp.log(rev_weights[0]) - jnp.log(tree_rev[1])
        return x, field, e, tree_fwd, tree_rev, log_fwd, log_rev

    zero = jnp.zeros((), dtype)
    x, field, e, tree_fwd, tree_rev, log_fwd, log_rev = jax.lax.fori_loop(
        0, length, body, (x, field, e, tree_fwd, tree_rev, zero, zero)
    )
    return SpinState(x, -graph.beta * e, field, e), log_fwd, log_rev, (tree_fwd, tree_rev)


def _log_weights_at(graph, x, field, gamma, up, sites):
    allowed = (x[sites] == graph.reference[sites]) if up else (x[sites] != graph.reference[sites])
    lw = jnp.clip(-gamma * flip_energy_change(x[sites], field[sites]), -LOG_WEIGHT_CLIP,
                  LOG_WEIGHT_CLIP)
    return jnp.where(allowed, lw, -jnp.inf)


class SAWParams(NamedTuple):
    """walk_length: ``L`` (flips up, then as many down); gamma: the walk's inverse
    temperature; random_length: draw ``L`` uniformly from ``{1..walk_length}`` each move (the
    expert settings of Mahendran et al. 2012). ``walk_length`` and ``gamma`` may be equal-size
    vectors of ``K`` settings: each move then uses one of them, uniformly at random (the SIR
    mixture kernel). ``L`` is rounded and capped at ``M - n``."""

    walk_length: Array | float = 10
    gamma: Array | float = 0.5
    random_length: bool = False


def _move_setting(key, params: SAWParams, max_length: int):
    lengths = jnp.atleast_1d(jnp.asarray(params.walk_length))
    gammas = jnp.atleast_1d(jnp.asarray(params.gamma))
    key_pick, key_length = jax.random.split(key)
    k = jax.random.randint(key_pick, (), 0, lengths.shape[0])
    length = jnp.clip(jnp.round(lengths[k]).astype(jnp.int32), 1, max_length)
    drawn = jax.random.randint(key_length, (), 1, length + 1)
    length = jnp.where(jnp.asarray(params.random_length), drawn, length)
    return length, gammas[k]


def _move(graph: SpinGraph, state: SpinState, gamma, length, keys=None, sites=None):
    """The up walk then the down walk from where it ends (reusing its trees, swapped):
    ``(proposal, log forward probability, log M-H ratio)``. ``keys``: two keys, or
    ``sites``: the up and down sites to follow."""
    up_key, down_key = (None, None) if keys is None else keys
    up_sites, down_sites = (None, None) if sites is None else sites
    middle, fwd_up, rev_up, (up_tree, down_tree) = walk(graph, state, gamma, length, True,
                                                        key=up_key, sites=up_sites)
    proposal, fwd_down, rev_down, _ = walk(graph, middle, gamma, length, False, key=down_key,
                                           sites=down_sites, trees=(down_tree, up_tree))
    log_ratio = (proposal.logdensity - state.logdensity) + (rev_up + rev_down) \
        - (fwd_up + fwd_down)
    return proposal, fwd_up + fwd_down, log_ratio


def saw_step(key: Array, state: SpinState, target, params: SAWParams):
    """One intra-cluster move (Hamze & de Freitas 2010; Mahendran et al. 2012, Sec. 5): an
    upward walk of ``L`` flips leaves ``S_n`` for ``S_{n+L}``, a downward walk of ``L`` flips
    returns to ``S_n``; accepted with probability
    ``min(1, pi(x') f_up(rev down path | x') f_down(rev up path | y) /
    (pi(x) f_up(up path | x) f_down(down path | y)))``, detailed balance on the space of
    paths. Costs ``2 L`` flips."""
    graph = graph_of(target)
    key_setting, key_up, key_down, key_accept = jax.random.split(key, 4)
    length, gamma = _move_setting(key_setting, params, graph.num_sites - graph.distance)
    gamma = jnp.asarray(gamma, state.field.dtype)
    proposal, _, log_ratio = _move(graph, state, gamma, length, keys=(key_up, key_down))
    accept, info = metropolis_hastings(key_accept, log_ratio, 2 * length)
    return select(accept, proposal, state), info


def move_log_ratio(graph: SpinGraph, state: SpinState, gamma, up_sites, down_sites):
    """For a given path: ``(proposal, log forward probability, log M-H ratio)`` of the move
    that flips ``up_sites`` then ``down_sites`` (each ``(L,)``). Used to enumerate the exact
    transition matrix on small models."""
    return _move(graph, state, gamma, up_sites.shape[0], sites=(up_sites, down_sites))


def saw_cost(params: SAWParams) -> int:
    """Flips of one move on average: ``2 L``, or ``L + 1`` when ``L`` is uniform on
    ``{1..L}``; the mean over the settings of a mixture."""
    lengths = np.round(np.atleast_1d(np.asarray(params.walk_length, dtype=float)))
    flips = lengths + 1 if bool(np.asarray(params.random_length)) else 2 * lengths
    return max(1, int(round(float(np.mean(flips)))))


def saw_check_params(params: SAWParams, dim: int | None = None) -> None:
    lengths = np.atleast_1d(np.asarray(params.walk_length, dtype=float))
    gammas = np.atleast_1d(np.asarray(params.gamma, dtype=float))
    if lengths.shape != gammas.shape or lengths.ndim != 1:
        raise ValueError("walk_length and gamma must be numbers or vectors of equal length, "
                         f"got shapes {lengths.shape} and {gammas.shape}")
    if not np.all(np.isfinite(lengths)) or np.any(np.round(lengths) < 1):
        raise ValueError(f"walk_length must be at least 1, got {params.walk_length}")
    if not np.all(np.isfinite(gammas)) or np.any(gammas < 0):
        raise ValueError(f"gamma must be finite and >= 0, got {params.gamma}")


SAW_TUNABLES = (Tunable("walk_length", integer=True, bounds=(1, 50), label="L"),
                Tunable("gamma", bounds=(0.0, 1.6), label="gamma"))

SAW_PARAMETERS = (Param("walk_length", "int", "flips of a walk L", 1, 10**6),
                  Param("gamma", "float", "the walk's inverse temperature", 0.0, 1e6))

saw = Kernel("saw", spin_init, saw_step, saw_cost, saw_check_params, SAWParams, SAW_TUNABLES,
             SAW_PARAMETERS)


# --- Kawasaki pair exchange ------------------------------------------------------------------


class KawasakiState(NamedTuple):
    """A `SpinState` plus the sites agreeing with ``c`` (``(M - n,)``) and those differing
    (``(n,)``), so a uniform pair is drawn in O(1)."""

    position: Array
    logdensity: Array
    field: Array
    energy: Array
    agree: Array
    differ: Array


class KawasakiParams(NamedTuple):
    """No parameters: one uniform pair exchange per step."""


def kawasaki_init(position: Array, target) -> KawasakiState:
    graph = graph_of(target)
    spin = spin_init(position, target)
    same = spin.position == graph.reference
    num = graph.num_sites
    agree = jnp.nonzero(same, size=num - graph.distance, fill_value=0)[0].astype(jnp.int32)
    differ = jnp.nonzero(~same, size=graph.distance, fill_value=0)[0].astype(jnp.int32)
    return KawasakiState(*spin, agree, differ)


def kawasaki_step(key: Array, state: KawasakiState, target, params: KawasakiParams):
    """Metropolis with a single-pair exchange (Kawasaki 1966): flip one uniform site that
    agrees with ``c`` and one that differs, which keeps the distance ``n``; the proposal is
    symmetric, so the acceptance is ``min(1, exp(-beta dE))``. Costs 2 flips."""
    graph = graph_of(target)
    key_a, key_b, key_accept = jax.random.split(key, 3)
    a = jax.random.randint(key_a, (), 0, state.agree.shape[0])
    b = jax.random.randint(key_b, (), 0, state.differ.shape[0])
    i, j = state.agree[a], state.differ[b]
    x, field = state.position, state.field
    sign_i = (1 - 2 * x[i]).astype(field.dtype)
    sign_j = (1 - 2 * x[j]).astype(field.dtype)
    coupling = jnp.sum(jnp.where(graph.neighbours[i] == j, graph.couplings[i], 0.0))
    delta = -sign_i * field[i] - sign_j * (field[j] + sign_i * coupling)
    accept, info = metropolis_hastings(key_accept, -graph.beta * delta, 2)
    # only the pair and its neighbours change: O(degree), no copy of the state
    on = accept.astype(field.dtype)
    x = x.at[i].set(jnp.where(accept, 1 - x[i], x[i])).at[j].set(jnp.where(accept, 1 - x[j],
                                                                            x[j]))
    field = field.at[graph.neighbours[i]].add(on * sign_i * graph.couplings[i])
    field = field.at[graph.neighbours[j]].add(on * sign_j * graph.couplings[j])
    e = state.energy + on * delta
    new = KawasakiState(x, -graph.beta * e, field, e,
                        state.agree.at[a].set(jnp.where(accept, j, i)),
                        state.differ.at[b].set(jnp.where(accept, i, j)))
    return new, info


def _no_check(params, dim: int | None = None) -> None:
    return None


kawasaki = Kernel("kawasaki", kawasaki_init, kawasaki_step, lambda params: 2, _no_check,
                  KawasakiParams)

