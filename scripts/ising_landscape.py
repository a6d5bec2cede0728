"""The integrated autocorrelation time of the energy over a grid of ``(L, gamma)``: where the
tuners' choices sit against the settings they could have chosen.

Protocol of `adaptmc_lab.experiments.ising.run_model` for one model and seed: the same Kawasaki
burn-in, then for every setting of the grid as many unmeasured super-transitions as the
tuners spend tuning (as the expert does), then ``measure`` super-transitions measured; tau
in flips per effective draw of the energy (chains pooled, bulk ESS), with its ESS.

Usage: ``python scripts/ising_landscape.py spin-glass-3d 0 runs/glass-landscape.json``
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace

import jax

from adaptmc.kernels.discrete import kawasaki, saw
from adaptmc_lab.experiments import ising as ex
from adaptmc_lab.models import ising

LENGTHS = (1, 4, 12, 25)
GAMMAS = (0.3, 0.5, 0.7)
SIZES = {"measure": 100, "chains": 8, "burn_in": 4_000_000}


def landscape(name: str, seed: int) -> list[dict]:
    budget = replace(ex.FULL[name], **SIZES)
    target = ising.MODELS[name](seed=seed)
    saw_segment = ex.Segment(target, saw, budget.flips // 2 + 1)
    kawasaki_segment = ex.Segment(target, kawasaki, budget.flips // 2 + 1)
    key = jax.random.fold_in(jax.random.key(seed), 17)
    burned, _, _ = ex.burn_in(target, kawasaki_segment, key, budget, seed)
    states = jax.vmap(lambda x: saw.init(x, target))(burned.position)
    rows = []
    for length in LENGTHS:
        for gamma in GAMMAS:
            tick = time.perf_counter()
            params = ex.saw_params(length, gamma)
            setting_key = jax.random.fold_in(key, 1000 * length + int(1000 * gamma))
            chain, _ = ex.advance(saw_segment, setting_key, states, params, budget)
            out = ex.measure(saw_segment, jax.random.fold_in(setting_key, 9), chain, params,
                             budget)
            rows.append({"L": length, "gamma": gamma, "tau_flips": out["tau_flips"],
                         "ess": out["ess"], "acceptance": out["acceptance"],
                         "flips_per_s": out["flips_per_s"]})
            print(f"L={length:3d} gamma={gamma:.2f} tau {out['tau_flips']:10.0f} "
                  f"ESS {out['ess']:6.1f} acc {out['acceptance']:.2f} "
                  f"{out['flips_per_s']:8.0f} flips/s ({time.perf_counter() - tick:.0f} s)",
                  flush=True)
    return rows


if __name__ == "__main__":
    model, seed, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(path, "w") as handle:
        json.dump(landscape(model, seed), handle, indent=1)
