"""References for the lab's posteriordb posteriors without published draws
(`adaptmc_lab.datasets.posteriordb_extra`): long runs of two different samplers on the Stan
program, nutpie's NUTS with its low-rank metric (`adaptmc_lab.baselines.nutpie.nutpie_pyfunc`)
and BlackJAX NUTS with a diagonal metric (`adaptmc_lab.baselines.nuts`), kept only when they
agree (`agreement`: the rule in `AGREEMENT`). Compared on what the bench's accuracy columns
read for these targets (`adaptmc_lab.bench.quantities`): the constrained values of the
``parameters`` block, less the ones that never vary (a Cholesky factor's zeros).

The kept reference pools the two runs: the mean of the two means, the sd of all draws, and
the MCSE of that mean, ``sqrt(mcse_a^2 + mcse_b^2) / 2`` (ArviZ's MCSE of each run's mean,
Vehtari et al. 2021)."""

from __future__ import annotations

import platform
import time
import warnings
from collections.abc import Callable
from importlib.metadata import version

import numpy as np

from adaptmc_lab.bench.config import initial_positions
from adaptmc_lab.bench.references import mean_mcse

REFERENCE_RUN = {"num_chains": 4, "num_warmup": 1000, "num_draws": 5000, "init_jitter": 2.0,
                 "seed": 20261127}
"""Per sampler: 4 chains of 5000 draws after 1000 warm-up transitions, from the target's start
plus ``U(-2, 2)`` per coordinate (Stan's default spread of inits), the same starts for both
samplers. With a robust ESS of ~2000 or more, a mean's MCSE is ~1/45 of its sd or less."""

AGREEMENT = {"max_rhat": 1.01, "max_z": 4.5, "min_ess": 400}
"""Two runs agree when the rank-normalised split R-hat of every quantity over the 8 chains
of both (4 + 4) is below ``max_rhat``, every difference of means is within ``max_z`` combined
MCSEs (``|mean_a - mean_b| <= max_z sqrt(mcse_a^2 + mcse_b^2)``; 4.5 keeps the chance of
a false alarm below 1 % over 900 quantities) and each run's smallest robust ESS (bulk of x, of
x^2, tail) is at least ``min_ess`` (below it the MCSEs themselves are unreliable)."""

SAMPLERS = ("nutpie-low-rank", "blackjax-nuts")


def compared_quantities(target, positions: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Names and ``(chains, draws, k)`` values of the ``parameters`` block's constrained
    values at ``positions: (chains, draws, dim)``, in Stan's flat 1-based names."""
    from adaptmc.targets.named_draws import constrained_draws

    model = target.info["stan_model"]
    bases = {v.name for v in model.variables if v.block == "parameters"}
    named = constrained_draws(target, positions)
    names = [n for n in named if n.split("[")[0] in bases]
    return names, np.stack([np.asarray(named[n], dtype=float) for n in names], axis=-1)


def summary(values: np.ndarray) -> dict:
    """Mean, sd, MCSE of the mean, robust ESS and R-hat of each quantity of ``values:
    (chains, draws, k)``."""
    from adaptmc import diagnostics

    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")
        return {"mean": values.mean(axis=(0, 1)), "sd": values.std(axis=(0, 1), ddof=1),
                "mcse": mean_mcse(values), "ess": diagnostics.robust_ess(values),
                "rhat": diagnostics.rhat(values)}


def reference_starts(target, settings: dict = REFERENCE_RUN) -> np.ndarray:
    """``(num_chains, dim)`` starts: the target's start plus ``U(-j, j)`` for ``j`` the
    settings' ``init_jitter``, halved until every start has a finite log density (a
    program whose density overflows far out; the same starts for both samplers)."""
    jitter = settings["init_jitter"]
    for _ in range(6):
        try:
            return initial_positions(target, settings["seed"], settings["num_chains"], jitter)
        except ValueError:
            jitter /= 2
    return initial_positions(target, settings["seed"], settings["num_chains"], 0.0)


def run_sampler(target, sampler: str, settings: dict = REFERENCE_RUN) -> dict:
    """One long run: ``positions: (chains, draws, dim)``, gradients (all chains, warm-up
    included), seconds (``wall_s`` all of it, ``sampling_s`` less the compilation), the
    sampler's package and version."""
    starts = reference_starts(target, settings)
    sizes = {k: settings[k] for k in ("num_chains", "num_warmup", "num_draws")}
    tick = time.perf_counter()
    if sampler == "nutpie-low-rank":
        from adaptmc_lab.baselines.nutpie import nutpie_pyfunc

        run = nutpie_pyfunc(target, settings["seed"], initial_positions=starts,
                            low_rank=True, **sizes)
        positions, grads, package = run.positions, run.num_grads, "nutpie"
    elif sampler == "blackjax-nuts":
        from adaptmc_lab.baselines import nuts

        run = nuts(target, settings["seed"], initial_positions=starts, **sizes)
        positions = run.positions
        grads, package = int(np.sum(run.warmup_grads)) + run.sampling_grads, "blackjax"
    else:
        raise ValueError(f"unknown reference sampler {sampler!r}; choose from {SAMPLERS}")
    return {"positions": np.asarray(positions, dtype=float), "gradients": int(grads),
            "wall_s": time.perf_counter() - tick, "sampling_s": float(run.wall_s),
            "version": f"{package} {version(package)}"}


def agreement(a: dict, b: dict, pooled_rhat: np.ndarray, names: list[str],
              rule: dict = AGREEMENT, labels: tuple[str, str] = SAMPLERS) -> dict:
    """Whether two runs' summaries (`summary`) agree by ``rule`` (`AGREEMENT`), with the
    figures it checked and, when they do not, what disagreed (the runs named by
    ``labels``)."""
    z = np.abs(a["mean"] - b["mean"]) / np.sqrt(a["mcse"] ** 2 + b["mcse"] ** 2)
    z = np.where(np.isfinite(z), z, np.inf)
    rhat = np.where(np.isfinite(pooled_rhat), pooled_rhat, np.inf)
    ess = {labels[0]: float(np.min(a["ess"])), labels[1]: float(np.min(b["ess"]))}
    failures = []
    if np.max(rhat) >= rule["max_rhat"]:
        failures.append(f"pooled R-hat {np.max(rhat):.3f} on {names[int(np.argmax(rhat))]}"
                        f" ({int(np.sum(rhat >= rule['max_rhat']))} of {len(names)} >= "
                        f"{rule['max_rhat']})")
    if np.max(z) > rule["max_z"]:
        failures.append(f"means {np.max(z):.1f} combined MCSEs apart on "
                        f"{names[int(np.argmax(z))]} ({int(np.sum(z > rule['max_z']))} of "
                        f"{len(names)} beyond {rule['max_z']})")
    failures += [f"robust ESS {value:.0f} < {rule['min_ess']} in the {run} run"
                 for run, value in ess.items() if value < rule["min_ess"]]
    return {"rule": dict(rule), "agree": not failures, "disagreements": failures,
            "max_pooled_rhat": float(np.max(rhat)), "worst_rhat": names[int(np.argmax(rhat))],
            "max_z": float(np.max(z)), "worst_z": names[int(np.argmax(z))],
            "min_ess": ess}


def make_reference(target, name: str, settings: dict = REFERENCE_RUN,
                   log: Callable[[str], None] = print) -> dict:
    """The reference record of posterior ``name`` from the two runs of `SAMPLERS` on
    ``target`` (its Stan program): each run's sizes, seed, version, gradients, seconds and
    per-quantity summary, their `agreement`, and the pooled reference when they agree."""
    from adaptmc import diagnostics

    runs, values = {}, []
    for sampler in SAMPLERS:
        log(f"{name}: {sampler}, {settings['num_chains']} chains x "
            f"({settings['num_warmup']} + {settings['num_draws']})")
        run = run_sampler(target, sampler, settings)
        names, quantity = compared_quantities(target, run.pop("positions"))
        values.append(quantity)
        runs[sampler] = {**run, **{k: v for k, v in summary(quantity).items()}}
        log(f"{name}: {sampler} done in {run['wall_s']:.0f} s, {run['gradients']} gradients,"
            f" min robust ESS {np.min(runs[sampler]['ess']):.0f}")
    pooled = np.concatenate(values, axis=0)
    varies = np.ptp(pooled, axis=(0, 1)) > 0
    names = [n for n, keep in zip(names, varies, strict=True) if keep]
    pooled = pooled[..., varies]
    for run in runs.values():
        for key in ("mean", "sd", "mcse", "ess", "rhat"):
            run[key] = np.asarray(run[key])[varies]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pooled_rhat = diagnostics.rhat(pooled)
    a, b = (runs[s] for s in SAMPLERS)
    check = agreement(a, b, pooled_rhat, names)
    record = {"posterior": name, "target": f"stan-{name}", "names": names,
              "status": "reference" if check["agree"] else "no reference",
              "agreement": check, "settings": dict(settings), "samplers": list(SAMPLERS),
              "runs": runs, "pooled_rhat": pooled_rhat, "machine": platform.platform()}
    if check["agree"]:
        record.update(mean=(a["mean"] + b["mean"]) / 2,
                      sd=pooled.reshape(-1, len(names)).std(axis=0, ddof=1),
                      mcse=np.sqrt(a["mcse"] ** 2 + b["mcse"] ** 2) / 2)
    return record


BORROWED = {"eight_schools-eight_schools_centered": "eight_schools-eight_schools_noncentered"}
"""Posteriors that are the same distribution as one with posteriordb reference draws (the
centred eight schools is the non-centred one's ``(theta, mu, tau)``, Rubin 1981)."""


def borrowed_reference(name: str) -> dict:
    """The reference record of posterior ``name`` from posteriordb's published reference of
    the posterior `BORROWED` names (10 chains x 1000 thinned Stan NUTS draws, Magnusson et al.
    2024), in ``name``'s parameter order: no runs, since the same distribution."""
    from adaptmc.datasets.posteriordb import load_posterior
    from adaptmc.targets.posteriordb import posterior_reference

    source = BORROWED[name]
    ref = posterior_reference(load_posterior(source))
    return {"posterior": name, "target": f"stan-{name}", "names": list(ref.names),
            "status": "reference", "mean": ref.mean, "sd": ref.sd, "mcse": ref.mcse,
            "agreement": {"agree": True, "source": f"posteriordb reference draws of {source}",
                          "why": "the same distribution over (theta, mu, tau): the non-centred "
                                 "program's theta is mu + tau * theta_trans"},
            "samplers": ["posteriordb (Stan NUTS)"], "runs": {}}
