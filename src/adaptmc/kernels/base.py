"""What every kernel shares: the `Kernel` bundle, the per-step `StepInfo`, and the
Metropolis-Hastings decision that turns a non-finite energy into a counted divergence.

A kernel is pure functions over an explicit state (BlackJAX's shape):

- ``init(position, target) -> state``: the state has a ``position`` field;
- ``step(key, state, target, params) -> (state, StepInfo)``: ``params`` is the kernel's
  ``Params`` NamedTuple and is passed **at call time**, so a tuner may change it between
  super-transitions without recompiling;
- ``cost(params) -> int``: gradient evaluations one step spends (Python int, computed before
  the super-transition to fix how many steps fit in the budget);
- ``check_params(params, dim=None)``: raise `ValueError` on an invalid setting; with the
  target's ``dim``, also on vector or matrix parameters of the wrong shape;
- ``tunables``: the `Tunable` parameters a tuner may set between super-transitions (name,
  integer or real, default search box, the label and per-draw statistic the run records);
- ``parameters``: the `Param` fields a user may set (name, type, range, help; the default is
  the ``Params`` field's), from which the command line's flags and the keywords of
  `adaptmc.recipes.manual` are generated;
- capabilities as fields: ``initial_step`` (the proposal, ``"mala"`` or ``"rwm"``, whose
  first-step heuristic sets a step size left unset), ``adapts_in_step`` (an ``adapt`` switch
  in ``Params``: the kernel adapts inside every step during warm-up).

Kernels that adapt inside every step (gradient-based adaptive MALA) keep their adapted
quantities in their state and return them with it; discrete kernels (Ising moves) have
integer positions and report ``num_grads`` as log-density evaluations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.kernels.metrics import LowRankInverseMass

Array = jax.Array

DIVERGENCE_THRESHOLD = 1000.0


class StepInfo(NamedTuple):
    """What one step reports, the same fields for every kernel.

    acceptance_rate: the M-H acceptance probability ``min(1, exp(-energy_error))``;
    accepted: whether the proposal was taken; is_divergent: non-finite energy or an energy
    error above 1000 (BlackJAX's threshold); energy_error: ``H(proposal) - H(current)``
    (for RWM and MALA, minus the log M-H ratio); num_grads: gradient (or, for RWM,
    log-density) evaluations spent; energy: the Hamiltonian at the chain's new state with
    the momentum it ends with (Stan's ``energy__``, for E-BFMI; NaN for kernels without
    momentum).
    """

    acceptance_rate: Array
    accepted: Array
    is_divergent: Array
    energy_error: Array
    num_grads: Array
    energy: Array = float("nan")


@dataclass(frozen=True)
class Tunable:
    """A parameter of a kernel's ``Params`` that a tuner may set between super-transitions.

    name: the ``Params`` field; integer: proposals are rounded to integers; bounds: the
    default search box ``(lower, upper)`` (None: no default, a box must be given); log:
    searched in log scale by default; label: short name for progress bars (default: name);
    stat: name of the per-draw ``sample_stats`` column that records the value in force
    (None: not recorded); cost_factor: a step's gradient cost grows in proportion to it (HMC's
    ``L``), so a default box caps it to leave a super-transition enough draws.
    """

    name: str
    integer: bool = False
    bounds: tuple[float, float] | None = None
    log: bool = False
    label: str | None = None
    stat: str | None = None
    cost_factor: bool = False

    def __post_init__(self):
        if self.label is None:
            object.__setattr__(self, "label", self.name)


@dataclass(frozen=True)
class Param:
    """A ``Params`` field a user may set, declared once: the command line's flag and the
    keyword of `adaptmc.recipes.manual` are generated from it.

    name: the ``Params`` field; kind: ``"int"``, ``"float"`` or ``"array"`` (a number or an
    array: on the command line a number or a ``.npy`` file); help: one line; low, high: the
    range (``open`` names the ends excluded: ``"low"``, ``"high"``, ``"both"``). The default
    is the ``Params`` field's default. Kernels sharing a name share its kind and range.
    """

    name: str
    kind: str
    help: str
    low: float | None = None
    high: float | None = None
    open: str = ""
    metavar: str | None = None


STEP_SIZE = Param("step_size", "float", "the step size eps", 0.0, 1e6, "low")
NUM_LEAPFROG = Param("num_leapfrog", "int", "leapfrog steps L", 1, 10**7)
INVERSE_MASS = Param("inverse_mass", "array", "inverse mass: a number, or a .npy file "
                     "holding a vector or matrix", metavar="NUMBER|FILE")
REFRESH_ANGLE = Param("refresh_angle", "float", "partial momentum refreshment angle",
                      0.0, math.pi / 2, "low")
JITTER = Param("jitter", "float", "step-size jitter j: each step is eps U(1 - j, 1 + j)",
               0.0, 1.0, "high")


class Kernel(NamedTuple):
    """A transition kernel as four functions, its parameter type, its tunables, the
    parameters a user may set and its capabilities (module docstring)."""

    name: str
    init: Callable[[Array, Any], Any]
    step: Callable[[Array, Any, Any, Any], tuple[Any, StepInfo]]
    cost: Callable[[Any], int]
    check_params: Callable[..., None]
    Params: type
    tunables: tuple[Tunable, ...] = ()
    parameters: tuple[Param, ...] = ()
    initial_step: str | None = None
    adapts_in_step: bool = False


def metropolis_hastings(key, log_ratio, num_grads) -> tuple[Array, StepInfo]:
    """Accept with probability ``min(1, exp(log_ratio))``; a NaN or inf ``log_ratio`` (or one
    below -1000) is a rejected divergence, never an error.

    Returns ``(accept, info)``.
    """
    return accept_with(jnp.log(jax.random.uniform(key, dtype=jnp.result_type(float))),
                       log_ratio, num_grads)


def accept_with(log_u, log_ratio, num_grads) -> tuple[Array, StepInfo]:
    """`metropolis_hastings` with its uniform's log ``log_u`` given."""
    energy_error = -log_ratio
    finite = jnp.isfinite(energy_error)
    is_divergent = (~finite) | (energy_error > DIVERGENCE_THRESHOLD)
    safe_log_ratio = jnp.where(finite, log_ratio, -jnp.inf)
    acceptance_rate = jnp.exp(jnp.minimum(safe_log_ratio, 0.0))
    accept = finite & (log_u < safe_log_ratio)
    info = StepInfo(
        acceptance_rate=acceptance_rate,
        accepted=accept,
        is_divergent=is_divergent,
        energy_error=jnp.where(finite, energy_error, jnp.inf),
        num_grads=jnp.asarray(num_grads, jnp.int32),
    )
    return accept, info


def select(accept, new, old):
    """``new`` if ``accept`` else ``old``, leaf by leaf."""
    return jax.tree.map(lambda a, b: jnp.where(accept, a, b), new, old)


def check_positive(name: str, value) -> None:
    # NumPy, not jnp: eager JAX ops cost ~0.1 ms each, and the run loop checks every proposal
    arr = np.asarray(value, dtype=float)
    if not bool(np.all(np.isfinite(arr))) or bool(np.any(arr <= 0)):
        raise ValueError(f"{name} must be positive and finite, got {value}")


def jittered_step_size(key, step_size, jitter):
    """``step_size * U(1 - jitter, 1 + jitter)``: step-size jitter (Neal 2011, Sec.
    5.4.2.2), which randomises a trajectory's length at a fixed number of steps."""
    return step_size * (1.0 + jitter * jax.random.uniform(key, minval=-1.0, maxval=1.0))


def check_num_steps(name: str, value) -> None:
    """`ValueError` unless ``value`` is an integer >= 1 (steps per transition)."""
    if int(value) != value or int(value) < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value}")


def check_jitter(jitter) -> None:
    """`ValueError` unless the step-size jitter lies in ``[0, 1)``."""
    if not 0.0 <= float(jitter) < 1.0:
        raise ValueError(f"jitter must be in [0, 1), got {jitter}")


def check_shape(name: str, value, dim: int | None, matrix: bool = False) -> None:
    """A vector (or, with ``matrix``, matrix) parameter must match the target's dimension:
    shape ``()``, ``(dim,)`` or ``(dim, dim)``. No check when ``dim`` is None."""
    if dim is None:
        return
    if matrix and isinstance(value, LowRankInverseMass):
        _check_low_rank_shapes(name, value, dim)
        return
    shape = np.shape(value)
    allowed = [(), (dim,)] + ([(dim, dim)] if matrix else [])
    if shape not in allowed:
        raise ValueError(
            f"{name} has shape {shape}; for a target of dimension {dim} it must be one "
            f"of {', '.join(map(str, allowed))}"
        )


def _check_low_rank_shapes(name: str, value: LowRankInverseMass, dim: int) -> None:
    diag, vectors, values = (np.shape(a) for a in value)
    k = values[0] if len(values) == 1 else -1
    if diag != (dim,) or vectors != (dim, k):
        raise ValueError(
            f"{name} (low-rank) has diag {diag}, vectors {vectors}, values {values}; for a "
            f"target of dimension {dim} they must be (dim,), (dim, k), (k,)")


def _check_low_rank(inverse_mass: LowRankInverseMass) -> None:
    check_positive("inverse_mass.diag", inverse_mass.diag)
    values = np.asarray(inverse_mass.values, dtype=float)
    if values.size:
        check_positive("inverse_mass.values", values)
    vectors = np.asarray(inverse_mass.vectors, dtype=float)
    if vectors.ndim != 2 or vectors.shape[1] != values.size:
        raise ValueError(f"low-rank inverse mass: vectors {vectors.shape} do not match "
                         f"values {values.shape}")
    if not np.allclose(vectors.T @ vectors, np.eye(values.size), atol=1e-6):
        raise ValueError("low-rank inverse mass: the vectors must be orthonormal columns")


def check_inverse_mass(inverse_mass) -> None:
    if isinstance(inverse_mass, LowRankInverseMass):
        _check_low_rank(inverse_mass)
        return
    arr = np.asarray(inverse_mass, dtype=float)
    if arr.ndim == 2:
        if arr.shape[0] != arr.shape[1]:
            raise ValueError(f"dense inverse mass must be square, got {arr.shape}")
        try:
            chol = np.linalg.cholesky(arr)
        except np.linalg.LinAlgError:
            chol = np.full(1, np.nan)
        if not bool(np.all(np.isfinite(chol))) or not np.allclose(arr, arr.T):
            raise ValueError("dense inverse mass must be symmetric positive definite")
    elif arr.ndim > 2:
        raise ValueError(f"inverse mass must be a scalar, vector or matrix; got {arr.shape}")
    else:
        check_positive("inverse_mass", arr)
