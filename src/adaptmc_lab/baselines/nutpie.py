"""nutpie, the outside reference of the per-second tables: its NUTS (Rust; Stan-style
warm-up with the mass matrix adapted from draws and gradients, Seyboldt et al.'s nutpie
0.16) on a PyMC model of the same posterior as a built-in target (`pymc_twin`).

nutpie compiles a PyMC model (numba by default), so it runs on the targets that have a PyMC
twin here: the Gaussians built by `adaptmc.targets.gaussians.gaussian` (neal-100d,
std-normal-10d, gauss-2d-*) and the logistic regressions on the shared data sets. Install
with ``pip install -e ".[nutpie]"``; nutpie and PyMC are imported inside the functions.
"""

from __future__ import annotations

import time

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
