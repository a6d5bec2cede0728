"""GP-bandit-tuned HMC against the oracle (the best fixed (eps, L) of an exhaustive grid over
the same box) and BlackJAX NUTS, in ESS per gradient evaluation, tuning included.

For each target:

1. *Oracle grid*: every point of a log-spaced grid over the box runs fixed-parameter HMC
   (4 chains, the same super-transition budget); the point with the highest robust min ESS per
   gradient is the oracle. To avoid the winner's curse, the oracle's figure is re-measured
   on fresh seeds with the same total budget as the tuned run.
2. *Tuned*: HMC tuned online by GP-UCB (Wang 2012, Algorithm 3; annealed adoption) over the
   same box, once per reward in ``REWARDS`` (ESJD per gradient, and ESJD / sqrt(L) of Wang,
   Mohamed & de Freitas 2013) on the same seeds; its robust min ESS (post burn-in draws) is
   divided by **all** gradient evaluations of the run, the tuning's included.
3. *NUTS*: BlackJAX NUTS with window adaptation; warm-up gradients counted.

Medians over seeds; the tuner's overhead is the share of wall time spent in ``propose`` and
``update``.

Protocol choices, the same for the oracle and the tuned runs:

- Every HMC run jitters the step size by ``U(1 - 0.2, 1 + 0.2)`` per trajectory (Neal 2011,
  Sec. 5.4.2.2; ``HMC_JITTER``). Without it a fixed ``(eps, L)`` resonates with some of the
  100 scales of neal-100d (a coordinate whose trajectory returns near its start), and the min
  ESS of the grid's and the tuner's settings is a matter of luck: at (0.0143, 109) the
  min bulk-ESS per gradient is 5.9e-6 without jitter and 8.1e-4 with it.
- The first ``num_warmup`` super-transitions (20 % of the run) are burn-in: their draws are
  dropped and their gradients counted, for the oracle as for the tuned run. The bandit does
  most of its exploring there; its annealed adoption keeps going afterwards.
- The bandit searches the box in log coordinates (`adaptmc.recipes.hmc_box` with
  ``log=True``), as the oracle's grid is log-spaced over it: the same box, with each decade
  of ``eps`` and ``L`` given the same share. In linear coordinates the good region of
  gauss-2d-v2 (``eps`` near 1, ``L`` in 2..7 of 1..100) is 5 % of the ``L`` axis, less than a
  GP lengthscale, and GP-UCB settled on ``L = 1`` (tuned/oracle 0.15).
- Wall times (ESS per second, tuner share) exclude XLA compilation, for HMC and for NUTS.
  The tuner share is the time in ``propose`` and ``update`` (GP fit and DIRECT search of the
  acquisition); the objective's time is reported apart.

Two protocols (``mass_warmup``):

- *unit mass* (``mass_warmup=0``): HMC with the identity mass matrix; per-target boxes
  (``BOXES``), since the scales of the targets differ by 100x.
- *whitened* (``mass_warmup=MASS_WARMUP``): every HMC run, oracle and tuned alike, starts with
  the mass warm-up of `adaptmc.tuners.mass` (diagonal, Stan-like doubling windows) for
  ``mass_warmup`` super-transitions inside the burn-in, then runs its (eps, L), fixed or
  tuned, over the default box (`adaptmc.recipes.hmc_box`, eps in [0.01, 1], L in [1, 100]) for
  every target. The oracle grid itself runs with a diagonal inverse mass estimated once per
  target (`whitening_mass`); its winner is then re-measured with the full protocol, mass
  adaptation included. This is what the ``bandit-hmc`` recipe does, and what NUTS's window
  adaptation does for NUTS.

Every HMC run is built by the ``manual`` recipe (`adaptmc.recipes.manual`) and run by
`adaptmc.api.run_plan`; NUTS is `adaptmc_lab.baselines.nuts`. ESS everywhere is the robust min ESS
(`adaptmc.diagnostics.robust_ess`).
"""

from __future__ import annotations

import time
from pathlib import Path

import jax
import numpy as np

from adaptmc import diagnostics

# the whitened protocol's box for every target: `adaptmc.recipes.hmc_box`'s defaults
DEFAULT_BOX = ((0.01, 1.0), (1, 100))
# the unit-mass protocol's boxes, target: (eps box, L box)
BOXES = {
    "gauss-2d-v1": ((0.01, 0.5), (1, 100)),
    "gauss-2d-v2": ((0.01, 1.0), (1, 100)),
    "neal-100d": ((0.001, 0.025), (1, 300)),
    "logistic-german": ((0.005, 0.3), (1, 100)),
}


def _min_ess(idata) -> float:
    """The robust min ESS of the kept draws (`adaptmc.diagnostics.robust_ess`)."""
    return float(diagnostics.robust_ess(idata.posterior["x"].values).min())


MASS_WARMUP = 15
HMC_JITTER = 0.2
OBJECTIVE = "esjd"
# GP-UCB rewards compared on the same seeds: ESJD per gradient, and the ESJD / sqrt(L) of
# Wang, Mohamed & de Freitas (2013), which favours longer trajectories
REWARDS = ("esjd", "esjd-sqrt-l")


def _metric(mass_warmup: int, dense: bool) -> str | None:
    """The ``manual`` recipe's ``adapt_mass``: None without a mass warm-up."""
    return ("dense" if dense else "diag") if mass_warmup else None


def _run(target, plan, seed: int):
    from adaptmc.api import run_plan

    return run_plan(target, plan, chains=4, seed=seed, progress=False)


def oracle_grid(target, box, budget, num_st, seed, points=8, inverse_mass=1.0):
    """Robust min ESS per gradient of fixed-setting HMC (the ``manual`` recipe, one burn-in
    super-transition) at every point of a ``points x points`` log grid over ``box``;
    returns (rows, best)."""
    from adaptmc import recipes

    (eps_lo, eps_hi), (l_lo, l_hi) = box
    eps_values = np.geomspace(eps_lo, eps_hi, points)
    l_values = np.unique(np.round(np.geomspace(l_lo, l_hi, points)).astype(int))
    rows = []
    for eps in eps_values:
        for num_leapfrog in l_values:
            if num_leapfrog > budget:
                continue
            plan = recipes.manual(target, kernel="hmc", step_size=float(eps),
                                  num_leapfrog=int(num_leapfrog), jitter=HMC_JITTER,
                                  inverse_mass=inverse_mass, tuner="fixed", objective=None,
                                  warmup=1, super_transitions=num_st, budget=budget, seed=seed)
            result = _run(target, plan, seed)
            divergences = int(result.idata.sample_stats.diverging.sum())
            rows.append({"step_size": float(eps), "num_leapfrog": int(num_leapfrog),
                         "ess_per_grad": _min_ess(result.idata) / result.num_grads,
                         "divergences": divergences})
    best = max(rows, key=lambda r: r["ess_per_grad"])
    return rows, best


def whitening_mass(target, budget, mass_warmup, seed, dense=False):
    """An inverse mass for the oracle grid of the whitened protocol: the posterior variances
    (``dense``: covariance) of the draws of a mass-adapted run (the ``manual`` recipe:
    ``mass_warmup`` warm-up super-transitions, then 10 more)."""
    from adaptmc import recipes

    plan = recipes.manual(target, kernel="hmc", jitter=HMC_JITTER, tuner="fixed",
                          objective=None, adapt_mass=_metric(mass_warmup, dense),
                          warmup=mass_warmup, mass_warmup=mass_warmup,
                          super_transitions=mass_warmup + 10, budget=budget, seed=seed)
    result = _run(target, plan, seed)
    draws = result.idata.posterior["x"].values.reshape(-1, target.dim)
    return np.cov(draws.T).reshape(target.dim, target.dim) if dense else draws.var(axis=0)


def tuned_plan(target, box, budget, num_st, num_warmup, seed, objective_name=OBJECTIVE,
               mass_warmup=0, dense=False, freeze=False):
    """GP-UCB over ``box`` in log ``(eps, L)`` (the ``manual`` recipe), after
    ``mass_warmup`` super-transitions of mass warm-up whose terminal window warm-starts it;
    ``freeze``: its best setting from the end of the burn-in on."""
    from adaptmc import recipes

    tuner_box = recipes.hmc_box(step_size=box[0], num_leapfrog=box[1], log=True)
    return recipes.manual(target, kernel="hmc", jitter=HMC_JITTER, tuner="gp-ucb",
                          box=tuner_box, objective=objective_name, warmup=num_warmup,
                          adapt_until=num_warmup if freeze else None,
                          adapt_mass=_metric(mass_warmup, dense),
                          mass_warmup=mass_warmup, super_transitions=num_st,
                          budget=budget, seed=seed)


def tuned_run(target, box, budget, num_st, num_warmup, seed, objective_name=OBJECTIVE,
              mass_warmup=0, dense=False, freeze=False):
    """One run of `tuned_plan`: robust min ESS per gradient (all counted) and per second
    (compilation excluded), the tuner's and the objective's shares of the wall time, the
    settings it ran after the burn-in."""
    plan = tuned_plan(target, box, budget, num_st, num_warmup, seed, objective_name,
                      mass_warmup, dense, freeze)
    tick = time.perf_counter()
    result = _run(target, plan, seed)
    wall = time.perf_counter() - tick - result.compile_s
    tuning = result.idata.tuning
    steps, lengths = tuning.step_size.values, tuning.num_leapfrog.values
    return {
        "ess_per_grad": _min_ess(result.idata) / result.num_grads,
        "ess_per_s": _min_ess(result.idata) / wall,
        "grads": result.num_grads,
        "wall_s": wall,
        "tuner_share": float(tuning.tuner_s.sum() / wall),
        "objective_share": float(tuning.objective_s.sum() / wall),
        "objective": objective_name,
        "after_burn_in": sorted({(round(float(a), 5), int(b)) for a, b in zip(
            steps[num_warmup:], lengths[num_warmup:], strict=True)}),
        "final": {"step_size": float(steps[-1]), "num_leapfrog": int(lengths[-1])},
        "distinct": int(len({(a, b) for a, b in zip(steps, lengths, strict=True)})),
    }


def fixed_run(target, params, budget, num_st, num_warmup, seed, mass_warmup=0, dense=False):
    """The oracle's setting re-measured with the full protocol (the ``manual`` recipe): the
    mass warm-up, if any, then the setting as a one-point grid; robust min ESS per gradient
    and per second (compilation excluded)."""
    from adaptmc import recipes

    if mass_warmup:
        point = {"step_size": [params["step_size"]], "num_leapfrog": [params["num_leapfrog"]]}
        plan = recipes.manual(target, kernel="hmc", jitter=HMC_JITTER, tuner="grid",
                              grid=point, objective=None, adapt_mass=_metric(mass_warmup, dense),
                              warmup=num_warmup, mass_warmup=mass_warmup,
                              super_transitions=num_st, budget=budget, seed=seed)
    else:
        plan = recipes.manual(target, kernel="hmc", step_size=params["step_size"],
                              num_leapfrog=params["num_leapfrog"], jitter=HMC_JITTER,
                              tuner="fixed", objective=None, warmup=num_warmup,
                              super_transitions=num_st, budget=budget, seed=seed)
    tick = time.perf_counter()
    result = _run(target, plan, seed)
    wall = time.perf_counter() - tick - result.compile_s
    return {"ess_per_grad": _min_ess(result.idata) / result.num_grads,
            "ess_per_s": _min_ess(result.idata) / wall}


def nuts_run(target, num_warmup, num_draws, seed, num_chains=4, dense=False):
    """BlackJAX NUTS (`adaptmc_lab.baselines.nuts`): window adaptation, ``num_chains`` chains from
    the target's initial position; gradients counted exactly, warm-up included; wall time of
    the compiled warm-up and sampling (compilation excluded, as for HMC)."""
    from adaptmc_lab.baselines import nuts

    result = nuts(target, seed, num_chains=num_chains, num_warmup=num_warmup,
                  num_draws=num_draws, dense=dense)
    ess = diagnostics.robust_ess(result.positions).min()
    grads = result.total_grads
    return {"ess_per_grad": float(ess / grads), "ess_per_s": float(ess / result.wall_s),
            "grads": grads, "wall_s": result.wall_s}


def run_tuned_vs_oracle(out, quick=False, force=False, seed=0, targets=None,
                        mass_warmup=MASS_WARMUP, dense=False, freeze=False) -> int:
    """``adaptmc-lab reproduce tuned-vs-oracle``; ``mass_warmup=0`` runs the unit-mass protocol
    with the per-target boxes, otherwise the whitened one over the default box (``dense``:
    dense mass matrices, for HMC and NUTS alike; ``freeze``: the bandit stops adapting at the
    end of the burn-in and runs its best setting, as the README's main job does)."""
    from adaptmc.io import create_output_dir, prepare_output_dir, write_json
    from adaptmc_lab.targets import get_target

    jax.config.update("jax_enable_x64", True)
    path = prepare_output_dir(out, force=force)
    create_output_dir(path, force=force)
    names = targets or (["gauss-2d-v1", "neal-100d"] if quick else list(BOXES))
    budget, num_st, num_warmup = (500, 40, 20) if quick else (2000, 150, 30)
    if mass_warmup:
        mass_warmup = min(mass_warmup, num_warmup - 5)
    seeds = [seed] if quick else [seed, seed + 1, seed + 2]
    grid_points = 4 if quick else 8
    results = {}
    for name in names:
        target = get_target(name)
        box = DEFAULT_BOX if mass_warmup else BOXES[name]
        inverse_mass = whitening_mass(target, budget, mass_warmup, seed + 50, dense) \
            if mass_warmup else 1.0
        print(f"[{name}] oracle grid ({grid_points}x{grid_points}) ...", flush=True)
        grid_rows, best = oracle_grid(target, box, budget, 10, seed + 100, grid_points,
                                      inverse_mass)
        print(f"[{name}] oracle eps={best['step_size']:.4g} L={best['num_leapfrog']}; "
              "re-measuring, tuned runs and NUTS ...", flush=True)
        oracle = [fixed_run(target, best, budget, num_st, num_warmup, s + 200, mass_warmup,
                            dense)
                  for s in seeds]
        tuned = {reward: [tuned_run(target, box, budget, num_st, num_warmup, s + 300, reward,
                                    mass_warmup, dense, freeze)
                          for s in seeds] for reward in REWARDS}
        # NUTS gets the same number of draws per chain as a sampling phase of ~1000 draws
        nuts = [nuts_run(target, 1000, 1000 if quick else 2000, s + 400, dense=dense)
                for s in seeds]
        results[name] = {"box": box, "grid": grid_rows, "oracle_point": best,
                         "oracle": oracle, "tuned": tuned, "nuts": nuts,
                         "mass_warmup": mass_warmup, "dense": dense, "freeze": freeze}
        med = {k: float(np.median([r["ess_per_grad"] for r in results[name][k]]))
               for k in ("oracle", "nuts")}
        for reward in REWARDS:
            t = float(np.median([r["ess_per_grad"] for r in tuned[reward]]))
            print(f"[{name}] min-ESS/grad: tuned ({reward}) {t:.4g}  oracle {med['oracle']:.4g}  "
                  f"NUTS {med['nuts']:.4g}  (tuned/oracle {t / med['oracle']:.2f})", flush=True)
        write_json(Path(path, "tuned_vs_oracle.json"), results)
    table = markdown(results, budget, num_st, len(seeds), num_warmup, mass_warmup, dense,
                     freeze)
    Path(path, "tuned_vs_oracle.md").write_text(table + "\n")
    print(table)
    return 0


def markdown(results, budget, num_st, num_seeds, num_warmup=0, mass_warmup=0,
             dense=False, freeze=False) -> str:
    kind = "dense" if dense else "diagonal"
    mass = (f"{kind} mass adaptation in the first {mass_warmup} super-transitions, then (eps, L)"
            " over eps in [0.01, 1], L in [1, 100]" if mass_warmup else
            "unit mass, per-target boxes")
    if freeze:
        mass += "; the bandit frozen at its best setting after the burn-in"
    lines = [
        f"Budget: 4 chains x {num_st} super-transitions x {budget} gradients, the first "
        f"{num_warmup} burn-in (draws dropped, gradients counted) for oracle and tuned alike; "
        f"{mass}; "
        f"HMC step size jittered by +-{HMC_JITTER:.0%}; GP-UCB in log (eps, L) "
        f"(tuned final (eps, L): first seed); medians over {num_seeds} seed(s); "
        "ESS = robust min ESS (per coordinate the least of bulk-ESS of x, of x^2 and tail-ESS; "
        "then the least over coordinates); wall times exclude compilation.",
        "",
        "| target | reward | oracle (eps, L) | tuned final (eps, L) | min-ESS/1000 grads: "
        "tuned | oracle | NUTS | tuned / oracle | tuned / NUTS | min-ESS/s: tuned | NUTS "
        "| tuner share of wall | objective share |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        def med(runs, key):
            return float(np.median([x[key] for x in runs]))

        o, n = med(r["oracle"], "ess_per_grad"), med(r["nuts"], "ess_per_grad")
        for reward, runs in r["tuned"].items():
            t = med(runs, "ess_per_grad")
            final = runs[0]["final"]
            lines.append(
                f"| {name} | {reward} | ({r['oracle_point']['step_size']:.3g}, "
                f"{r['oracle_point']['num_leapfrog']}) | ({final['step_size']:.3g}, "
                f"{final['num_leapfrog']}) | {1000 * t:.3g} | {1000 * o:.3g} | {1000 * n:.3g} | "
                f"{t / o:.2f} | {t / n:.2f} | {med(runs, 'ess_per_s'):.3g} | "
                f"{med(r['nuts'], 'ess_per_s'):.3g} | {100 * med(runs, 'tuner_share'):.2f}% "
                f"| {100 * med(runs, 'objective_share'):.2f}% |"
            )
    return "\n".join(lines)

