"""The README's main job (mass adaptation, then GP-UCB over (eps, L) with the ESJD/sqrt(L)
reward, on Neal's 100-d Gaussian) against BlackJAX NUTS with window adaptation, over seeds,
in min bulk-ESS per 1000 gradient evaluations (all tuning and warm-up counted)."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np


def run_main_vs_nuts(out, quick: bool = False, force: bool = False, seed: int = 0,
                     keep_adapting: bool = False) -> int:
    """The README's first command (the bandit frozen at its best setting after the 30 burn-in
    super-transitions, ``--adapt-until 30``) against NUTS, seeds ``seed..seed+4``;
    ``keep_adapting`` lets the bandit go on adopting (with annealed probability) instead."""
    from adaptmc import diagnostics, recipes, tuners
    from adaptmc.baselines import nuts
    from adaptmc.io import create_output_dir, prepare_output_dir, write_json
    from adaptmc.kernels import HMCParams, hmc
    from adaptmc.objectives import OBJECTIVES
    from adaptmc.run import run
    from adaptmc.targets import get_target
    from adaptmc.tuners.mass import mass_adaptation

    jax.config.update("jax_enable_x64", True)
    path = prepare_output_dir(out, force=force)
    create_output_dir(path, force=force)
    target = get_target("neal-100d")
    rows = []
    for s in range(seed, seed + (1 if quick else 5)):
        tuner = mass_adaptation(tuners.gp_ucb(recipes.hmc_box()), target.dim, 10,
                                warm_start=True)
        result = run(target, hmc, HMCParams(jitter=0.2), tuner=tuner,
                     objective=OBJECTIVES["esjd-sqrt-l"], num_super_transitions=80,
                     gradient_budget=2000, num_chains=4, num_warmup=30,
                     adapt_until=None if keep_adapting else 30, seed=s, progress=False)
        ess = float(diagnostics.ess(result.idata.posterior["x"].values).min())
        final = result.idata.tuning
        reference_run = nuts(target, s + 400, num_chains=4, num_warmup=1000, num_draws=2000)
        nuts_ess = float(diagnostics.ess(reference_run.positions).min())
        rows.append({"seed": s, "adaptmc": 1000 * ess / result.num_grads,
                     "nuts": 1000 * nuts_ess / reference_run.total_grads,
                     "final": (float(final.step_size.values[-1]),
                               int(final.num_leapfrog.values[-1]))})
        print(f"seed {s}: adaptmc {rows[-1]['adaptmc']:.3g}  NUTS {rows[-1]['nuts']:.3g} "
              "min-ESS per 1000 gradients", flush=True)
    lines = ["| seed | adaptmc main job | BlackJAX NUTS | ratio | final (eps, L) |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['seed']} | {r['adaptmc']:.3g} | {r['nuts']:.3g} | "
                     f"{r['adaptmc'] / r['nuts']:.2f} | ({r['final'][0]:.3g}, {r['final'][1]}) |")
    a = np.array([[r["adaptmc"], r["nuts"]] for r in rows])
    lines.append(f"| median | {np.median(a[:, 0]):.3g} | {np.median(a[:, 1]):.3g} | "
                 f"{np.median(a[:, 0] / a[:, 1]):.2f} | |")
    table = "\n".join(lines)
    write_json(Path(path, "main_vs_nuts.json"), rows)
    Path(path, "main_vs_nuts.md").write_text(table + "\n")
    print(table)
    return 0
