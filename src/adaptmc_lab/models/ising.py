"""Constrained Ising models and an RBM as targets for the discrete kernels.

The three models of Mahendran, Wang, Hamze & de Freitas (2012, Sec. 5), each restricted to
``S_n(c)``, the binary states at Hamming distance ``n`` from ``c = 0`` (that is, with ``n``
ones: a conserved magnetisation):

- `ferromagnet_2d`: 60 x 60 periodic grid, ``J = 1`` between nearest spins, ``1/beta =
  2.27`` (near the critical point), ``n = 1800`` of 3600 (zero magnetisation);
- `spin_glass_3d`: 9 x 9 x 9 periodic cube, ``J_ij = +-1`` with equal probability from a
  seeded generator, ``1/beta = 1``, ``n = 364`` of 729;
- `rbm`: a restricted Boltzmann machine, 784 visible and 500 hidden units as one bipartite
  binary model ``E(v, h) = -v'Wh - a'v - b'h``, ``1/beta = 1``, ``n = 428`` of 1284, with
  deterministic Gabor-like weights (`gabor_weights`).

Spin models ``E = -sum_<ij> J_ij s_i s_j`` are rewritten in binary units ``s = 2x - 1``:
``J'_ij = 4 J_ij``, ``b'_i = -2 sum_j J_ij``, plus a constant (``info["energy_offset"]``,
so ``E_spin = E_binary + offset``). Couplings are neighbour lists (`SpinGraph`), memory
O(M x degree).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from adaptmc.kernels.discrete import SpinGraph, energy
from adaptmc.targets.base import Target


class DiscreteTarget(Target):
    """A `Target` on integer states: no gradient (the run loop's start-point check gets
    zeros), the graph in ``info["graph"]``."""

    def logdensity_and_grad(self, position):
        position = jnp.asarray(position)
        return self.logdensity(position), jnp.zeros(position.shape, jnp.result_type(float))


def graph_from_edges(num_sites: int, edges: np.ndarray, weights: np.ndarray,
                     bias: np.ndarray, beta: float, distance: int,
                     reference: np.ndarray | None = None) -> SpinGraph:
    """A `SpinGraph` from undirected ``edges: (E, 2)`` with couplings ``weights: (E,)`` in
    binary units; each site's list is padded with itself (coupling 0) to the largest degree.
    A repeated edge is kept twice, so its couplings add."""
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    weights = np.asarray(weights, dtype=float)
    src = np.concatenate([edges[:, 0], edges[:, 1]])
    dst = np.concatenate([edges[:, 1], edges[:, 0]])
    w = np.concatenate([weights, weights])
    order = np.argsort(src, kind="stable")
    src, dst, w = src[order], dst[order], w[order]
    degree = np.bincount(src, minlength=num_sites)
    width = max(1, int(degree.max(initial=0)))
    slot = np.arange(src.size) - np.repeat(np.cumsum(degree) - degree, degree)
    neighbours = np.tile(np.arange(num_sites)[:, None], (1, width))
    couplings = np.zeros((num_sites, width))
    neighbours[src, slot] = dst
    couplings[src, slot] = w
    if not 0 < distance < num_sites:
        raise ValueError(f"distance n must be in 1..{num_sites - 1}, got {distance}")
    reference = np.zeros(num_sites, np.int8) if reference is None else reference
    dtype = jnp.result_type(float)
    return SpinGraph(jnp.asarray(neighbours, jnp.int32), jnp.asarray(couplings, dtype),
                     jnp.asarray(bias, dtype), jnp.asarray(reference, jnp.int8), float(beta),
                     int(distance))


def spin_graph(num_sites, edges, spin_couplings, beta, distance) -> tuple[SpinGraph, float]:
    """A spin model ``-sum_e J_e s_i s_j`` in binary units; returns the graph and the offset
    ``E_spin - E_binary``."""
    edges = np.asarray(edges).reshape(-1, 2)
    spin_couplings = np.asarray(spin_couplings, dtype=float)
    bias = np.zeros(num_sites)
    np.add.at(bias, edges[:, 0], -2.0 * spin_couplings)
    np.add.at(bias, edges[:, 1], -2.0 * spin_couplings)
    graph = graph_from_edges(num_sites, edges, 4.0 * spin_couplings, bias, beta, distance)
    return graph, float(-spin_couplings.sum())


def lattice_edges(shape: tuple[int, ...]) -> np.ndarray:
    """Nearest-neighbour edges of a periodic lattice, one per site and axis: ``(M d, 2)``."""
    index = np.arange(math.prod(shape)).reshape(shape)
    return np.concatenate([
        np.stack([index.ravel(), np.roll(index, -1, axis=a).ravel()], axis=1)
        for a in range(len(shape))
    ])


def ising_target(graph: SpinGraph, name: str, seed: int = 0, info: dict | None = None
                 ) -> DiscreteTarget:
    """The target ``log pi(x) = -beta E(x)`` on ``S_n(c)``, starting from a uniform state of
    ``S_n(c)`` (seeded). Draws are named ``x``."""
    initial = random_states(graph, 1, seed)[0]
    num = graph.num_sites

    def logdensity(x):
        return -graph.beta * energy(graph, x)

    return DiscreteTarget(
        name=name, logdensity=logdensity, dim=num, unravel=lambda x: x,
        initial_position=jnp.asarray(initial), parameter_names=tuple(f"x[{i}]" for i in
                                                                    range(num)),
        info={"graph": graph, "energy_offset": 0.0, **(info or {})},
    )


def random_states(graph: SpinGraph, num: int, seed: int = 0) -> np.ndarray:
    """``(num, M)`` int8 uniform states of ``S_n(c)``: ``n`` sites differ from ``c``."""
    rng = np.random.default_rng(seed)
    reference = np.asarray(graph.reference)
    out = np.tile(reference, (num, 1)).astype(np.int8)
    for row in out:
        flip = rng.choice(graph.num_sites, graph.distance, replace=False)
        row[flip] = 1 - row[flip]
    return out


def ferromagnet_2d(side: int = 60, temperature: float = 2.27, distance: int = 1800,
                   seed: int = 0) -> DiscreteTarget:
    """The 2-d ferromagnet: ``side x side`` periodic grid, ``J = 1``, ``1/beta =
    temperature``, ``n = distance`` ones (1800 of 3600: zero magnetisation)."""
    edges = lattice_edges((side, side))
    graph, offset = spin_graph(side * side, edges, np.ones(len(edges)), 1.0 / temperature,
                               distance)
    target = ising_target(graph, f"ferromagnet-2d-{side}", seed)
    target.info.update(energy_offset=offset, shape=(side, side))
    return target


def spin_glass_3d(side: int = 9, temperature: float = 1.0, distance: int = 364,
                  seed: int = 0, coupling_seed: int = 1) -> DiscreteTarget:
    """The 3-d +-J spin glass: ``side^3`` periodic cube, each bond ``+1`` or ``-1`` with
    probability 1/2 from ``numpy.random.default_rng(coupling_seed)``."""
    edges = lattice_edges((side,) * 3)
    signs = np.random.default_rng(coupling_seed).choice([-1.0, 1.0], size=len(edges))
    graph, offset = spin_graph(side**3, edges, signs, 1.0 / temperature, distance)
    target = ising_target(graph, f"spin-glass-3d-{side}", seed)
    target.info.update(energy_offset=offset, shape=(side,) * 3)
    return target


def gabor_weights(num_visible: int = 784, num_hidden: int = 500, amplitude: float = 0.25
                  ) -> np.ndarray:
    """``(num_visible, num_hidden)`` deterministic Gabor filters on a ``sqrt(v)``-pixel
    square image, one per hidden unit, like the filters of an RBM trained on MNIST.

    Unit ``j`` has centre ``(frac(j phi), frac(j phi^2))`` of the image (the golden-ratio
    sequence, an even cover), orientation ``pi frac(j / 8 + j sqrt 2)``, wavelength
    ``4 + 4 frac(j sqrt 3)`` pixels, envelope width ``0.45`` wavelengths and phase
    ``2 pi frac(j sqrt 5)``: ``w = amplitude exp(-r^2 / (2 sigma^2)) cos(2 pi u / lambda +
    phase)``, ``u`` the offset along the orientation. No random numbers are drawn."""
    side = math.isqrt(num_visible)
    if side * side != num_visible:
        raise ValueError(f"num_visible must be a square number of pixels, got {num_visible}")
    j = np.arange(num_hidden)[None, :]
    frac = lambda a: a - np.floor(a)  # noqa: E731
    phi = (1 + 5**0.5) / 2
    cy, cx = side * frac(j * phi), side * frac(j * phi**2)
    angle = np.pi * frac(j / 8 + j * 2**0.5)
    wavelength = 4 + 4 * frac(j * 3**0.5)
    phase = 2 * np.pi * frac(j * 5**0.5)
    y, x = np.divmod(np.arange(num_visible), side)
    dy, dx = y[:, None] - cy, x[:, None] - cx
    along = dx * np.cos(angle) + dy * np.sin(angle)
    sigma = 0.45 * wavelength
    envelope = np.exp(-(dx**2 + dy**2) / (2 * sigma**2))
    return amplitude * envelope * np.cos(2 * np.pi * along / wavelength + phase)


def rbm(num_visible: int = 784, num_hidden: int = 500, temperature: float = 1.0,
        distance: int = 428, seed: int = 0) -> DiscreteTarget:
    """The RBM ``E(v, h) = -v'Wh - a'v - b'h`` as one bipartite binary model (visible sites
    first), ``W`` from `gabor_weights`, ``a = 0`` and ``b_j = -1/2 sum_i W_ij`` (a hidden
    unit's field is centred for half the pixels on)."""
    weights = gabor_weights(num_visible, num_hidden)
    vis, hid = np.meshgrid(np.arange(num_visible), num_visible + np.arange(num_hidden),
                           indexing="ij")
    edges = np.stack([vis.ravel(), hid.ravel()], axis=1)
    bias = np.concatenate([np.zeros(num_visible), -0.5 * weights.sum(axis=0)])
    graph = graph_from_edges(num_visible + num_hidden, edges, weights.ravel(), bias,
                             1.0 / temperature, distance)
    target = ising_target(graph, f"rbm-{num_visible}-{num_hidden}", seed)
    target.info.update(shape=(num_visible + num_hidden,))
    return target


def small_model(num_sites: int = 8, distance: int = 4, beta: float = 0.7, seed: int = 0
                ) -> DiscreteTarget:
    """A dense model with Gaussian couplings and biases on a few sites, for exact checks
    against enumeration of ``S_n``."""
    rng = np.random.default_rng(seed)
    i, j = np.triu_indices(num_sites, 1)
    graph = graph_from_edges(num_sites, np.stack([i, j], axis=1), rng.normal(size=i.size),
                             rng.normal(size=num_sites), beta, distance)
    return ising_target(graph, f"small-{num_sites}", seed)


MODELS = {"ferromagnet-2d": ferromagnet_2d, "spin-glass-3d": spin_glass_3d, "rbm": rbm}
