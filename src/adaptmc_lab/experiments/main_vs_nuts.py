"""The README's main job against NUTS.

The README's main job is ``adaptmc sample --target neal-100d`` with no other option: the
default recipe ``adaptive-hmc`` (`adaptmc.recipes.adaptive_hmc`), 4 chains. It is compared
with BlackJAX NUTS (Hoffman & Gelman 2014; Stan's window adaptation, 1000 warm-up and 1000
draws per chain, 4 chains, `adaptmc_lab.baselines.nuts`) and with the first README recipe
``bandit-hmc`` (`adaptmc.recipes.bandit_hmc`), over seeds, all three from the same starting
positions (`adaptmc.run.default_positions`).

Efficiency is the robust min ESS (`adaptmc.diagnostics.robust_ess`: per coordinate the
smallest of the bulk-ESS of ``x``, of ``x^2`` and the tail-ESS of ``x``; then the minimum
over coordinates), per 1000 gradient evaluations, all counted (warm-up, tuning and the
recipe's own warm-up included), and per second of wall time, everything included: from the
call to the InferenceData, XLA compilation included (JAX's caches are cleared before every
row, so each sampler compiles on every seed).
"""

from __future__ import annotations

import time
from pathlib import Path

import jax
import numpy as np

TARGET = "neal-100d"
NUM_CHAINS = 4
SAMPLERS = ("adaptive-hmc", "bandit-hmc", "nuts")


def recipe_row(target, recipe: str, seed: int) -> dict:
    """Recipe ``recipe`` with its defaults (what ``adaptmc sample --recipe RECIPE`` runs)
    from `adaptmc.run.default_positions`; robust min ESS, gradients and wall time."""
    from adaptmc import recipes
    from adaptmc.api import run_plan
    from adaptmc.diagnostics import robust_ess
    from adaptmc.run import default_positions

    starts = default_positions(target, NUM_CHAINS, seed)
    tick = time.perf_counter()
    plan = recipes.build(recipe, target, seed=seed)
    result = run_plan(target, plan, chains=NUM_CHAINS, seed=seed, initial_positions=starts,
                      progress=False)
    wall = time.perf_counter() - tick
    ess = float(robust_ess(result.idata.posterior["x"].values).min())
    tuning = result.idata.tuning
    final = (float(tuning.step_size.values[-1]), int(tuning.num_leapfrog.values[-1]))
    return {"sampler": recipe, "seed": seed, "ess": ess, "grads": int(result.num_grads),
            "wall_s": wall, "final": final}


def nuts_row(target, seed: int, num_warmup: int = 1000, num_draws: int = 1000) -> dict:
    """BlackJAX NUTS from `adaptmc.run.default_positions`; the wall time runs from the call
    to the InferenceData, compilation included."""
    import arviz as az

    from adaptmc.diagnostics import robust_ess
    from adaptmc.run import default_positions
    from adaptmc_lab.baselines import nuts

    starts = default_positions(target, NUM_CHAINS, seed)
    tick = time.perf_counter()
    result = nuts(target, seed, num_chains=NUM_CHAINS, num_warmup=num_warmup,
                  num_draws=num_draws, initial_positions=starts)
    az.from_dict(posterior={"x": np.asarray(result.positions)})
    wall = time.perf_counter() - tick
    ess = float(robust_ess(result.positions).min())
    final = (float(np.median(result.step_size)), None)
    return {"sampler": "nuts", "seed": seed, "ess": ess, "grads": int(result.total_grads),
            "wall_s": wall, "final": final}


def run_main_vs_nuts(out, quick: bool = False, force: bool = False, seed: int = 0) -> int:
    """``adaptmc-lab reproduce main-vs-nuts``: seeds ``seed..seed+4`` (``quick``: ``seed`` only);
    the rows are written after every seed (``main_vs_nuts.json``), the table at the end."""
    from adaptmc.io import create_output_dir, prepare_output_dir, write_json
    from adaptmc_lab.targets import get_target

    jax.config.update("jax_enable_x64", True)
    path = prepare_output_dir(out, force=force)
    create_output_dir(path, force=force)
    target = get_target(TARGET)
    rows = []
    for s in range(seed, seed + (1 if quick else 5)):
        for sampler in SAMPLERS:
            jax.clear_caches()  # every row pays its own compilation, not only the first seed's
            row = nuts_row(target, s) if sampler == "nuts" else recipe_row(target, sampler, s)
            rows.append(row)
            print(f"seed {s} {sampler}: robust min ESS {row['ess']:.4g}, "
                  f"{row['grads']:,} gradients, {row['wall_s']:.1f} s", flush=True)
            write_json(Path(path, "main_vs_nuts.json"), rows)
    table = markdown(rows)
    Path(path, "main_vs_nuts.md").write_text(table + "\n")
    print(table)
    return 0


def markdown(rows: list[dict]) -> str:
    """Per seed and sampler: robust min ESS per 1000 gradients and per second, then the
    medians over seeds and their ratios to NUTS."""
    lines = ["| seed | sampler | robust min ESS | gradients | wall s (all) | "
             "ESS / 1000 grads | ESS / s | final (eps, L) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        eps, steps = r["final"]
        final = f"({eps:.3g}, {steps})" if steps is not None else f"eps {eps:.3g}"
        lines.append(f"| {r['seed']} | {r['sampler']} | {r['ess']:.4g} | {r['grads']:,} | "
                     f"{r['wall_s']:.1f} | {1000 * r['ess'] / r['grads']:.3g} | "
                     f"{r['ess'] / r['wall_s']:.3g} | {final} |")
    medians = {}
    for sampler in SAMPLERS:
        mine = [r for r in rows if r["sampler"] == sampler]
        if mine:
            medians[sampler] = (
                float(np.median([1000 * r["ess"] / r["grads"] for r in mine])),
                float(np.median([r["ess"] / r["wall_s"] for r in mine])))
    lines += ["", "| sampler | seeds | median ESS / 1000 grads | / NUTS | median ESS / s "
              "| / NUTS |", "|---|---|---|---|---|---|"]
    nuts = medians.get("nuts")
    for sampler, (per_grad, per_s) in medians.items():
        count = sum(r["sampler"] == sampler for r in rows)
        ratio_g = f"{per_grad / nuts[0]:.2f}" if nuts else "-"
        ratio_s = f"{per_s / nuts[1]:.2f}" if nuts else "-"
        lines.append(f"| {sampler} | {count} | {per_grad:.3g} | {ratio_g} | {per_s:.3g} | "
                     f"{ratio_s} |")
    return "\n".join(lines)
