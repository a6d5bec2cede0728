"""A warm-up that reaches the typical set before anything is tuned or kept.

Stan's windowed adaptation (Stan Reference Manual, "HMC algorithm parameters": an initial
fast window of per-step dual averaging of the step size, Hoffman & Gelman 2014, Alg. 5;
slow windows of doubling length that estimate the inverse mass matrix; a terminal fast
window) run with NUTS, whose trajectories grow until they U-turn, so a chain started far
out, or in a posterior whose scales differ by orders of magnitude, still travels: the
BlackJAX implementation (`blackjax.window_adaptation`), one per chain, vectorised.

Around it, what the chains measure decides the rest:

- the first step of each chain comes from Hoffman & Gelman's (2014, Alg. 4) heuristic
  (`reasonable_step_size`), not a constant;
- the metric is pooled over chains only once they agree: while the split R-hat of the log
  density over the last half of a stage exceeds `MAX_RHAT_LP`, the stage is repeated from
  where the chains are (at most ``max_extensions`` times; the record says so);
- the metric (``"auto"``) is dense when the pooled draws' correlation matrix has condition
  number above `DENSE_CONDITION` (a pair correlated at 0.99 gives about 200), the dimension
  is at most ``dense_max_dim`` and there are at least twice as many draws as dimensions;
  a dense stage then re-adapts from the chains' positions with the pooled covariance as its
  start. A dense metric costs ``O(dim^2)`` per leapfrog step against ``O(dim)`` for a
  diagonal one, next to one gradient evaluation;
- ``"auto"`` picks the low-rank-plus-diagonal metric (`adaptmc.adaptation.low_rank`,
  nutpie's; ``O(dim k)`` per leapfrog step) instead: when the correlation is strong (as
  above) but dense is ruled out (dimension above ``dense_max_dim`` or fewer than ``2 dim``
  draws: then "strong" is judged from the low-rank estimate's own condition number, above
  `DENSE_CONDITION`), and, where dense is allowed, when the estimate needs at most
  `LOW_RANK_MAX_FRACTION` of the dimension in directions (``k <= dim / 4``: its ``4 dim k``
  flops per ``M^{-1} p`` are then at most half of dense's ``2 dim^2``, and what it leaves
  to the diagonal is within a factor ``c = 2`` of it). A warm-up's low-rank metric keeps at
  most ``ceil(dim / 4)`` directions (`low_rank_budget`), the most extreme. A low-rank stage
  runs NUTS with the metric held fixed (BlackJAX's ``LowRankInverseMassMatrix``) and dual
  averaging of the step size on the same schedule; the final metric is re-estimated from
  that stage's draws;
- each slow window's inverse mass, and the pooled one at the end, come from draws and
  gradients (`window_inverse_mass`: nutpie's ``sqrt(var(x) / var(grad))`` for a diagonal,
  the covariance shrunk toward its diagonal for a dense one), not Stan's regulariser toward
  ``1e-3 I``, which swamps the variance of a coefficient on a predictor of scale 1e4; the
  step size is the median of the chains';
- the trajectory lengths NUTS chose (leapfrog steps per draw) in the last half of the final
  stage are returned: they give the range of ``L`` a fixed-length HMC tuner should search.

Gradients are counted exactly: one per chain at the start, one per step of the initial-step
heuristic, and each NUTS transition's ``num_integration_steps``.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.adaptation.first_step import reasonable_step_size
from adaptmc.adaptation.low_rank import LowRankInverseMass, low_rank_inverse_mass
from adaptmc.adaptation.welford import welford_step
from adaptmc.targets.base import QUICK_COMPILE, compiled

MAX_RHAT_LP = 1.05
DENSE_CONDITION = 100.0
LOW_RANK_MAX_FRACTION = 0.25
SHARED_PROGRAM_DIM = 64
METRICS = ("auto", "diag", "dense", "low-rank")


class Warmup(NamedTuple):
    """What `window_warmup` measured.

    positions: ``(chains, dim)`` where the chains stand; step_size, inverse_mass: the pooled
    setting (``(dim,)``, ``(dim, dim)`` or a `LowRankInverseMass`); metric: ``"diag"``,
    ``"dense"`` or ``"low-rank"``;
    trajectory_steps: ``(chains, n)`` NUTS leapfrog steps per transition in the last half of
    the final stage; draws: ``(chains, n, dim)`` the positions of those transitions;
    logdensity: ``(chains, steps)`` over every stage; num_grads: gradients over all chains;
    divergences: divergent transitions over all stages; rhat_lp: split R-hat of the log
    density over the final stage's last half; stages: what ran (``"diag"``, ``"extend"``,
    ``"dense"``, ``"low-rank"``); wall_s, compile_s: seconds.
    """

    positions: np.ndarray
    step_size: float
    inverse_mass: np.ndarray | LowRankInverseMass
    metric: str
    trajectory_steps: np.ndarray
    draws: np.ndarray
    logdensity: np.ndarray
    num_grads: int
    divergences: int
    rhat_lp: float
    stages: tuple[str, ...]
    wall_s: float
    compile_s: float


def _first_steps(target):
    """`reasonable_step_size` of every chain, compiled once per target (run op by op under
    ``vmap`` it compiles each primitive of the model on its own)."""
    return compiled(target, "reasonable_step_size", lambda: jax.jit(
        jax.vmap(lambda k, x: reasonable_step_size(k, target, x)),
        compiler_options=QUICK_COMPILE))


def _stage(record, target, keys, positions, step_sizes, inverse_mass, num_steps, kind,
           target_accept, shared=False):
    """One windowed adaptation per chain from ``positions``, compiled once per signature;
    returns final positions, step sizes, and per-step (position, logdensity, steps,
    divergent). ``kind``: ``"diag"``, ``"dense"`` or ``"low-rank"``. ``shared``: a diagonal
    or dense stage runs in the program that holds a ``(dim, dim)`` inverse mass, whose
    estimator is picked by an argument, not a constant, so both share one executable."""
    program_kind = "shared" if shared and kind in ("diag", "dense") else kind
    if program_kind == "shared" and jnp.ndim(inverse_mass) == 1:
        inverse_mass = jnp.diag(jnp.asarray(inverse_mass))
    args = (keys, positions, step_sizes, jax.tree.map(jnp.asarray, inverse_mass),
            jnp.asarray(kind == "dense"))
    signature = tuple((a.shape, str(a.dtype)) for a in jax.tree.leaves(args[1:]))
    cache_key = ("window_warmup", program_kind, num_steps, target_accept, signature)
    if cache_key not in target.programs:
        tick = time.perf_counter()
        program = _program(target, num_steps, program_kind, target_accept)
        compiled(target, cache_key, lambda: jax.jit(program).lower(*args).compile())
        record["compile_s"] += time.perf_counter() - tick
    return target.programs[cache_key](*args)


def _program(target, num_steps, kind, target_accept):
    """Per chain: NUTS (BlackJAX's kernel, parameters at call time) for ``num_steps`` steps
    on Stan's schedule (`blackjax.adaptation.window_adaptation.build_schedule`): per-step
    dual averaging of the step size throughout, restarted at the end of each slow window,
    where a diagonal or dense inverse mass becomes the window's `window_inverse_mass`
    estimate (``kind="shared"``: a ``(dim, dim)`` one, dense or diagonal by the ``dense``
    argument); a low-rank one stays fixed (its estimate is a host computation)."""
    import blackjax
    from blackjax.adaptation.step_size import dual_averaging_adaptation
    from blackjax.adaptation.window_adaptation import build_schedule
    from blackjax.mcmc.metrics import LowRankInverseMassMatrix

    schedule = jnp.asarray(build_schedule(num_steps))
    kernel = blackjax.nuts.build_kernel()
    da_init, da_update, da_final = dual_averaging_adaptation(target_accept)
    dim, low_rank, full = target.dim, kind == "low-rank", kind in ("dense", "shared")
    shape = (dim, dim) if full else (dim,)

    def estimate(welford, dense):
        if kind != "shared":
            return window_inverse_mass(welford, kind == "dense")
        count, mean_x, m2_x, mean_g, m2_g = welford
        diagonal = window_inverse_mass((count, mean_x, jnp.diag(m2_x), mean_g, m2_g), False)
        return jnp.where(dense, window_inverse_mass(welford, True), jnp.diag(diagonal))

    def as_blackjax(inverse_mass):
        if not low_rank:
            return inverse_mass
        return LowRankInverseMassMatrix(jnp.sqrt(inverse_mass.diag), inverse_mass.vectors,
                                        inverse_mass.values)

    def one(key, position, step_size, inverse_mass, dense):
        state = blackjax.nuts.init(position, target.logdensity)
        zeros = (jnp.zeros(()), jnp.zeros(dim), jnp.zeros(shape), jnp.zeros(dim),
                 jnp.zeros(dim))

        def body(carry, inputs):
            state, da, inverse_mass, welford = carry
            (stage, window_end), key = inputs
            end = window_end == 1
            eps = jnp.exp(da.log_step_size)
            state, info = kernel(key, state, target.logdensity, eps, as_blackjax(inverse_mass))
            da = da_update(da, info.acceptance_rate)
            if not low_rank:
                welford = jax.lax.cond(stage == 1, _welford_add, lambda w, x, g: w, welford,
                                       state.position, state.logdensity_grad)
                new_mass = estimate(welford, dense)
                inverse_mass = jnp.where(end, new_mass, inverse_mass)
                welford = jax.tree.map(lambda z, w: jnp.where(end, z, w), zeros, welford)
            da = jax.tree.map(lambda f, o: jnp.where(end, f, o), da_init(da_final(da)), da)
            out = (state.position, state.logdensity_grad, state.logdensity,
                   info.num_integration_steps, info.is_divergent)
            return (state, da, inverse_mass, welford), out

        carry = (state, da_init(step_size), inverse_mass, zeros)
        keys = jax.random.split(key, num_steps)
        (state, da, _, _), info = jax.lax.scan(body, carry, (schedule, keys))
        return state.position, da_final(da), info

    return jax.vmap(one, in_axes=(0, 0, 0, None, None))


def _welford_add(welford, x, g):
    """Add one draw ``x`` and its gradient ``g`` to ``(count, mean_x, m2_x, mean_g, m2_g)``
    (`welford_step`); ``m2_x`` is ``(dim,)`` or ``(dim, dim)``."""
    count, mean_x, m2_x, mean_g, m2_g = welford
    mean_x, m2_x, _ = welford_step(mean_x, m2_x, count, x)
    mean_g, m2_g, count = welford_step(mean_g, m2_g, count, g)
    return count, mean_x, m2_x, mean_g, m2_g


def window_inverse_mass(welford, dense: bool, xp=jnp):
    """The inverse mass from one slow window's draws and gradients.

    Diagonal: ``sqrt(var(x) / var(grad))`` per coordinate, the estimate of nutpie (Seyboldt
    2023, "nutpie: diagonal mass matrix from draws and gradients"), exact for a Gaussian and
    free of Stan's absolute regulariser ``1e-3 I``, which swamps a variance of 1e-8 (a
    regression coefficient on a predictor of scale 1e4). Dense: the draws' covariance shrunk
    toward its own diagonal, ``(n C + 5 diag(C)) / (n + 5)`` (Stan's weights, a scale-free
    target). ``xp``: ``jax.numpy`` inside the compiled warm-up, NumPy on the host."""
    count, _, m2_x, _, m2_g = welford
    n = xp.maximum(count - 1.0, 1.0)
    var_g = m2_g / n
    if dense:
        cov = m2_x / n
        diag = xp.diag(xp.diag(cov))
        shrunk = (count * cov + 5.0 * diag) / (count + 5.0)
        return shrunk + 1e-10 * xp.mean(xp.diag(cov)) * xp.eye(cov.shape[0])
    var_x = m2_x / n
    ratio = xp.sqrt(var_x / xp.where(var_g > 0, var_g, 1.0))
    tiny = 1e-10 * xp.maximum(xp.median(ratio), 1e-300)
    return xp.where(xp.isfinite(ratio) & (ratio > 0), ratio, 1.0) + tiny


def window_warmup(target, positions, key, *, num_steps: int = 500, metric: str = "auto",
                  target_accept: float = 0.8, max_extensions: int = 2,
                  dense_max_dim: int = 500) -> Warmup:
    """Warm ``positions: (chains, dim)`` up on ``target`` (see the module docstring);
    ``metric``: ``"auto"``, ``"diag"``, ``"dense"`` or ``"low-rank"`` (a diagonal stage,
    then a low-rank one from its draws)."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(map(repr, METRICS))}, "
                         f"got {metric!r}")
    if num_steps < 150:
        raise ValueError(f"a windowed warm-up needs at least 150 steps (75 fast, 25 slow, "
                         f"50 terminal), got {num_steps}")
    started = time.perf_counter()
    positions = jnp.asarray(positions)
    chains, dim = positions.shape
    key_step, key = jax.random.split(key)
    steps, grads = _first_steps(target)(jax.random.split(key_step, chains), positions)
    record = {"grads": chains + int(np.sum(np.asarray(grads))), "divergences": 0, "lp": [],
              "stages": [], "compile_s": 0.0}
    kind = "dense" if metric == "dense" else "diag"
    # a diagonal stage that may be followed by a dense one runs in the dense program when
    # the dimension is small, so both share one compilation (about 3 s of a run); the
    # price, a (dim, dim) product per leapfrog step, is at most 64^2 multiply-adds
    shared = metric == "auto" and dim <= min(SHARED_PROGRAM_DIM, dense_max_dim)
    stage = dict(record=record, target=target, key=key, num_steps=num_steps,
                 target_accept=target_accept, shared=shared)
    inverse_mass = jnp.eye(dim) if kind == "dense" else jnp.ones(dim)
    out = _run_stage(stage, 0, positions, steps, inverse_mass, kind, kind)
    while out["rhat_lp"] > MAX_RHAT_LP and len(record["stages"]) <= max_extensions:
        mass = pooled_inverse_mass(out["draws"], out["grads"], kind == "dense")
        out = _run_stage(stage, len(record["stages"]), out["positions"], out["step_sizes"],
                         mass, kind, "extend")
    if metric == "auto":
        chosen = choose_metric(out["draws"], out["grads"], dense_max_dim)
    else:
        chosen = "low-rank" if metric == "low-rank" else kind
    if chosen != kind:
        kind = chosen
        mass = pooled_metric(out["draws"], out["grads"], kind)
        out = _run_stage(stage, len(record["stages"]), out["positions"], out["step_sizes"],
                         mass, kind, kind)
    return Warmup(
        positions=np.asarray(out["positions"]),
        step_size=float(np.median(np.asarray(out["step_sizes"]))),
        inverse_mass=pooled_metric(out["draws"], out["grads"], kind),
        metric=kind,
        trajectory_steps=out["trajectory_steps"],
        draws=out["draws"],
        logdensity=np.concatenate(record["lp"], axis=1),
        num_grads=record["grads"],
        divergences=record["divergences"],
        rhat_lp=out["rhat_lp"],
        stages=tuple(record["stages"]),
        wall_s=time.perf_counter() - started,
        compile_s=record["compile_s"],
    )


def _run_stage(stage, index, positions, step_sizes, inverse_mass, kind, label) -> dict:
    """Run stage ``index`` (`_stage` with the warm-up's fixed settings ``stage``) and record
    its gradients, divergences and log densities."""
    record, num_steps = stage["record"], stage["num_steps"]
    keys = jax.random.split(jax.random.fold_in(stage["key"], index), positions.shape[0])
    final, new_steps, (draws, grads, lp, nsteps, divergent) = jax.block_until_ready(_stage(
        record, stage["target"], keys, positions, step_sizes, inverse_mass, num_steps, kind,
        stage["target_accept"], stage["shared"]))
    # summed on the host: np.sum of a JAX array is JAX's sum, compiled on first use
    record["grads"] += int(np.sum(np.asarray(nsteps)))
    record["divergences"] += int(np.sum(np.asarray(divergent)))
    record["lp"].append(np.asarray(lp))
    record["stages"].append(label)
    half = num_steps // 2
    last_lp = np.asarray(lp)[:, half:, None]
    from adaptmc.diagnostics import rhat

    return {
        "positions": final,
        "step_sizes": new_steps,
        "draws": np.asarray(draws)[:, half:],
        "grads": np.asarray(grads)[:, half:],
        "trajectory_steps": np.asarray(nsteps)[:, half:],
        "rhat_lp": float(rhat(last_lp)[0]) if positions.shape[0] > 1 else 1.0,
    }


def low_rank_budget(dim: int) -> int:
    """The most directions a warm-up's low-rank metric keeps: ``ceil(dim / 4)``, so that it
    costs at most about half a dense one per leapfrog step."""
    return max(1, math.ceil(LOW_RANK_MAX_FRACTION * dim))


def choose_metric(draws: np.ndarray, grads: np.ndarray, dense_max_dim: int) -> str:
    """``"diag"``, ``"dense"`` or ``"low-rank"`` from the pooled ``draws`` and ``grads`` (both
    ``(chains, n, dim)``) of the last diagonal stage (the rule is in the module docstring)."""
    dim = draws.shape[-1]
    if dim < 2:
        return "diag"
    if wants_dense(draws, dense_max_dim):
        rank = low_rank_inverse_mass(draws, grads).rank
        return "low-rank" if 0 < rank <= low_rank_budget(dim) else "dense"
    dense_possible = dim <= dense_max_dim and draws[..., 0].size >= 2 * dim
    if dense_possible:
        return "diag"
    estimate = low_rank_inverse_mass(draws, grads)
    if estimate.rank == 0:
        return "diag"
    values = np.asarray(estimate.values)
    condition = max(values.max(), 1.0) / min(values.min(), 1.0)
    return "low-rank" if condition > DENSE_CONDITION else "diag"


def wants_dense(draws: np.ndarray, max_dim: int) -> bool:
    """Whether the pooled ``draws: (chains, n, dim)`` call for a dense metric (see module)."""
    pooled = np.asarray(draws).reshape(-1, draws.shape[-1])
    dim = pooled.shape[1]
    if dim < 2 or dim > max_dim or pooled.shape[0] < 2 * dim:
        return False
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = np.corrcoef(pooled.T)
    if not np.all(np.isfinite(corr)):
        return False
    return bool(np.linalg.cond(corr) > DENSE_CONDITION)


def pooled_metric(draws: np.ndarray, grads: np.ndarray, kind: str):
    """The pooled inverse mass of ``kind`` (``"diag"``, ``"dense"``, ``"low-rank"``)."""
    if kind == "low-rank":
        return low_rank_inverse_mass(draws, grads, max_rank=low_rank_budget(draws.shape[-1]))
    return pooled_inverse_mass(draws, grads, kind == "dense")


def pooled_inverse_mass(draws: np.ndarray, grads: np.ndarray, dense: bool) -> np.ndarray:
    """The inverse mass from the pooled ``draws`` and their ``grads`` (both ``(chains, n,
    dim)``), by `window_inverse_mass`'s estimators: ``(dim,)`` or ``(dim, dim)``."""
    dim = draws.shape[-1]
    x = np.asarray(draws, dtype=float).reshape(-1, dim)
    g = np.asarray(grads, dtype=float).reshape(-1, dim)
    n = x.shape[0]
    m2_x = np.cov(x.T).reshape(dim, dim) * (n - 1) if dense else x.var(0, ddof=1) * (n - 1)
    welford = (float(n), x.mean(0), m2_x, g.mean(0), g.var(0, ddof=1) * (n - 1))
    return np.asarray(window_inverse_mass(welford, dense, xp=np))
