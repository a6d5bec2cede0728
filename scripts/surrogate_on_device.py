"""Issue 14's choice between the surrogate on the host and on the device, measured.

Runs the README's recipe (adaptive-hmc, 4 chains, the bench's sizes) on the targets named
on the command line and records every acquisition maximisation its GP-UCB bandit makes
(`adaptmc.tuners.policies.gp_ucb`'s ``new_point``: the GP on the normalised rewards, then
DIRECT over the box) and every stop-rule evaluation (`adaptmc.tuners.stopping.separation`).
Then, for each recorded maximisation, it times

- the host path the library runs: `gp_fit` plus `direct_maximise` (NumPy, SciPy-free);
- the device path the issue proposes: the same GP fitted on a fixed-size, masked buffer of
  observations and its UCB maximised over a fixed candidate set (a scrambled Sobol set of
  ``CANDIDATES`` points, snapped to the box's integers, plus the measured settings), one
  jitted JAX call per step;

and reports per-step seconds, the device program's compile seconds, and how far the device
path's maximum falls short of DIRECT's (in the acquisition's normalised-reward units). The
stop rule's share of the host time is what overlapping it with the next super-transition
(JAX's asynchronous dispatch) could hide at most: the bandit's next proposal needs the last
reward, so its own search is on the critical path either way.

Usage: ``python scripts/surrogate_on_device.py std-normal-10d logistic-german neal-100d``
"""

from __future__ import annotations

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from scipy.stats import qmc

from adaptmc.targets import get_target
from adaptmc.tuners import acquisition as acq
from adaptmc.tuners import policies, stopping
from adaptmc.tuners.annealed import snapper
from adaptmc.tuners.box import to_unit
from adaptmc.tuners.gp import gp_fit, gp_predict, unique_points
from adaptmc.tuners.optimise import direct_maximise
from adaptmc.tuners.surrogate import GPConfig, normalise_rewards
from adaptmc_lab.bench.config import BenchConfig
from adaptmc_lab.bench.samplers import recipe_sampler

CANDIDATES = 1024
CONFIG = GPConfig()  # the recipe's GP hyperparameters
BUFFER = 64  # observations the device GP holds (unique settings; the recipe adopts ~15-25)


def record_problems(target_name: str, seed: int = 1):
    """Run the recipe once; return the ``(box, state, beta, p)`` of each GP-UCB search and
    the host seconds of each stop-rule evaluation."""
    problems, stop_seconds = [], []
    fit_gp, search, separation = policies.fit_gp, policies.direct_maximise, stopping.separation
    last = {}

    def recording_fit(box, state, config=None):
        last.update(box=box, state={k: np.array(v) for k, v in state.items()})
        return fit_gp(box, state, config)

    def recording_search(f, dim, snap, maxfun):
        cells = dict(zip(f.__code__.co_freevars, (c.cell_contents for c in f.__closure__),
                         strict=True))
        problems.append((last["box"], last["state"], cells["beta"], cells["p"]))
        return search(f, dim, snap, maxfun)

    def timed_separation(*args, **kwargs):
        tick = time.perf_counter()
        out = separation(*args, **kwargs)
        stop_seconds.append(time.perf_counter() - tick)
        return out

    policies.fit_gp, policies.direct_maximise = recording_fit, recording_search
    stopping.separation = timed_separation
    try:
        output = recipe_sampler("adaptmc-adaptive-hmc")(get_target(target_name), seed,
                                                        BenchConfig())
    finally:
        policies.fit_gp, policies.direct_maximise = fit_gp, search
        stopping.separation = separation
    return problems, stop_seconds, output


def host_step(box, state, beta, p, config=CONFIG):
    post = gp_fit(to_unit(box, state["points"]), normalise_rewards(state["rewards"]),
                  np.full(box.dim, config.lengthscale_fraction), config.signal_var,
                  config.noise_var)
    return direct_maximise(lambda u: acq.ucb(*gp_predict(post, u), beta, p), box.dim,
                           snapper(box))


@jax.jit
def device_step(points, values, counts, mask, candidates, lengthscales, signal_var,
                noise_var, beta, p):
    """GP on the masked buffer (Rasmussen & Williams 2006, Alg. 2.1) and its UCB's maximum
    over ``candidates: (C, d)``; returns ``(u: (d,), value)``."""
    mean = jnp.sum(jnp.where(mask, values, 0.0)) / jnp.sum(mask)

    def kernel(a, b):
        a, b = a / lengthscales, b / lengthscales
        sq = jnp.sum(a**2, 1)[:, None] + jnp.sum(b**2, 1)[None, :] - 2.0 * a @ b.T
        return signal_var * jnp.exp(-0.5 * jnp.maximum(sq, 0.0))

    both = mask[:, None] & mask[None, :]
    noise = jnp.where(mask, noise_var / jnp.maximum(counts, 1) + 1e-10 * signal_var, 1.0)
    gram = jnp.where(both, kernel(points, points), 0.0) + jnp.diag(noise)
    chol = jnp.linalg.cholesky(gram)
    alpha = jax.scipy.linalg.cho_solve((chol, True), jnp.where(mask, values - mean, 0.0))
    cross = jnp.where(mask[None, :], kernel(candidates, points), 0.0)
    v = jax.scipy.linalg.solve_triangular(chol, cross.T, lower=True)
    sd = jnp.sqrt(jnp.maximum(signal_var - jnp.sum(v**2, 0), 0.0))
    ucb = mean + cross @ alpha + p * jnp.sqrt(beta) * sd
    best = jnp.argmax(ucb)
    return candidates[best], ucb[best]


def device_inputs(box, state, beta, p, sobol, config=CONFIG):
    pts, vals, counts = unique_points(to_unit(box, state["points"]),
                                      normalise_rewards(state["rewards"]))
    n = len(vals)
    points = np.zeros((BUFFER, box.dim))
    points[:n] = pts
    values, count = np.zeros(BUFFER), np.zeros(BUFFER)
    values[:n], count[:n] = vals, counts
    mask = np.arange(BUFFER) < n
    snap = snapper(box) or (lambda u: u)
    candidates = np.vstack([snap(sobol), pts, np.zeros((BUFFER - n, box.dim)) + pts[:1]])
    return (points, values, count, mask, candidates,
            np.full(box.dim, config.lengthscale_fraction), config.signal_var, config.noise_var,
            beta, p)


def main(targets):
    print("| target | searches | host s / search | device s / search | device compile s | "
          "max shortfall | median shortfall | stop-rule s (share of host) | run host s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in targets:
        problems, stop_seconds, output = record_problems(name)
        sobol = qmc.Sobol(problems[0][0].dim, scramble=True, seed=0).random(CANDIDATES)
        host, device, shortfall = [], [], []
        tick = time.perf_counter()
        device_step.lower(*device_inputs(*problems[0], sobol)).compile()
        compile_s = time.perf_counter() - tick
        for problem in problems:
            inputs = device_inputs(*problem, sobol)
            device_step(*inputs)[1].block_until_ready()  # the executable is cached: warm
            tick = time.perf_counter()
            _, host_value = host_step(*problem)
            host.append(time.perf_counter() - tick)
            tick = time.perf_counter()
            _, value = device_step(*inputs)
            value = float(value)
            device.append(time.perf_counter() - tick)
            shortfall.append(host_value - value)
        print(f"| {name} | {len(problems)} | {np.median(host):.2e} | {np.median(device):.2e} "
              f"| {compile_s:.2f} | {max(shortfall):.2e} | {np.median(shortfall):.2e} "
              f"| {sum(stop_seconds):.3f} ({sum(stop_seconds) / output.host_s:.0%}) "
              f"| {output.host_s:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1:] or ["std-normal-10d"])
