"""nutpie, the outside reference: its NUTS (Rust; the mass matrix adapted from draws and
gradients, diagonal or low-rank, Seyboldt et al.'s nutpie 0.16) on any target's own JAX log
density (`nutpie_pyfunc`), or on a PyMC model of the same posterior as a built-in target
(`pymc_twin`, `nutpie_nuts`).

nutpie compiles a PyMC model (numba by default), so it runs on the targets that have a PyMC
twin here: the Gaussians built by `adaptmc.targets.gaussians.gaussian` (neal-100d,
std-normal-10d, gauss-2d-*) and the logistic regressions on the shared data sets. Install
with ``pip install -e ".[nutpie]"``; nutpie and PyMC are imported inside the functions.
"""

from __future__ import annotations

import threading
import time
from typing import Any, NamedTuple

import numpy as np

from adaptmc_lab.baselines.nuts import NutsResult


def pymc_twin(target):
    """A PyMC model whose log density over its one vector variable ``x`` (no transform: the
    space is unbounded) is the target's up to a constant, in the target's coordinate order.

    Gaussians: ``x ~ N(mean, cov)`` (independent normals when ``cov`` is diagonal).
    Logistic regression on a shared set: ``x ~ N(0, prior_variance I)``, ``y ~
    Bernoulli(sigmoid(X x))`` with the set standardised as `adaptmc.targets.logistic` does.
    Other targets: one `ValueError` naming those that have a twin."""
    import pymc as pm

    info = target.info
    with pm.Model() as model:
        if "mean" in info and "cov" in info:
            mean, cov = np.asarray(info["mean"], float), np.asarray(info["cov"], float)
            if np.count_nonzero(cov - np.diag(np.diag(cov))) == 0:
                pm.Normal("x", mean, np.sqrt(np.diag(cov)), shape=mean.shape)
            else:
                pm.MvNormal("x", mean, cov, shape=mean.shape)
        elif target.name.startswith("logistic-") and "prior_variance" in info:
            from adaptmc.datasets.logistic import load_logistic

            data = load_logistic(target.name.removeprefix("logistic-"))
            beta = pm.Normal("x", 0.0, np.sqrt(info["prior_variance"]),
                             shape=data.features.shape[1])
            pm.Bernoulli("y", logit_p=pm.math.dot(data.features, beta), observed=data.labels)
        else:
            raise ValueError(
                f"nutpie runs on a PyMC model of the target; {target.name!r} has none here "
                "(Gaussians such as neal-100d and the logistic-* regressions have one)")
    return model


def nutpie_nuts(target, seed: int, *, num_chains: int = 4, num_warmup: int = 1000,
                num_draws: int = 1000, initial_positions=None, backend: str = "numba"
                ) -> NutsResult:
    """nutpie's NUTS on `pymc_twin` of ``target``: ``num_warmup`` tuning and ``num_draws``
    kept draws per chain, chains in nutpie's threads (one per core), started at the mean of
    ``initial_positions`` (nutpie takes one point). ``compile_s``: `compile_pymc_model`;
    ``wall_s``: sampling. Gradients: nutpie's ``n_steps`` (leapfrog steps) per draw, warm-up
    apart, plus one per chain at the start. ``backend``: nutpie's (``"numba"`` or
    ``"jax"``)."""
    import nutpie

    tick = time.perf_counter()
    compiled = nutpie.compile_pymc_model(pymc_twin(target), backend=backend)
    compile_s = time.perf_counter() - tick
    start = (np.asarray(target.initial_position, float) if initial_positions is None
             else np.asarray(initial_positions, float).mean(axis=0))
    tick = time.perf_counter()
    trace = nutpie.sample(compiled, draws=num_draws, tune=num_warmup, chains=num_chains,
                          seed=int(seed), save_warmup=True, progress_bar=False,
                          init_mean=start)
    wall_s = time.perf_counter() - tick
    positions = np.asarray(trace.posterior["x"].values, float).reshape(
        num_chains, num_draws, target.dim)
    steps = np.asarray(trace.sample_stats["n_steps"].values, np.int64)
    warm = np.asarray(trace.warmup_sample_stats["n_steps"].values, np.int64).sum(axis=1) + 1
    stats = trace.sample_stats
    return NutsResult(positions, steps, np.asarray(stats["diverging"].values),
                      np.asarray(stats["mean_tree_accept"].values), warm,
                      np.full(num_chains, num_draws),
                      np.asarray(stats["step_size"].values[:, -1], float),
                      np.full((num_chains, target.dim), np.nan), wall_s, compile_s)


class NutpieRun(NamedTuple):
    """What `nutpie_pyfunc` returns.

    idata: ArviZ InferenceData (``posterior``: the target's named, constrained variables;
    ``unconstrained``: the flat positions ``x``, ``(chain, draw, dim)``; ``sample_stats``:
    nutpie's); positions: ``(chains, draws, dim)``; num_grads: every call of the log
    density, warm-up included; warmup_grads: those before the first kept draw; wall_s: the
    sampling call; compile_s: the gradient's compilation, before it.
    """

    idata: Any
    positions: np.ndarray
    num_grads: int
    warmup_grads: int
    wall_s: float
    compile_s: float


def nutpie_pyfunc(target, seed: int, *, num_chains: int = 4, num_warmup: int = 1000,
                  num_draws: int = 1000, initial_positions=None, low_rank: bool = False,
                  cores: int | None = None, **settings) -> NutpieRun:
    """nutpie's NUTS (diagonal metric, or ``low_rank``: nutpie's
    ``low_rank_modified_mass_matrix``) on the target's own JAX log density, through
    ``nutpie.compiled_pyfunc.from_pyfunc``: any `Target`, no PyMC twin needed.

    Every chain starts at one of ``initial_positions: (num_chains, dim)`` (default: the
    target's initial position), as the other samplers' chains do; nutpie refuses a start
    where a coordinate of the gradient is exactly 0 (its first metric is ``1 / |grad|``), e.g.
    the mode of a coordinate, and fails after 500 tries. Gradients are counted by a
    counter around the log density (one per call, the warm-up's and the starts' included);
    ``warmup_grads`` is that count less the kept draws' leapfrog steps. ``settings`` go to
    ``nutpie.sample`` (e.g. ``target_accept``)."""
    import jax
    import nutpie
    from nutpie.compiled_pyfunc import from_pyfunc

    starts = _starts(target, num_chains, initial_positions)
    tick = time.perf_counter()
    value_and_grad = jax.jit(target.logdensity_and_grad)
    jax.block_until_ready(value_and_grad(starts[0]))
    compile_s = time.perf_counter() - tick
    counter = _Counter()

    def make_logp():
        def logp(x):
            counter.add()
            value, grad = value_and_grad(x)
            return float(value), np.asarray(grad, dtype=np.float64)
        return logp

    def make_expand(seed1, seed2, chain):
        return lambda x: {"x": np.asarray(x, dtype=np.float64).copy()}

    def initial_point(_seed):
        index = counter.start()
        if index >= len(starts):  # nutpie refused a start and asks for another
            raise ValueError("nutpie asked for another start; each chain has one")
        return starts[index]

    model = from_pyfunc(target.dim, make_logp, make_expand, [np.dtype("float64")],
                        [(target.dim,)], ["x"], make_initial_point_fn=initial_point)
    tick = time.perf_counter()
    try:
        trace = nutpie.sample(model, draws=num_draws, tune=num_warmup, chains=num_chains,
                              seed=int(seed), cores=cores or num_chains, progress_bar=False,
                              low_rank_modified_mass_matrix=low_rank, **settings)
    except RuntimeError:
        if counter.started <= len(starts):
            raise
        raise ValueError(_refusal(value_and_grad, starts)) from None
    wall_s = time.perf_counter() - tick
    positions = np.asarray(trace.posterior["x"].values, dtype=float)
    kept = int(np.asarray(trace.sample_stats["n_steps"].values).sum())
    return NutpieRun(_as_idata(target, trace, positions), positions, counter.calls,
                     counter.calls - kept, wall_s, compile_s)


class _Counter:
    """Calls of the log density and chains started, safe across nutpie's threads."""

    def __init__(self):
        self.lock, self.calls, self.started = threading.Lock(), 0, 0

    def add(self) -> None:
        with self.lock:
            self.calls += 1

    def start(self) -> int:
        with self.lock:
            index, self.started = self.started, self.started + 1
        return index


def _refusal(value_and_grad, starts: np.ndarray) -> str:
    """Why nutpie asked for more starts than the chains have: the starts it refuses (a log
    density or gradient not finite, or a gradient coordinate exactly 0)."""
    reasons = []
    for chain, start in enumerate(starts):
        value, grad = (np.asarray(a, dtype=float) for a in value_and_grad(start))
        if not np.isfinite(value):
            reasons.append(f"chain {chain}: log density {float(value)}")
        elif not np.all(np.isfinite(grad)):
            reasons.append(f"chain {chain}: gradient not finite")
        elif np.any(grad == 0):
            reasons.append(f"chain {chain}: gradient coordinate {int(np.argmin(grad != 0))} is 0")
    return ("nutpie refused a start it was given and asked for another, and every chain has "
            "one (the starts every sampler of the row gets); " + ("; ".join(reasons) or
            "each start is finite with no zero gradient coordinate here"))


def _starts(target, num_chains: int, initial_positions) -> np.ndarray:
    """``(num_chains, dim)`` starting points (cycled when fewer are given)."""
    if initial_positions is None:
        initial_positions = np.asarray(target.initial_position, float)[None]
    starts = np.atleast_2d(np.asarray(initial_positions, dtype=float))
    if starts.shape[-1] != target.dim or not np.all(np.isfinite(starts)):
        raise ValueError(f"initial_positions must be finite, (chains, {target.dim}); got "
                         f"shape {starts.shape}")
    return starts[np.arange(num_chains) % starts.shape[0]]


def _as_idata(target, trace, positions: np.ndarray):
    """nutpie's trace with the target's named variables as its posterior."""
    import arviz as az

    from adaptmc.run.idata import posterior_variables

    named = posterior_variables(target, positions)
    idata = az.from_dict(posterior=named)
    idata.add_groups(unconstrained=trace.posterior, sample_stats=trace.sample_stats)
    if "warmup_sample_stats" in trace.groups():
        idata.add_groups(warmup_sample_stats=trace.warmup_sample_stats)
    return idata
