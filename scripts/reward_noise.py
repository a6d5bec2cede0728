"""How noisy the bandit's reward is (docs/notes/pergrad.md, "Rewards compared on the log scale").

Fixed HMC settings (BlackJAX, no jitter) under the default warm-up's metric; per setting one
run of 4 chains x 40 consecutive blocks of ``block`` draws (a tuning super-transition's size);
per block the robust reward (`adaptmc.objectives`: x, x^2, tails; Geyer), its bulk-only
variant and the lag-one one, against the whole run's robust ESS per 1000 gradients.

Usage: python scripts/reward_noise.py pdb-gp_pois_regr-gp_regr [block, default 60]
"""

import sys

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
from scipy.stats import spearmanr

from adaptmc import objectives
from adaptmc.adaptation import early
from adaptmc.adaptation.low_rank import low_rank_dense
from adaptmc.diagnostics import robust_ess
from adaptmc_lab.bench.samplers import initial_positions
from adaptmc_lab.targets import get_target

BLOCKS = 40


def rewards(x: np.ndarray, num_leapfrog: int) -> dict:
    """Per-1000-gradient rewards of one block ``x: (chains, draws, dim)``."""
    z = objectives.standardised(x)
    x1, x2 = objectives.geyer_fractions(z), objectives.geyer_fractions(z**2)
    low, high = objectives.tail_indicators(z)
    tails = np.minimum(objectives.geyer_fractions(low), objectives.geyer_fractions(high))
    per = 1000.0 / num_leapfrog
    return {"robust": per * np.min(np.minimum.reduce([x1, x2, tails])),
            "bulk": per * np.min(np.minimum(x1, x2)),
            "lag1": per * np.min(np.minimum(*objectives.lag_one_fractions(z)))}


def chains(target, inverse_mass, positions, eps: float, num_leapfrog: int, draws: int):
    kernel = blackjax.hmc(target.logdensity, step_size=eps, inverse_mass_matrix=inverse_mass,
                          num_integration_steps=num_leapfrog)

    def one(state, key):
        state, info = kernel.step(key, state)
        return state, (state.position, info.is_divergent)

    @jax.jit
    def chain(position, key):
        return jax.lax.scan(one, kernel.init(position), jax.random.split(key, draws))[1]

    xs, divergent = jax.vmap(chain)(jnp.asarray(positions),
                                    jax.random.split(jax.random.key(7), len(positions)))
    return np.asarray(xs), int(np.sum(divergent))


def main(name: str, block: int) -> None:
    jax.config.update("jax_enable_x64", True)
    target = get_target(name)
    warm = early.early_warmup(target, initial_positions(target, 1, 4, 0.5), jax.random.key(1),
                              progress=False)
    inverse_mass = warm.inverse_mass if isinstance(warm.inverse_mass, np.ndarray) \
        else low_rank_dense(warm.inverse_mass)
    print(name, "metric", warm.metric, "eps", round(warm.step_size, 3))
    rows = []
    for eps in warm.step_size * np.array([0.25, 0.5, 1.0, 1.5]):
        for steps in (1, 2, 3, 5, 8):
            xs, divergences = chains(target, jnp.asarray(inverse_mass), warm.positions, eps,
                                     steps, block * BLOCKS)
            truth = float(np.min(robust_ess(xs))) / (xs.shape[0] * xs.shape[1] * steps) * 1000
            blocks = [rewards(xs[:, i * block:(i + 1) * block], steps) for i in range(BLOCKS)]
            row = {"truth": truth, **{k: (np.mean([b[k] for b in blocks]),
                                          np.std([b[k] for b in blocks])) for k in blocks[0]}}
            rows.append(row)
            print(f"eps {eps:.3f} L {steps}: truth {truth:7.1f} divergences {divergences:4d} | "
                  + " | ".join(f"{k} {row[k][0]:6.1f} +/- {row[k][1]:5.1f}" for k in blocks[0]),
                  flush=True)
    truth = [r["truth"] for r in rows]
    for k in ("robust", "bulk", "lag1"):
        ratio = np.median([r[k][0] / max(r[k][1], 1e-9) for r in rows])
        print(k, "Spearman(block mean, truth)", round(spearmanr([r[k][0] for r in rows],
                                                                 truth)[0], 3),
              "median mean/sd of a block", round(float(ratio), 2))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 60)
