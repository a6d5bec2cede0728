"""The `Target`: a flat-vector log density with its gradient.

Kernels work on flat 1-D positions; a `Target` flattens a user's pytree log density once, at
the boundary (``jax.flatten_util.ravel_pytree``), and carries what the run loop and the
on-disk format need: the dimension, an ``unravel`` back to named parameters, flat parameter
names and an initial position.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from adaptmc.targets import executables

Array = jax.Array


class Reference(NamedTuple):
    """Known posterior moments of the quantities ``names``: published reference draws
    (posteriordb), analytic moments (a Gaussian, Neal's funnel) or a long run.

    ``mean, sd: (k,)``; ``mcse: (k,)`` the Monte Carlo standard error of ``mean``, or None
    when the moments are exact.
    """

    names: tuple[str, ...]
    mean: np.ndarray
    sd: np.ndarray
    mcse: np.ndarray | None


@dataclass(frozen=True, eq=False)
class Target:
    """A log density over flat positions.

    Attributes
    ----------
    name
        Short name used in run folders and tables.
    logdensity
        ``position: (dim,) -> scalar`` unnormalised log density.
    dim
        Number of unconstrained parameters.
    unravel
        ``position: (dim,) -> pytree`` of named parameters.
    initial_position
        ``(dim,)`` starting point; checked finite with a finite gradient.
    parameter_names
        One name per flat coordinate, e.g. ``("beta[0]", "beta[1]", "sigma")``.
    info
        Free-form facts (true mean and covariance of a Gaussian, the data set's path...).
    constrain
        ``position: (dim,) -> {name: array}``, the model's parameters in their constrained
        space (a positive scale as itself, not its log), named as the model names them; the
        run loop stores draws through it when it is set. ``None``: draws are the positions.
        A constrain that can run on NumPy points ``(n, dim)`` without a JAX program (a
        Stan program's, a host call) carries that function as its attribute ``host``.
    reference
        Known moments to check draws against (`Reference`), or None.
    """

    name: str
    logdensity: Callable[[Array], Array]
    dim: int
    unravel: Callable[[Array], Any]
    initial_position: Array
    parameter_names: tuple[str, ...]
    info: dict = field(default_factory=dict)
    constrain: Callable[[Array], dict[str, Array]] | None = None
    reference: Reference | None = None
    # compiled programs on this target (`compiled`): they live and die with it
    programs: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def logdensity_and_grad(self, position: Array) -> tuple[Array, Array]:
        """``position: (dim,) -> (scalar, (dim,))`` through ``jax.value_and_grad``."""
        return jax.value_and_grad(self.logdensity)(position)

    def __repr__(self) -> str:
        return f"Target({self.name!r}, dim={self.dim})"


def _flat_names(params: Any) -> tuple[str, ...]:
    """Flat coordinate names in ``ravel_pytree`` order: ``name[i,j]`` per array entry."""
    leaves_with_path = jax.tree_util.tree_flatten_with_path(params)[0]
    names: list[str] = []
    for path, leaf in leaves_with_path:
        base = "".join(_path_part(p) for p in path).lstrip(".") or "x"
        shape = np.shape(leaf)
        if shape == ():
            names.append(base)
        else:
            for idx in np.ndindex(*shape):
                names.append(f"{base}[{','.join(map(str, idx))}]")
    return tuple(names)


def _path_part(p: Any) -> str:
    if isinstance(p, jax.tree_util.DictKey):
        return f".{p.key}"
    if isinstance(p, jax.tree_util.GetAttrKey):
        return f".{p.name}"
    if isinstance(p, jax.tree_util.SequenceKey):
        return f".{p.idx}"
    return f".{p}"


def make_target(
    logdensity_fn: Callable[[Any], Array],
    initial_params: Any,
    name: str = "user",
    info: dict | None = None,
    check: bool = True,
    constrain: Callable[[Any], dict[str, Array]] | None = None,
    log_likelihood: Callable[[dict], Any] | None = None,
    observed_data: dict | None = None,
    constant_data: dict | None = None,
) -> Target:
    """Build a `Target` from a JAX log density over a pytree.

    Parameters
    ----------
    logdensity_fn
        ``params -> scalar`` written with ``jax.numpy``; ``params`` has the structure of
        ``initial_params``.
    initial_params
        A pytree of arrays (a dict, a tuple, a single array) giving the structure, the dtype
        and the starting point.
    check
        Evaluate the log density and its gradient at the start and raise `ValueError` if
        either is not finite, or if the log density is not a scalar.
    constrain
        ``params -> {name: array}``, the model's named quantities in its constrained space,
        from a pytree shaped as ``initial_params``; the `Target` keeps it as a function of
        the flat position (`Target.constrain`), and draws are stored through it.
    log_likelihood, observed_data, constant_data
        For LOO (``az.loo``) and predictive tuning: ``draw -> {name: (n,)}`` (or one
        ``(n,)`` array, named ``"y"``), the log density of each observation given one draw's
        variables as they are stored (``constrain``'s dict, else ``initial_params``'s
        leaves by name); the data, for the InferenceData's groups
        (`adaptmc.targets.observations.pointwise_observations`).
    """
    flat, unravel = ravel_pytree(initial_params)
    flat = jnp.asarray(flat)
    if flat.ndim != 1 or flat.size == 0:
        raise ValueError("initial_params must contain at least one number")
    if not jnp.issubdtype(flat.dtype, jnp.floating):
        flat = flat.astype(jnp.result_type(float))

    def logdensity(position: Array) -> Array:
        return logdensity_fn(unravel(position))

    info = _with_observations(dict(info or {}), log_likelihood, observed_data, constant_data)
    target = Target(name=name, logdensity=logdensity, dim=int(flat.shape[0]), unravel=unravel,
                    initial_position=flat, parameter_names=_flat_names(initial_params),
                    info=info, constrain=None if constrain is None else
                    (lambda position: constrain(unravel(position))))
    if check:
        check_position(target, flat, what="initial position")
    return target


def _with_observations(info: dict, log_likelihood, observed_data, constant_data) -> dict:
    """``info`` with the observations `make_target` was given (for LOO and predictive
    tuning), if any."""
    if log_likelihood is not None or observed_data or constant_data:
        from adaptmc.targets.observations import Observations, pointwise_observations

        info["observations"] = Observations(None, dict(observed_data or {}),
                                            dict(constant_data or {})) \
            if log_likelihood is None else \
            pointwise_observations(log_likelihood, observed_data, constant_data)
    return info


QUICK_COMPILE = {"xla_backend_optimization_level": 0}
"""``jax.jit(..., compiler_options=QUICK_COMPILE)`` for the small programs a run calls once or
a few times and whose results do not enter the chains' arithmetic: the random keys and
jittered starts (integer work and one addition, the same bits at any level), the initial
step-size search (it returns counts and powers of two of its start) and the single-point
log density of the start checks and the run folder's fingerprint. XLA's backend
optimisation took 0.3-0.8 s of compilation each for them, longer than they ever run. Not
for what starts a chain: -O0 computes some models' gradients differently in the last bits
(gp_pois_regr: 7e-15), which would change every draw after it."""


def compiled(target: Target, key: Any, make: Callable[[], Any]) -> Any:
    """The program ``make()`` stored on ``target`` under ``key``, made on first use: a
    program compiled for a target is reused by every run on that target object (grids of
    settings, repeats) and freed with it (a module-level cache would keep every target of a
    long bench alive)."""
    programs = getattr(target, "programs", None)
    if programs is None:  # a stand-in without a store (a test's namespace): not cached
        return make()
    if key not in programs:
        programs[key] = make()
    ahead = programs.pop(("ahead", key), None)  # compiling in a thread (`compile_ahead`)
    if ahead is not None:
        tick = time.perf_counter()
        ahead.join()
        AHEAD_WAITED[0] += time.perf_counter() - tick
    return programs[key]


COMPILE_AHEAD = True
"""Whether `compile_ahead` compiles in threads (False: each program compiles at its first
call, in the caller's thread)."""
AHEAD_THREAD = "adaptmc-compile"
"""The name of `compile_ahead`'s threads."""
AHEAD_WAITED = [0.0]
"""Seconds this process waited in `compiled` for a program `compile_ahead` had not finished
(part of the compilation a caller waits for, `adaptmc.run.compile_clock`)."""


def compile_ahead(target: Target, key: Any, make: Callable[[], Any], *args,
                  settings: Any = None) -> None:
    """Trace and lower the program ``make()`` (a ``jax.jit`` function), stored on ``target``
    under ``key`` (`compiled`), for ``args`` (their shapes and dtypes: ``jax.ShapeDtypeStruct``
    or arrays) here, and compile it in a thread of its own: XLA compiles on another core while
    the run goes on, and `compiled` waits for that thread before it hands the program out,
    whose first call then finds it compiled (the same program: the same bits). Tracing stays
    in the caller's thread: it runs the user's model code, whose library may keep global state
    (NumPyro's effect handlers are one stack per process). A failure is left for the
    program's own call to raise. Nothing when the program is stored already.

    ``settings``: the program's name and every setting it closes over besides the model
    (a value with a stable ``repr``); given, its executable is kept on disk and a later
    process loads it, in the thread, without tracing it (`adaptmc.targets.executables`)."""
    programs = getattr(target, "programs", None)
    if not COMPILE_AHEAD or programs is None or key in programs:
        return
    program = compiled(target, key, make)
    path = None
    if settings is not None and executables.folder() is not None:  # the model's text only then
        path = executables.path_for(model_text(target), settings, args)
        stored = None if path is None else executables.read(path)
        if stored is not None:
            _ahead(programs, key, _loading(programs, key, program, stored))
            return
    try:
        lowered = program.lower(*args)
    except Exception:  # noqa: BLE001 - the program's own call traces and raises it
        return

    def compile_lowered():
        try:
            executables.compile_and_store(lowered, path, getattr(program, "__name__", "?"))
        except Exception:  # noqa: BLE001 - the program's own call compiles and raises it
            return

    _ahead(programs, key, compile_lowered)


def _loading(programs: dict, key: Any, program: Any, stored: tuple) -> Callable[[], None]:
    """Store under ``key`` the program ``stored`` (`executables.read`) as an
    `executables.Loaded`, and return what loads its executable (the program itself if
    that fails)."""
    loaded = programs[key] = executables.Loaded(program)

    def load():
        loaded.executable = executables.load(stored)

    return load


def _ahead(programs: dict, key: Any, work: Callable[[], None]) -> None:
    """Run ``work`` in a thread of its own, which `compiled` waits for before it hands out
    the program stored under ``key``."""
    thread = threading.Thread(target=work, name=AHEAD_THREAD, daemon=True)
    programs[("ahead", key)] = thread
    thread.start()


def model_text(target: Target) -> str:
    """The text of the model's lowered value and gradient at one position of its initial
    position's dtype (`lowered_logdensity_and_grad`): its every constant (the model's data)
    printed in full; made once per target."""
    return compiled(target, "model_text", lambda: lowered_logdensity_and_grad(target).as_text())


def lowered_logdensity_and_grad(target: Target) -> Any:
    """`compiled_logdensity_and_grad` lowered at one position of the initial position's
    dtype (a ``jax.stages.Lowered``), once per target: the model's cost analysis and the
    key of its stored executables (`model_text`)."""
    dtype = jax.dtypes.canonicalize_dtype(np.asarray(target.initial_position).dtype)
    return compiled(target, "lowered_logdensity_and_grad",
                    lambda: compiled_logdensity_and_grad(target).lower(
                        jax.ShapeDtypeStruct((target.dim,), dtype)))


def with_reference(target: Target, reference: Reference) -> Target:
    """``target`` with its reference draws' summary: the same log density, so the programs
    already compiled for it (the start check's) are kept rather than compiled again."""
    import dataclasses

    out = dataclasses.replace(target, reference=reference)
    out.programs.update(target.programs)
    return out


def compiled_logdensity_and_grad(target: Target) -> Callable[[Array], tuple[Array, Array]]:
    """The target's ``logdensity_and_grad`` under ``jax.jit``, made once per target: one
    compilation, where evaluating the model op by op compiles each primitive on its own
    (seconds on a large model). It evaluates single points (start checks, the run folder's
    fingerprint), so it compiles at `QUICK_COMPILE`."""
    return compiled(target, "logdensity_and_grad",
                    lambda: jax.jit(target.logdensity_and_grad, compiler_options=QUICK_COMPILE))


def check_position(target: Target, position: Array, what: str = "position") -> None:
    """Raise `ValueError` unless ``position`` has shape ``(dim,)`` and a finite log density
    and gradient there."""
    value, grad = evaluate_position(target, position, what)
    check_finite(target, value, grad, what)


def evaluate_position(target: Target, position: Array,
                      what: str = "position") -> tuple[np.ndarray, np.ndarray]:
    """The log density and gradient at ``position`` (one evaluation), on the host;
    `ValueError` unless ``position`` has shape ``(dim,)`` and the log density is a scalar."""
    # a host array as it is: `jnp.asarray` of one compiles a program per shape
    position = position if isinstance(position, jax.Array) else np.asarray(position)
    if position.shape != (target.dim,):
        raise ValueError(
            f"{what} of target {target.name!r} has shape {position.shape}; "
            f"expected ({target.dim},)"
        )
    try:
        value, grad = compiled_logdensity_and_grad(target)(position)
    except TypeError as err:
        raise ValueError(f"log density of target {target.name!r} failed: {err}") from err
    if jnp.shape(value) != ():
        raise ValueError(
            f"log density of target {target.name!r} must return a scalar, got shape "
            f"{jnp.shape(value)}"
        )
    return np.asarray(value), np.asarray(grad)  # checked on the host: no compilation


def is_finite(value: np.ndarray, grad: np.ndarray) -> bool:
    """Whether a log density and its gradient are finite (a chain may start there)."""
    return bool(np.isfinite(value)) and bool(np.all(np.isfinite(grad)))


def check_finite(target: Target, value: np.ndarray, grad: np.ndarray,
                 what: str = "position") -> None:
    """Raise `ValueError` naming ``what`` unless the log density ``value`` and ``grad``,
    evaluated there, are finite."""
    if not bool(np.isfinite(value)):
        raise ValueError(
            f"log density of target {target.name!r} is {float(value)} at the {what}; "
            "start from a point of positive density"
        )
    bad = ~np.isfinite(grad)
    if bool(bad.any()):
        idx = int(np.argmax(bad))
        raise ValueError(
            f"gradient of the log density of target {target.name!r} is not finite at the "
            f"{what} (coordinate {target.parameter_names[idx]!r} = {float(grad[idx])})"
        )


def check_finite_data(name: str, array: Any) -> np.ndarray:
    """Return ``array`` as float NumPy, raising `ValueError` if it holds NaN or inf."""
    arr = np.asarray(array, dtype=float)
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(f"{name} contains NaN or inf (first at index {tuple(bad)})")
    return arr
