"""Reference posteriors the bench's accuracy columns compare with, as `Reference`s over the
quantities of `adaptmc_lab.bench.quantities`: the target's own (posteriordb's published
reference, Magnusson et al. 2024, from 10 x 1000 thinned Stan draws; the analytic moments of a
Gaussian, the funnel or the banana), the lab's own for the posteriordb posteriors without
published draws (``stan-<posterior>``, `adaptmc_lab.bench.extra_references`), a long NUTS
run (logistic regression, `nuts_reference`) or Neal's Gibbs-within-HMC (the BNN,
`bnn_reference`). Computed references are cached as JSON in `cache_dir` and refused when
their chains disagree (max R-hat above 1.01)."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from adaptmc.targets.base import Reference
from adaptmc_lab.bench.quantities import bnn_quantities, run_positions
from adaptmc_lab.datasets import posteriordb_extra

REFERENCE_RUN = {"num_chains": 8, "num_warmup": 1000, "num_draws": 5000, "seed": 20261122}
"""The long NUTS run behind `nuts_reference`: 40000 draws, so the reference MCSE of a mean is
about 1/140 of its sd (with ESS near the number of draws, as NUTS has on these posteriors)."""

BNN_REFERENCE_RUN = {"num_chains": 8, "num_super_transitions": 2400, "budget": 10000,
                     "step_size": 0.5, "num_leapfrog": 200, "jitter": 0.2, "seed": 20261122}
"""The Gibbs-within-HMC run behind `bnn_reference` (per chain: ``num_super_transitions``
super-transitions of ``budget`` gradients; the first quarter discarded). Settings: of (eps, L)
in {(0.5, 50), (0.5, 200), (0.5, 1000), (0.6, 100), (0.8, 300)}, each tried on 10^6
gradients per chain, (0.5, 200) had the largest smallest ESS of the network's outputs at
six test inputs (acceptance 0.7; at (0.5, 1000) and (0.8, 300) chains stuck). For those
outputs 2400 and 4000 super-transitions gave max R-hat 1.011 and 1.014, refused: the reason
`bnn_quantities` are errors averaged over many inputs. For those, 2400 super-transitions gave
max R-hat 1.004 and reference MCSEs of 0.6-2.4 % of the sds (36 minutes on one core)."""


def reference(target, log: Callable[[str], None] | None = None) -> Reference | None:
    """The `Reference` over the quantities `quantities` returns: ``target.reference`` when
    the target carries one, the lab's reference of a ``stan-<posterior>`` the lab ships
    (`adaptmc_lab.datasets.posteriordb_extra.load_reference`), a long NUTS run for logistic
    regression (`nuts_reference`), Neal's Gibbs-within-HMC for the BNN (`bnn_reference`,
    which reports its progress through ``log`` when it has to be computed), or None."""
    if target.reference is not None:
        return target.reference
    if target.name.startswith("stan-"):
        return posteriordb_extra.load_reference(target.name.removeprefix("stan-"))
    try:
        if target.name.startswith("logistic-"):
            return nuts_reference(target)
        if "bnn" in target.info and "test" in target.info:
            return bnn_reference(target, log=log)
    except RuntimeError as refusal:  # no trustworthy reference: no accuracy, no crash
        (log or (lambda text: warnings.warn(text, stacklevel=2)))(f"no reference: {refusal}")
    return None


def cache_dir() -> Path:
    """Where computed references are kept: ``$ADAPTMC_CACHE`` or ``~/.cache/adaptmc``."""
    return Path(os.environ.get("ADAPTMC_CACHE", Path.home() / ".cache" / "adaptmc"))


def nuts_reference(target, *, num_chains: int = REFERENCE_RUN["num_chains"],
                   num_warmup: int = REFERENCE_RUN["num_warmup"],
                   num_draws: int = REFERENCE_RUN["num_draws"],
                   seed: int = REFERENCE_RUN["seed"], directory: Path | None = None
                   ) -> Reference:
    """A reference posterior for a target without a published one: BlackJAX NUTS with window
    adaptation (`adaptmc_lab.baselines.nuts`, every chain from the target's initial position),
    ``num_chains`` chains of ``num_draws`` after ``num_warmup``, giving the mean, sd and MCSE
    (ArviZ) of every coordinate. Deterministic (fixed seed), computed once and kept as JSON
    in ``directory`` (default `cache_dir`), so every cell, serial or on any worker, compares
    against the same numbers. Refuses a run whose max R-hat exceeds 1.01. Used for logistic
    regression; not for the BNN, where NUTS ran at its maximum tree depth on every draw
    (BENCHMARKS.md, robot arm): see `bnn_reference`."""
    from adaptmc_lab.baselines import nuts

    def compute():
        result = nuts(target, seed, num_chains=num_chains, num_warmup=num_warmup,
                      num_draws=num_draws)
        return list(target.parameter_names), result.positions

    key = f"{num_chains}x{num_draws}+{num_warmup}-s{seed}"
    return cached_reference(target, key, directory, compute)


def bnn_reference(target, *, directory: Path | None = None, log: Callable | None = None,
                  **run) -> Reference:
    """A reference for a BNN target over `bnn_quantities`: Neal's (1996, Ch. 3) scheme, HMC on
    the weights with his per-weight step-size heuristic and Gibbs draws of the precisions
    between trajectories (`adaptmc_lab.models.bnn_hmc`), ``num_chains`` chains from separate
    optimised starts (`adaptmc_lab.models.robot_arm.find_start`), settings
    `BNN_REFERENCE_RUN` (overridable by keyword). A different algorithm from every sampler
    in the bench, whose joint (weights, log precisions) has the same marginal. Cached and
    refused above R-hat 1.01 as `nuts_reference`."""
    settings = {**BNN_REFERENCE_RUN, **run}

    def compute():
        import jax
        import jax.numpy as jnp

        from adaptmc.run import run as run_chain
        from adaptmc_lab.models.bnn_hmc import BNNHMCParams, bnn_hmc
        from adaptmc_lab.models.robot_arm import find_start

        model = target.info["bnn"]
        keys = jax.random.split(jax.random.key(settings["seed"]), settings["num_chains"])
        starts = jnp.stack([find_start(model, k, 2000)[0] for k in keys])
        if log is not None:
            log(f"reference for {target.name}: Gibbs-within-HMC, {settings['num_chains']} "
                f"chains x {settings['num_super_transitions']} x {settings['budget']} gradients")
        result = run_chain(
            target, bnn_hmc,
            BNNHMCParams(settings["step_size"], settings["num_leapfrog"], settings["jitter"]),
            num_super_transitions=settings["num_super_transitions"],
            gradient_budget=settings["budget"], num_chains=settings["num_chains"],
            seed=settings["seed"], initial_positions=starts, progress=log is not None,
        )
        positions = run_positions(result)
        return bnn_quantities(target, positions[:, positions.shape[1] // 4:])

    return cached_reference(target, bnn_reference_key(settings), directory, compute)


def bnn_reference_key(settings: dict = BNN_REFERENCE_RUN) -> str:
    """The cache key of `bnn_reference` with ``settings``."""
    return "gibbs-hmc-" + "-".join(f"{k}{v}" for k, v in sorted(settings.items()))


def mean_mcse(values: np.ndarray) -> np.ndarray:
    """``values: (chains, draws, k) -> (k,)`` Monte Carlo standard errors of the means
    (ArviZ's ``mcse(method="mean")``, from the bulk-ESS; Vehtari et al. 2021)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz as az

        # ArviZ 0.23 returns a 1-element array for one variable, earlier versions a scalar
        return np.array([np.ravel(az.mcse(values[..., i], method="mean"))[0]
                         for i in range(values.shape[-1])], dtype=float)


def _refusal(target, rhat: float, refused: Path) -> RuntimeError:
    return RuntimeError(f"reference run for {target.name} has max R-hat {rhat:.3f} "
                        f"(> 1.01; per-quantity diagnostics in {refused})")


def bench_target_digest(target) -> str:
    """The hash of the target's definition a cached cell or reference must match (its log
    density and gradient at a probe point, `adaptmc.run.store.target_digest`, to 6 digits:
    the same in single and double precision)."""
    from adaptmc.run.store import target_digest

    return target_digest(target, digits=6)


def cached_reference(target, key: str, directory: Path | None,
                     compute: Callable) -> Reference:
    """The reference kept at ``<directory>/reference-<target>-<key>.json``, or ``compute()``
    -> ``(names, draws: (chains, draws, k))`` summarised, checked (max R-hat <= 1.01) and
    written atomically. A refused run leaves ``<...>.refused.json`` (its diagnostics), and
    later calls refuse at once."""
    from adaptmc import diagnostics, io

    directory = cache_dir() if directory is None else Path(directory)
    # the target's definition is part of the key: an edited target never reuses a reference
    path = directory / f"reference-{target.name}-{key}-{bench_target_digest(target)}.json"
    if path.is_file():
        saved = json.loads(path.read_text())
        return Reference(tuple(saved["names"]), *(np.asarray(saved[k])
                                                  for k in ("mean", "sd", "mcse")))
    refused = path.with_suffix(".refused.json")
    if refused.is_file():  # refused before: computing again would give the same draws
        raise _refusal(target, max(json.loads(refused.read_text())["rhat"]), refused)
    names, draws = compute()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rhat = float(np.max(diagnostics.rhat(draws)))
    mcse = mean_mcse(draws)
    directory.mkdir(parents=True, exist_ok=True)
    if not rhat <= 1.01:
        io.write_json(refused, {
            "names": list(names), "mean": draws.mean(axis=(0, 1)), "mcse": mcse,
            "rhat": diagnostics.rhat(draws), "ess": diagnostics.ess(draws)})
        raise _refusal(target, rhat, refused)
    ref = Reference(tuple(names), draws.mean(axis=(0, 1)), draws.std(axis=(0, 1), ddof=1),
                    mcse)
    io.write_json(path, {**ref._asdict(), "max_rhat": rhat})
    return ref
