"""Why NUTS after adaptmc's warm-up makes less robust ESS per sampling gradient than nutpie
(issue #42): adaptmc's warm-up (`adaptmc.adaptation.early`) and nutpie low-rank from the
bench's starts, then NUTS (BlackJAX, fixed metric and step per chain) under adaptmc's metric
at adaptmc's steps, at nutpie's steps and at scaled steps.

Per arm: robust min ESS (the bench's quantities) per 1000 sampling gradients, gradients per
draw, mean acceptance statistic, divergences. Usage::

    PYTHONPATH=src python scripts/nuts_eff.py pdb-arK-arK 0 [--warmup 500] [--draws 1000]

(the seed is the bench's row index: the cell seed and starts are the bench's)
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np


def nuts_fixed(target, metric, steps, states, key, draws, jitter=0.0):
    """Per chain ``draws`` NUTS transitions at fixed step ``steps[c]`` under ``metric``
    ``(diag, vectors, values)`` (sigma^2, U, lambda); returns positions, leapfrog steps,
    acceptance statistics and divergences, each ``(chains, draws, ...)``."""
    import blackjax
    from blackjax.mcmc.metrics import LowRankInverseMassMatrix

    kernel = blackjax.nuts.build_kernel()
    diag, vectors, values = (jnp.asarray(a) for a in metric)
    inverse_mass = LowRankInverseMassMatrix(jnp.sqrt(diag), vectors, values)

    def one(key, state, step):
        def body(state, key):
            u = jax.random.uniform(jax.random.fold_in(key, 7), minval=-jitter, maxval=jitter)
            state, info = kernel(key, state, target.logdensity, step * (1 + u), inverse_mass)
            return state, (state.position, info.num_integration_steps, info.acceptance_rate,
                           info.is_divergent)

        return jax.lax.scan(body, state, jax.random.split(key, draws))[1]

    keys = jax.random.split(key, len(steps))
    out = jax.jit(jax.vmap(one))(keys, states, jnp.asarray(steps))
    return tuple(np.asarray(a) for a in out)


def measure(target, positions, steps, accept, div) -> dict:
    from adaptmc import diagnostics
    from adaptmc_lab.bench.quantities import quantities

    _, values = quantities(target, positions)
    ess = float(np.min(diagnostics.robust_ess(values)))
    grads = int(steps.sum())
    return {"ess_per_1k": round(1000 * ess / grads, 1),
            "grads_per_draw": round(grads / steps.size, 2),
            "accept": round(float(np.nanmean(accept)), 3), "div": int(div.sum()),
            "rhat": round(float(np.nanmax(diagnostics.rhat(values))), 4)}


def ours(target, starts, seed, warmup):
    from adaptmc.adaptation import early
    from adaptmc.adaptation.dual_averaging import da_final_step_size_on_host
    from adaptmc.adaptation.warmup_programs import padded

    run = early.start_chains(target, starts, jax.random.key(seed), num_steps=warmup,
                             progress=False)
    while not run.done():
        run.advance()
        run.adapt()
    result = early.chains_result(run)
    steps = np.asarray(da_final_step_size_on_host(run.da))
    # the final window's realised acceptance is not returned by the chunk program; the
    # leapfrog steps are
    window = np.concatenate(run.out["steps"][run.final_start // early.CHUNK:], axis=1)
    return run, result, steps, padded(run.metric, run.rank), window, early.final_steps(run)


def nutpie_run(target, starts, seed, warmup, draws):
    from adaptmc_lab.baselines.nutpie import nutpie_pyfunc

    r = nutpie_pyfunc(target, seed, num_chains=len(starts), num_warmup=warmup,
                      num_draws=draws, initial_positions=starts, low_rank=True,
                      store_mass_matrix=True)
    ss = r.idata.sample_stats
    steps = np.asarray(ss["step_size"].values[:, 0])
    stds = np.asarray(ss["mass_matrix_stds"].values[:, 0])
    eig = np.asarray(ss["mass_matrix_eigvals"].values[:, 0])
    out = measure(target, r.positions, np.asarray(ss["n_steps"].values),
                  np.asarray(ss["mean_tree_accept"].values), np.asarray(ss["diverging"].values))
    out["warmup_grads"] = r.warmup_grads
    return out, steps, stds, eig


def _no_final_restart():
    """Dual averaging carried into the final window (not restarted there)."""
    from adaptmc.adaptation import early

    restart = early._Chains.restart_step_size

    def patched(self):
        if self.counters["index"] * early.CHUNK != self.final_start:
            restart(self)

    early._Chains.restart_step_size = patched


def _no_restart():
    """One dual averaging through the warm-up (nuts-rs: no restart after its start)."""
    from adaptmc.adaptation import early

    early._Chains.restart_step_size = lambda self: None


VARIANTS = {"main": lambda: None, "no-final-restart": _no_final_restart,
            "no-restart": _no_restart}


def main() -> None:
    from adaptmc_lab.bench.config import cell_seed, initial_positions
    from adaptmc_lab.targets import get_target

    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("seed", type=int)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--scales", default="0.8,1.25,1.5")
    parser.add_argument("--variant", default="main", choices=sorted(VARIANTS))
    parser.add_argument("--no-nutpie", action="store_true")
    args = parser.parse_args()
    VARIANTS[args.variant]()
    target = get_target(args.target)
    index = args.seed
    args.seed = cell_seed(args.target, args.seed)  # the bench's row seed
    starts = initial_positions(target, args.seed, 4, 0.5)
    print("warm-up", time.strftime("%X"), file=sys.stderr, flush=True)
    run, result, steps, metric, window, fitted = ours(target, starts, args.seed, args.warmup)
    report = {"target": args.target, "seed": args.seed, "index": index, "metric": result.metric,
              "rank": int(run.metric.rank), "our_steps": steps.round(4).tolist(),
              "our_warmup_grads": int(result.num_grads),
              "fitted_step": round(float(fitted[0]), 4),
              "window_grads_per_draw": round(float(window.mean()), 2),
              "our_sigma": np.sqrt(metric[0]).round(4).tolist(),
              "our_eig": np.sort(np.asarray(run.metric.values))[::-1].round(4).tolist()}
    report["variant"] = args.variant
    arms = {"ours": steps, "ours_at_pooled_median": np.full_like(steps, np.median(steps)),
            "fitted": fitted}
    if not args.no_nutpie:
        print("nutpie", time.strftime("%X"), file=sys.stderr, flush=True)
        nutpie, np_steps, stds, eig = nutpie_run(target, starts, args.seed, args.warmup,
                                                 args.draws)
        report.update(nutpie=nutpie, nutpie_steps=np_steps.round(4).tolist(),
                      nutpie_sigma=stds[0].round(4).tolist(),
                      nutpie_eig=np.sort(eig[0][np.isfinite(eig[0])])[::-1].round(4).tolist())
        arms["ours_at_nutpie_steps"] = np_steps
    key = jax.random.key(1000 + args.seed)
    for scale in (float(s) for s in args.scales.split(",")):
        arms[f"ours_x{scale}"] = steps * scale
    arms["fitted_jitter"] = fitted
    for name, arm_steps in arms.items():
        print(name, time.strftime("%X"), file=sys.stderr, flush=True)
        x, n, acc, div = nuts_fixed(target, metric, arm_steps, run.state, key, args.draws,
                                    0.1 if name.endswith("jitter") else 0.0)
        report[name] = measure(target, x, n, acc, div)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
