"""Kernel oracle: how many effective draws per SAMPLING gradient MAMS gives against NUTS
on the same target under the same (oracle) preconditioning. Not the bench: no warm-up is
compared, the metric is the best one can have (a dense covariance from 4000 NUTS draws).

For one bench target (a posteriordb Stan program, `adaptmc_lab.targets.get_target`) and seed:

1. BlackJAX NUTS with a dense metric (window adaptation, 500 + 1000 draws, 4 chains);
2. the target whitened with the covariance of those draws (``x = mu + C y``), NUTS again on
   it (its own 500-step adaptation, whose diagonal stays near 1);
3. BlackJAX's Metropolis-adjusted microcanonical sampler (Robnik, Cohn-Gordon & Seljak 2025;
   ``blackjax.mcmc.adjusted_mclmc_dynamic``) on the whitened target: isokinetic velocity
   Verlet (one gradient a step), a fresh unit velocity every transition, a uniform random
   number of steps with mean ``c sqrt(d) / eps`` (``c sqrt(d)``: the trajectory length, the
   paper's starting ``L = sqrt(d)`` in whitened units, scaled by ``c``), its step size by dual
   averaging (Hoffman & Gelman 2014, Alg. 5) to the target acceptance ``ta`` over 300
   transitions, then 1000 draws per chain.

Each is scored as the bench scores a cell (`adaptmc_lab.bench.evaluation.evaluate`: robust
min ESS, every sampling gradient counted; MAMS: one per integration step). Writes
``OUT/<target>_<seed>.json`` and prints one line per setting.

    python scripts/kernel_oracle.py stan-diamonds-diamonds 0 [OUT]

Sampling gradients count each chain's own integration steps (what chains run apart would
compute; BlackJAX's NUTS baseline is counted alike), not the lockstep maximum of the vmapped
program. The whole run after adaptmc's own warm-up is measured through the product instead:
``adaptmc sample --mams on``, the bench row ``adaptmc-mams`` (docs/notes/mams-sampling.md).
"""
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.mcmc import adjusted_mclmc_dynamic as amd
from blackjax.mcmc import integrators

from adaptmc.adaptation.dual_averaging import da_final_step_size, da_init, da_step_size, da_update
from adaptmc.targets.base import make_target
from adaptmc_lab.baselines.nuts import nuts
from adaptmc_lab.bench.config import SamplerOutput, cell_seed
from adaptmc_lab.bench.evaluation import evaluate
from adaptmc_lab.targets import get_target

jax.config.update("jax_enable_x64", True)

CHAINS, ADAPT, DRAWS = 4, 300, 1000
SETTINGS = [(c, ta) for c in (0.6, 1.2, 2.4) for ta in (0.9, 0.7)]


def scored(target, positions, grads):
    """The bench's evaluation of sampling draws ``(chains, draws, dim)`` and their gradients."""
    e = evaluate(target, SamplerOutput(np.asarray(positions), 0, int(grads), 0.0, 0.0, 0, {}))
    return {"ess1k": e["min_ess_per_1k_sampling_grads"], "grads_per_draw": grads / CHAINS / DRAWS,
            "rhat": e["max_rhat"], "err": e.get("max_err_sd")}


def mams_chain(logp, key, x0, eps0, length, target_acc):
    """One MAMS chain: ``ADAPT`` transitions of dual averaging
    (`adaptmc.adaptation.dual_averaging`), then ``DRAWS`` at the averaged step; the number
    of steps uniform on ``[1, 2 length / eps]``. Returns the draws' positions, steps and
    acceptance, the final step and the adaptation's steps."""
    def steps(k, mean):
        draw = jnp.round(jax.random.uniform(k, minval=0.0, maxval=2.0) * mean)
        return jnp.clip(draw, 1, 1000).astype(int)

    kernel = amd.build_kernel(integration_steps_fn=steps,
                              integrator=integrators.isokinetic_velocity_verlet)

    def transition(state, k, eps):
        k1, k2 = jax.random.split(k)
        new, info = kernel(k1, state._replace(random_generator_arg=k2), logp, eps,
                           integration_steps_params=(length / eps,))
        return new, info, jnp.minimum(1.0, jnp.nan_to_num(info.acceptance_rate))

    def adapting(carry, k):
        state, da = carry
        state, info, acc = transition(state, k, da_step_size(da))
        return (state, da_update(da, acc, target_acc)), info.num_integration_steps

    def sampling(state, k):
        state, info, acc = transition(state, k, eps)
        return state, (state.position, info.num_integration_steps, acc)

    k_adapt, k_draw = jax.random.split(key)
    start = (amd.init(x0, logp, jax.random.key(0)), da_init(eps0))
    (state, da), adapted = jax.lax.scan(adapting, start, jax.random.split(k_adapt, ADAPT))
    eps = da_final_step_size(da)
    _, out = jax.lax.scan(sampling, state, jax.random.split(k_draw, DRAWS))
    return out + (eps, jnp.sum(adapted))


def main(name, seed_index, out_dir):
    target = get_target(name)
    seed, dim = cell_seed(name, seed_index), target.dim
    dense = nuts(target, seed, num_chains=CHAINS, num_warmup=500, num_draws=DRAWS, dense=True)
    res = {"name": name, "dim": dim,
           "nuts": scored(target, dense.positions, dense.sampling_grads)}
    print(name, "d", dim, "NUTS dense", res["nuts"], flush=True)
    flat = dense.positions.reshape(-1, dim)
    mu = jnp.asarray(flat.mean(0))
    chol = jnp.asarray(np.linalg.cholesky(np.cov(flat.T).reshape(dim, dim)
                                          + 1e-10 * np.eye(dim)))
    logp = lambda y: target.logdensity(mu + chol @ y)  # noqa: E731
    back = lambda ys: mu + jnp.einsum("ij,cnj->cni", chol, ys)  # noqa: E731
    starts = jax.vmap(lambda x: jax.scipy.linalg.solve_triangular(chol, x - mu, lower=True))(
        jnp.asarray(dense.positions[:, -1]))
    white = nuts(make_target(logp, jnp.zeros(dim), name="white", check=False), seed + 1,
                 num_chains=CHAINS, num_warmup=500, num_draws=DRAWS, initial_positions=starts)
    res["nuts_white"] = scored(target, back(jnp.asarray(white.positions)), white.sampling_grads)
    print("  NUTS whitened", res["nuts_white"], flush=True)
    run = jax.jit(jax.vmap(lambda k, x, c, ta: mams_chain(logp, k, x, 0.5 * np.sqrt(dim),
                                                           c * np.sqrt(dim), ta),
                           in_axes=(0, 0, None, None)))
    keys = jax.random.split(jax.random.key(seed + 7), CHAINS)
    for c, ta in SETTINGS:
        xs, ns, accs, eps, _ = run(keys, starts, c, ta)
        row = {"c": c, "ta": ta, **scored(target, back(xs), int(np.sum(ns))),
               "acc": float(np.mean(accs)), "eps": float(np.mean(eps))}
        row["vs_white"] = row["ess1k"] / res["nuts_white"]["ess1k"]
        res[f"mams_{c}_{ta}"] = row
        print("  MAMS", row, flush=True)
    os.makedirs(out_dir, exist_ok=True)
    with open(f"{out_dir}/{name}_{seed_index}.json", "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0,
         sys.argv[3] if len(sys.argv) > 3 else "runs/kernel-oracle")
