"""Benchmark suite: a matrix of targets x samplers x seeds, serially or on Dask.

A cell is ``(target, sampler, seed index)``. Its seed is a hash of ``(target, seed index)``
(`cell_seed`), so every sampler in a row starts from the same initial positions and a cell
computes the same numbers whether it runs serially, on a local cluster or on a remote one.
A sampler is a plain function ``(target, seed, config) -> SamplerOutput`` in `SAMPLERS`:
draws on the flat unconstrained space, gradient evaluations of warm-up/tuning and of
sampling counted separately and exactly, wall and compile times.

`evaluate` turns one output into the cell's numbers: min and median bulk-ESS (Vehtari et al.
2021) of the reference quantities (the constrained, reference-named parameters of a
posteriordb posterior; the flat coordinates otherwise), min ESS per 1000 gradients (tuning
included) and per second, max R-hat, divergences, and the accuracy against the reference:
the largest ``|mean - reference mean| / reference sd`` and the largest error in MCSE units
(``sqrt(mcse^2 + reference mcse^2)``). posteriordb's reference posteriors (Magnusson et al.
2024) come from 10 x 1000 thinned Stan draws.

Distribution (`run_cells`). With a Dask ``Client`` (``--dask ADDRESS`` or a
``LocalCluster(processes=True)``: spawned worker processes, so JAX is never forked) each
cell is one task, submitted with ``retries``; a worker that dies mid-cell has its task
rescheduled on another (Dask's ``allowed_failures``), so the run completes. Every finished
cell is written at once to ``<out>/cells/<cell>.json``; a rerun skips finished cells
unless ``force``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

PEER_BASELINE = "blackjax-nuts"
MAX_RHAT = 1.1  # above this a row's ESS is not compared (Vehtari et al. 2021 ask for < 1.01)


@dataclass(frozen=True)
class BenchConfig:
    """Sizes shared by every cell.

    num_chains
        Chains per cell.
    num_warmup, num_samples
        Draws per chain of warm-up and of sampling for the HMC-family samplers (NUTS and
        adaptmc's HMC); gadMALA makes ``mala_thin`` times as many (cheaper) steps.
    grid_leapfrog
        Leapfrog steps the grid tuner tries after dual averaging.
    tuning_budget
        Gradient evaluations per chain per super-transition of the bandit tuners.
    """

    num_chains: int = 4
    num_warmup: int = 500
    num_samples: int = 1000
    grid_leapfrog: tuple[int, ...] = (2, 4, 8, 16, 32, 64)
    tuning_budget: int = 512
    num_tuning: int = 24
    mala_thin: int = 10
    init_jitter: float = 0.5


class SamplerOutput(NamedTuple):
    """``positions: (chains, draws, dim)`` flat sampling draws; ``warmup_grads`` and
    ``sampling_grads`` over all chains (initial gradients count as warm-up); ``wall_s``
    excludes ``compile_s``; ``divergences`` during sampling; ``params`` the tuned setting."""

    positions: np.ndarray
    warmup_grads: int
    sampling_grads: int
    wall_s: float
    compile_s: float
    divergences: int
    params: dict


# ----------------------------------------------------------------------------- cells


class Cell(NamedTuple):
    target: str
    sampler: str
    seed_index: int

    @property
    def key(self) -> str:
        """A file-safe identifier, also the Dask task key."""
        return f"{self.target}__{self.sampler}__s{self.seed_index}"


def cell_seed(target: str, seed_index: int) -> int:
    """The seed of every cell in row ``(target, seed_index)``: the first 31 bits of
    SHA-256 of ``"target/seed_index"`` (no dependence on process, order or hash seed)."""
    digest = hashlib.sha256(f"{target}/{seed_index}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def make_cells(targets: list[str], samplers: list[str], num_seeds: int) -> list[Cell]:
    """The matrix in row-major order: target, then sampler, then seed."""
    return [Cell(t, s, i) for t in targets for s in samplers for i in range(num_seeds)]


def initial_positions(target, seed: int, num_chains: int, jitter: float) -> np.ndarray:
    """``(num_chains, dim)``: the target's start plus ``U(-jitter, jitter)``, from ``seed``."""
    rng = np.random.default_rng(seed)
    start = np.asarray(target.initial_position, dtype=float)
    return start + rng.uniform(-jitter, jitter, size=(num_chains, start.shape[0]))


# ----------------------------------------------------------------------------- targets


def bnn_robot_arm(num_hidden: int = 8):
    """The robot-arm BNN (Neal 1996, Sec. 3.2; 2 inputs, ``num_hidden`` tanh units, 2 outputs,
    200 training cases generated with seed 0) as a `Target` over weights and log precisions;
    ``info["test"]`` holds the 400 test cases `bnn_quantities` scores."""
    from adaptmc.datasets.robot_arm import generate
    from adaptmc.models.bnn import MLPSpec, bnn_target, make_bnn

    data = generate(seed=0)
    model = make_bnn(MLPSpec(2, num_hidden, 2), data.x_train, data.y_train)
    target = bnn_target(model, name="bnn-robot-arm")
    test = (np.asarray(data.x_test), np.asarray(data.y_test))
    return dataclasses.replace(target, info={**target.info, "test": test})


def bnn_quantities(target, positions: np.ndarray) -> tuple[list[str], np.ndarray]:
    """What is compared on a BNN, per draw: the mean squared error (summed over outputs) of the
    draw's network on the training cases and on ``info["test"]``, and the log noise precision.
    A weight's mean says nothing, because the posterior is invariant to permuting hidden units
    and flipping the sign of a tanh unit's weights (Neal 1996, Sec. 1.2), so chains that
    sample it well disagree on every weight; these quantities are invariant to both. (The
    network's outputs at single inputs were tried first: a reference for them could not be
    had, BENCHMARKS.md.)"""
    import jax
    import jax.numpy as jnp

    from adaptmc.models import bnn

    model = target.info["bnn"]
    x_test, y_test = (jnp.asarray(a) for a in target.info["test"])
    positions = np.asarray(positions)
    chains, draws, dim = positions.shape
    flat = jnp.asarray(positions.reshape(-1, dim))
    lay = bnn.layout(model)

    def per_draw(p):
        weights = lay.unravel_weights(p[: lay.num_weights])
        fit = jnp.mean(jnp.sum((bnn.forward(model.spec, weights, model.x) - model.y) ** 2, -1))
        test = jnp.mean(jnp.sum((bnn.forward(model.spec, weights, x_test) - y_test) ** 2, -1))
        return jnp.stack([fit, test, lay.unravel_precisions(p[lay.num_weights:])["noise"]])

    values = np.asarray(jax.lax.map(per_draw, flat, batch_size=4096))
    names = ["mse(train)", "mse(test)", "log_precision.noise"]
    return names, values.reshape(chains, draws, len(names))


def get_bench_target(name: str):
    """A built-in target (`adaptmc.targets.get_target`) or ``bnn-robot-arm``."""
    if name == "bnn-robot-arm":
        return bnn_robot_arm()
    from adaptmc.targets import get_target

    return get_target(name)


def reference(target, log: Callable[[str], None] | None = None) -> dict | None:
    """``{"names", "mean", "sd", "mcse"}`` over the quantities `quantities` returns: the
    posteriordb reference, the analytic moments of a Gaussian or funnel, a long NUTS run for
    logistic regression (`nuts_reference`), Neal's Gibbs-within-HMC for the BNN
    (`bnn_reference`, which reports its progress through ``log`` when it has to be
    computed), or None."""
    info = target.info
    if "reference_mean" in info:
        names = list(info["reference_names"])
        return {
            "names": names,
            "mean": np.array([info["reference_mean"][n] for n in names]),
            "sd": np.array([info["reference_sd"][n] for n in names]),
            "mcse": np.array([info["reference_mcse"][n] for n in names]),
        }
    if "mean" in info and "cov" in info:
        cov = np.asarray(info["cov"], dtype=float)
        sd = np.sqrt(np.diag(cov)) if cov.ndim == 2 else np.sqrt(cov)
        return _analytic(target, info["mean"], sd)
    if target.name.startswith("funnel-") and "mean" in info:
        # Neal's funnel with scale 3: v ~ N(0, 9); x_i has variance E[exp(v)] = exp(9 / 2)
        sd = np.full(target.dim, math.exp(9.0 / 4.0))
        sd[0] = 3.0
        return _analytic(target, info["mean"], sd)
    try:
        if target.name.startswith("logistic-"):
            return nuts_reference(target)
        if "bnn" in info and "test" in info:
            return bnn_reference(target, log=log)
    except RuntimeError as refusal:  # no trustworthy reference: no accuracy, no crash
        (log or (lambda text: warnings.warn(text, stacklevel=2)))(f"no reference: {refusal}")
    return None


REFERENCE_RUN = {"num_chains": 8, "num_warmup": 1000, "num_draws": 5000, "seed": 20261122}
"""The long NUTS run behind `nuts_reference`: 40000 draws, so the reference MCSE of a mean is
about 1/140 of its sd (with ESS near the number of draws, as NUTS has on these posteriors)."""


def cache_dir() -> Path:
    """Where computed references are kept: ``$ADAPTMC_CACHE`` or ``~/.cache/adaptmc``."""
    return Path(os.environ.get("ADAPTMC_CACHE", Path.home() / ".cache" / "adaptmc"))


def nuts_reference(target, *, num_chains: int = REFERENCE_RUN["num_chains"],
                   num_warmup: int = REFERENCE_RUN["num_warmup"],
                   num_draws: int = REFERENCE_RUN["num_draws"],
                   seed: int = REFERENCE_RUN["seed"], directory: Path | None = None) -> dict:
    """A reference posterior for a target without a published one: BlackJAX NUTS with window
    adaptation, ``num_chains`` chains of ``num_draws`` after ``num_warmup``, giving the mean,
    sd and MCSE (ArviZ) of every coordinate. Deterministic (fixed seed), computed once and
    kept as JSON in ``directory`` (default `cache_dir`), so every cell, serial or on any
    worker, compares against the same numbers. Refuses a run whose max R-hat exceeds 1.01.
    Used for logistic regression; not for the BNN, where NUTS ran at its maximum tree depth on
    every draw (BENCHMARKS.md, robot arm): see `bnn_reference`."""
    key = f"{num_chains}x{num_draws}+{num_warmup}-s{seed}"
    return _cached_reference(
        target, key, directory,
        lambda: (list(target.parameter_names),
                 _nuts_draws(target, num_chains, num_warmup, num_draws, seed)),
    )


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


def bnn_reference(target, *, directory: Path | None = None, log: Callable | None = None,
                  **run) -> dict:
    """A reference for a BNN target over `bnn_quantities`: Neal's (1996, Ch. 3) scheme, HMC on
    the weights with his per-weight step-size heuristic and Gibbs draws of the precisions
    between trajectories (`adaptmc.models.bnn_hmc`), ``num_chains`` chains from separate
    optimised starts (`adaptmc.experiments.robot_arm.find_start`), settings
    `BNN_REFERENCE_RUN` (overridable by keyword). A different algorithm from every sampler
    in the bench, whose joint (weights, log precisions) has the same marginal. Cached and
    refused above R-hat 1.01 as `nuts_reference`."""
    settings = {**BNN_REFERENCE_RUN, **run}
    key = bnn_reference_key(settings)

    def compute():
        import jax
        import jax.numpy as jnp

        from adaptmc.experiments.robot_arm import find_start
        from adaptmc.models.bnn_hmc import BNNHMCParams, bnn_hmc
        from adaptmc.run import run as run_chain

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
        positions = _positions(result)
        return bnn_quantities(target, positions[:, positions.shape[1] // 4:])

    return _cached_reference(target, key, directory, compute)


def bnn_reference_key(settings: dict = BNN_REFERENCE_RUN) -> str:
    """The cache key of `bnn_reference` with ``settings``."""
    return "gibbs-hmc-" + "-".join(f"{k}{v}" for k, v in sorted(settings.items()))


def _cached_reference(target, key: str, directory: Path | None, compute: Callable) -> dict:
    """The reference kept at ``<directory>/reference-<target>-<key>.json``, or ``compute()``
    -> ``(names, draws: (chains, draws, k))`` summarised, checked (max R-hat <= 1.01) and
    written atomically."""
    from adaptmc import diagnostics, io

    directory = cache_dir() if directory is None else Path(directory)
    path = directory / f"reference-{target.name}-{key}.json"
    if path.is_file():
        saved = json.loads(path.read_text())
        return {k: np.asarray(v) if k != "names" else v for k, v in saved.items()}
    refused = path.with_suffix(".refused.json")
    if refused.is_file():  # refused before: computing again would give the same draws
        rhat = max(json.loads(refused.read_text())["rhat"])
        raise RuntimeError(f"reference run for {target.name} has max R-hat {rhat:.3f} "
                           f"(> 1.01; per-quantity diagnostics in {refused})")
    names, draws = compute()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz as az

        rhat = float(np.max(diagnostics.rhat(draws)))
        mcse = np.array([float(az.mcse(draws[..., i], method="mean"))
                         for i in range(draws.shape[-1])])
    if not rhat <= 1.01:
        directory.mkdir(parents=True, exist_ok=True)
        io.atomic_write_json(refused, {
            "names": list(names), "mean": draws.mean(axis=(0, 1)), "mcse": mcse,
            "rhat": diagnostics.rhat(draws), "ess": diagnostics.ess(draws)})
        raise RuntimeError(f"reference run for {target.name} has max R-hat {rhat:.3f} "
                           f"(> 1.01; per-quantity diagnostics in {refused})")
    ref = {"names": list(names), "mean": draws.mean(axis=(0, 1)),
           "sd": draws.std(axis=(0, 1), ddof=1), "mcse": mcse}
    directory.mkdir(parents=True, exist_ok=True)
    io.atomic_write_json(path, {**ref, "max_rhat": rhat})
    return ref


def _nuts_draws(target, num_chains, num_warmup, num_draws, seed) -> np.ndarray:
    """``(num_chains, num_draws, dim)`` BlackJAX NUTS draws after window adaptation."""
    compiled, keys = compiled_nuts(target, num_chains, num_warmup, num_draws, seed)
    return np.asarray(compiled(keys)[0])


def compiled_nuts(target, num_chains: int, num_warmup: int, num_draws: int, seed: int,
                  dense: bool = False):
    """BlackJAX NUTS after window adaptation (diagonal, or ``dense``), ``num_chains`` chains
    vmapped, compiled ahead so a caller can time the run alone. Returns ``(compiled, keys)``;
    ``compiled(keys)`` gives ``(draws: (chains, draws, dim), sampling integration steps,
    warm-up integration steps)``, each step one gradient."""
    import blackjax
    import jax

    warmup = blackjax.window_adaptation(blackjax.nuts, target.logdensity,
                                        is_mass_matrix_diagonal=not dense)

    def one_chain(key):
        key_warm, key_draw = jax.random.split(key)
        (state, params), warm_info = warmup.run(key_warm, target.initial_position, num_warmup)
        nuts = blackjax.nuts(target.logdensity, **params)

        def body(s, k):
            s, info = nuts.step(k, s)
            return s, (s.position, info.num_integration_steps)

        _, (draws, steps) = jax.lax.scan(body, state, jax.random.split(key_draw, num_draws))
        return draws, steps.sum(), warm_info.info.num_integration_steps.sum()

    keys = jax.random.split(jax.random.key(seed), num_chains)
    return jax.jit(jax.vmap(one_chain)).lower(keys).compile(), keys


def _analytic(target, mean, sd) -> dict:
    mean = np.broadcast_to(np.asarray(mean, dtype=float), (target.dim,))
    sd = np.broadcast_to(np.asarray(sd, dtype=float), (target.dim,))
    return {"names": list(target.parameter_names), "mean": mean, "sd": sd,
            "mcse": np.zeros(target.dim)}


def quantities(target, positions: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Names and ``(chains, draws, k)`` values of what is compared: a posteriordb target's
    constrained parameters under the reference names, a BNN's symmetry-invariant
    `bnn_quantities`, else the flat coordinates."""
    if "bnn" in target.info and "test" in target.info:
        return bnn_quantities(target, positions)
    if "constrain" in target.info:
        from adaptmc.targets.posteriordb import constrained_draws

        named = constrained_draws(target, positions)
        return list(named), np.stack(list(named.values()), axis=-1)
    return list(target.parameter_names), np.asarray(positions)


# ----------------------------------------------------------------------------- samplers


def _run_phase(target, kernel, params, starts, seed, *, num_super_transitions, budget,
               tuner=None, objective=None, adapt_until=None):
    """`adaptmc.run.run` from ``starts``; returns the result and its ``(chains, draws, dim)``
    draws."""
    from adaptmc.run import run

    result = run(
        target, kernel, params, num_super_transitions=num_super_transitions,
        gradient_budget=budget, num_chains=starts.shape[0], tuner=tuner, objective=objective,
        adapt_until=adapt_until, seed=seed, initial_positions=starts, progress=False,
    )
    return result, _positions(result)


def _frozen_setting(result, tuner) -> dict:
    """The setting of the last super-transition of a run with ``adapt_until`` one short of
    its length: the tuner's ``best``."""
    tuning = result.idata.tuning
    return {name: float(tuning[name].values[-1]) for name in tuner.names}


def _positions(result) -> np.ndarray:
    """``(chains, draws, dim)`` flat draws of a `RunResult`, in ``ravel_pytree`` order."""
    posterior = result.idata.posterior
    chains, draws = posterior.sizes["chain"], posterior.sizes["draw"]
    return np.concatenate(
        [np.asarray(posterior[name].values).reshape(chains, draws, -1)
         for name in _ravel_order(posterior)],
        axis=-1,
    )


def _ravel_order(posterior) -> list[str]:
    # run.to_inference_data writes variables in tree-flatten order, which is ravel order
    return list(posterior.data_vars)


def whitened_esjd(scale: np.ndarray) -> Callable:
    """ESJD per gradient of ``positions / scale`` (Pasarica & Gelman 2010): jumps measured in
    units of the estimated posterior sd, so one wide coordinate does not decide the reward."""
    from adaptmc.objectives import esjd_per_grad

    scale = np.asarray(scale, dtype=float)

    def objective(positions, stats, num_grads):
        return esjd_per_grad(np.asarray(positions) / scale, stats, num_grads)

    return objective


def _hmc_warmup(target, seed, config: BenchConfig, num_leapfrog: int = 10):
    """Two dual-averaging phases of adaptmc's HMC (step size toward acceptance 0.8, Hoffman &
    Gelman 2014, Algorithm 5; `adaptmc.tuners.dual_averaging_tuner`), the second with the
    diagonal inverse mass set to the variances of the last half of the first phase's draws
    (Stan's windowed adaptation in two windows). Each super-transition is 5 steps.

    Returns the last positions ``(chains, dim)``, the tuned ``HMCParams``, the gradients
    spent, wall and compile seconds.
    """
    from adaptmc.kernels import HMCParams, hmc
    from adaptmc.tuners import dual_averaging_tuner

    steps_per_st = 5
    starts = initial_positions(target, seed, config.num_chains, config.init_jitter)
    num_st = max(4, config.num_warmup // steps_per_st)
    first, second = max(2, int(0.4 * num_st)), max(2, num_st - int(0.4 * num_st))
    # step-size jitter (Neal 2011, Sec. 5.4.2.2) so that eps L never sits on a period of the
    # dynamics, where fixed-L HMC stops moving (seen on a standard normal without it)
    params = HMCParams(step_size=0.1, num_leapfrog=num_leapfrog, jitter=0.2)
    grads = wall = compile_s = 0.0
    for phase, count in enumerate((first, second)):
        tuner = dual_averaging_tuner(float(params.step_size))
        # the last super-transition runs at the tuner's best (the averaged step size)
        result, positions = _run_phase(
            target, hmc, params, starts, seed + phase, num_super_transitions=count,
            budget=steps_per_st * num_leapfrog, tuner=tuner, adapt_until=count - 1,
        )
        grads += result.num_grads
        wall += result.wall_s - result.compile_s
        compile_s += result.compile_s
        starts = positions[:, -1]
        step_size = _frozen_setting(result, tuner)["step_size"]
        if phase == 0:
            half = positions[:, positions.shape[1] // 2:].reshape(-1, positions.shape[-1])
            variance = half.var(axis=0)
            count_draws = half.shape[0]
            # Stan's regularisation toward 1e-3 (Stan Reference Manual, "HMC algorithm
            # parameters")
            variance = (count_draws / (count_draws + 5.0)) * variance + 1e-3 * (
                5.0 / (count_draws + 5.0))
            params = params._replace(inverse_mass=np.asarray(variance), step_size=step_size)
        else:
            params = params._replace(step_size=step_size)
    return starts, params, int(grads), wall, compile_s


def _hmc_sample(target, params, starts, seed, config: BenchConfig):
    from adaptmc.kernels import hmc

    result, positions = _run_phase(
        target, hmc, params, starts, seed + 10,
        num_super_transitions=1, budget=config.num_samples * int(params.num_leapfrog),
    )
    divergences = int(result.idata.sample_stats["diverging"].values.sum())
    # the run re-evaluates the gradient at the chains' starts: counted as warm-up overhead
    sampling_grads = result.num_grads - starts.shape[0]
    return (positions, sampling_grads, result.wall_s - result.compile_s, result.compile_s,
            divergences)


def adaptmc_hmc_da(target, seed: int, config: BenchConfig) -> SamplerOutput:
    """adaptmc's HMC, L = 10, step size and diagonal mass by `_hmc_warmup`, then fixed."""
    starts, params, grads, wall, comp = _hmc_warmup(target, seed, config)
    positions, sgrads, swall, scomp, div = _hmc_sample(target, params, starts, seed, config)
    return SamplerOutput(positions, grads + starts.shape[0], sgrads, wall + swall,
                         comp + scomp, div, _params_dict(params))


def _tuned_then_sample(target, seed, config: BenchConfig, make_tuner) -> SamplerOutput:
    """Warm up with `_hmc_warmup`, tune with ``make_tuner(params)`` for ``num_tuning``
    super-transitions of ``tuning_budget`` gradients (reward: `whitened_esjd`), then sample
    with the tuner's ``best`` setting."""
    from adaptmc.kernels import hmc

    starts, params, grads, wall, comp = _hmc_warmup(target, seed, config)
    tuner, count = make_tuner(params)
    scale = np.sqrt(np.broadcast_to(np.asarray(params.inverse_mass, float), (target.dim,)))
    budget = max(config.tuning_budget, max(config.grid_leapfrog))
    # one more super-transition at the tuner's best, which the record then shows
    result, positions = _run_phase(
        target, hmc, params, starts, seed + 5, num_super_transitions=count + 1, budget=budget,
        tuner=tuner, objective=whitened_esjd(scale), adapt_until=count,
    )
    grads += result.num_grads
    wall += result.wall_s - result.compile_s
    comp += result.compile_s
    best = _frozen_setting(result, tuner)
    if "num_leapfrog" in best:
        best["num_leapfrog"] = int(round(best["num_leapfrog"]))
    params = params._replace(**best)
    starts = positions[:, -1]
    positions, sgrads, swall, scomp, div = _hmc_sample(target, params, starts, seed, config)
    return SamplerOutput(positions, grads + starts.shape[0], sgrads, wall + swall,
                         comp + scomp, div, _params_dict(params))


def adaptmc_hmc_grid(target, seed: int, config: BenchConfig) -> SamplerOutput:
    """adaptmc's HMC: dual-averaging warm-up, then the grid tuner over ``grid_leapfrog``
    (one super-transition each, reward `whitened_esjd`), then sampling at the best L."""
    from adaptmc.tuners import grid

    def make(params):
        return grid({"num_leapfrog": list(config.grid_leapfrog)}), len(config.grid_leapfrog)

    return _tuned_then_sample(target, seed, config, make)


def _bandit_then_sample(target, seed: int, config: BenchConfig, bandit) -> SamplerOutput:
    """Dual-averaging warm-up, then ``bandit(box, initial=...)`` (any tuner of
    `adaptmc.tuners.bandit`) over step size in ``[0.5, 2] x`` the warm-up's and L in
    ``[1, 64]``, starting from the warm-up's step size and L = 10, then sampling at its best."""
    from adaptmc.recipes import hmc_box

    def make(params):
        eps = float(params.step_size)
        box = hmc_box(step_size=(0.5 * eps, 2.0 * eps), num_leapfrog=(1, 64))
        return bandit(box, initial={"step_size": eps, "num_leapfrog": 10}), config.num_tuning

    return _tuned_then_sample(target, seed, config, make)


def adaptmc_hmc_gpucb(target, seed: int, config: BenchConfig) -> SamplerOutput:
    """The annealed GP-UCB bandit (Wang, Mohamed & de Freitas 2013), `_bandit_then_sample`."""
    from adaptmc.tuners import gp_ucb

    return _bandit_then_sample(target, seed, config, gp_ucb)


def adaptmc_hmc_parametric(target, seed: int, config: BenchConfig) -> SamplerOutput:
    """The Bayesian parametric bandit (Wang & de Freitas 2011), `_bandit_then_sample`."""
    from adaptmc.tuners import parametric

    return _bandit_then_sample(target, seed, config, parametric)


def adaptmc_hmc_hedge(target, seed: int, config: BenchConfig) -> SamplerOutput:
    """GP-Hedge over PI, EI and UCB (Hoffman et al. 2011), `_bandit_then_sample`."""
    from adaptmc.tuners import hedge

    return _bandit_then_sample(target, seed, config, hedge)


def adaptmc_hmc_sir(target, seed: int, config: BenchConfig) -> SamplerOutput:
    """The SIR stochastic policy (Mahendran et al. 2012), `_bandit_then_sample`; sampling
    runs its best setting by posterior mean, not the mixture."""
    from adaptmc.tuners import sir

    return _bandit_then_sample(target, seed, config, sir)


def adaptmc_gadmala(target, seed: int, config: BenchConfig) -> SamplerOutput:
    """gadMALA (Titsias & Dellaportas 2019): the factor starts at ``h I`` with ``h`` from
    `initial_step_size` (Hoffman & Gelman's heuristic), adapts for ``mala_thin * num_warmup``
    steps, then is frozen for ``mala_thin * num_samples`` steps (a plain MALA)."""
    import jax

    from adaptmc.kernels.gradient_adaptive import gadmala, initial_step_size
    from adaptmc.run import run
    from adaptmc.tuners.base import Tuner

    steps_per_st = 100
    warm_st = max(1, config.mala_thin * config.num_warmup // steps_per_st)
    sample_steps = config.mala_thin * config.num_samples

    def propose(key, state):
        adapt = 1.0 if int(state["count"]) < warm_st else 0.0
        return {"adapt": adapt}, state

    def update(state, proposal, reward, stats):
        return {"count": np.asarray(int(state["count"]) + 1)}

    switch = Tuner("burn-in-switch", ("adapt",), lambda key: {"count": np.asarray(0)},
                   propose, update, lambda state: {"adapt": 0.0})
    starts = initial_positions(target, seed, config.num_chains, config.init_jitter)
    # the smallest of the chains' Hoffman-Gelman starting steps: one L for all chains
    step = min(initial_step_size(jax.random.key(seed), target, start) for start in starts)
    params = gadmala.Params(step_size=step)
    result = run(
        target, gadmala, params, num_super_transitions=warm_st + sample_steps // steps_per_st,
        gradient_budget=steps_per_st, num_chains=config.num_chains, tuner=switch,
        num_warmup=warm_st, seed=seed, initial_positions=starts, progress=False,
    )
    posterior_grads = int(result.idata.sample_stats["n_grad_evals"].values.sum())
    positions = _positions(result)
    divergences = int(result.idata.sample_stats["diverging"].values.sum())
    return SamplerOutput(positions, result.num_grads - posterior_grads, posterior_grads,
                         result.wall_s - result.compile_s, result.compile_s, divergences,
                         {"step_size": float(params.step_size)})


def blackjax_nuts(target, seed: int, config: BenchConfig) -> SamplerOutput:
    """BlackJAX NUTS (Hoffman & Gelman 2014) after Stan-style window adaptation of the step
    size and a diagonal mass matrix; chains vectorised. Gradients: one per chain at the
    start plus ``num_integration_steps`` per transition (one gradient per leapfrog step)."""
    import blackjax
    import jax
    import jax.numpy as jnp

    starts = jnp.asarray(initial_positions(target, seed, config.num_chains, config.init_jitter))
    key_warm, key_sample = jax.random.split(jax.random.key(seed))

    def warm_one(key, position):
        adaptation = blackjax.window_adaptation(blackjax.nuts, target.logdensity)
        (state, params), info = adaptation.run(key, position, num_steps=config.num_warmup)
        return state, params, jnp.sum(info.info.num_integration_steps)

    def sample_one(key, state, params):
        step = blackjax.nuts(target.logdensity, **params).step

        def body(state, key):
            state, info = step(key, state)
            return state, (state.position, info.num_integration_steps, info.is_divergent)

        _, out = jax.lax.scan(body, state, jax.random.split(key, config.num_samples))
        return out

    warm_keys = jax.random.split(key_warm, config.num_chains)
    sample_keys = jax.random.split(key_sample, config.num_chains)
    tick = time.perf_counter()
    warm = jax.jit(jax.vmap(warm_one)).lower(warm_keys, starts).compile()
    compile_s = time.perf_counter() - tick
    tick = time.perf_counter()
    states, params, warm_steps = jax.block_until_ready(warm(warm_keys, starts))
    wall = time.perf_counter() - tick
    tick = time.perf_counter()
    sample = jax.jit(jax.vmap(sample_one)).lower(sample_keys, states, params).compile()
    compile_s += time.perf_counter() - tick
    tick = time.perf_counter()
    positions, steps, divergent = jax.block_until_ready(sample(sample_keys, states, params))
    wall += time.perf_counter() - tick
    return SamplerOutput(
        np.asarray(positions), int(np.sum(warm_steps)) + config.num_chains, int(np.sum(steps)),
        wall, compile_s, int(np.sum(divergent)),
        {"step_size": float(np.mean(params["step_size"]))},
    )


def numpyro_nuts(target, seed: int, config: BenchConfig) -> SamplerOutput:
    """NumPyro NUTS on ``potential_fn = -log density`` (Phan et al. 2019), Stan-style warm-up
    with a diagonal mass matrix, chains vectorised. Gradients from the ``num_steps`` extra
    field, warm-up collected separately. NumPyro compiles inside its calls, so ``compile_s``
    is NaN and ``wall_s`` includes compilation."""
    import jax
    from numpyro.infer import MCMC, NUTS

    starts = initial_positions(target, seed, config.num_chains, config.init_jitter)
    kernel = NUTS(potential_fn=lambda x: -target.logdensity(x))
    mcmc = MCMC(kernel, num_warmup=config.num_warmup, num_samples=config.num_samples,
                num_chains=config.num_chains, chain_method="vectorized", progress_bar=False)
    tick = time.perf_counter()
    fields = ("num_steps", "diverging")
    mcmc.warmup(jax.random.key(seed), init_params=jax.numpy.asarray(starts),
                extra_fields=fields, collect_warmup=True)
    warm_steps = int(np.sum(mcmc.get_extra_fields()["num_steps"]))
    mcmc.run(mcmc.post_warmup_state.rng_key, extra_fields=fields)
    wall = time.perf_counter() - tick
    extra = mcmc.get_extra_fields(group_by_chain=True)
    positions = np.asarray(mcmc.get_samples(group_by_chain=True))
    return SamplerOutput(positions, warm_steps + config.num_chains,
                         int(np.sum(extra["num_steps"])), wall, float("nan"),
                         int(np.sum(extra["diverging"])), {})


def _params_dict(params) -> dict:
    out = {}
    for name, value in params._asdict().items():
        arr = np.asarray(value, dtype=float)
        out[name] = float(arr) if arr.ndim == 0 else float(np.mean(arr))
    return out


SAMPLERS: dict[str, Callable[[Any, int, BenchConfig], SamplerOutput]] = {
    "adaptmc-hmc-da": adaptmc_hmc_da,
    "adaptmc-hmc-grid": adaptmc_hmc_grid,
    "adaptmc-hmc-gpucb": adaptmc_hmc_gpucb,
    "adaptmc-hmc-parametric": adaptmc_hmc_parametric,
    "adaptmc-hmc-hedge": adaptmc_hmc_hedge,
    "adaptmc-hmc-sir": adaptmc_hmc_sir,
    "adaptmc-gadmala": adaptmc_gadmala,
    "blackjax-nuts": blackjax_nuts,
    "numpyro-nuts": numpyro_nuts,
}

DEFAULT_SAMPLERS = ("adaptmc-hmc-da", "adaptmc-hmc-grid", "adaptmc-hmc-gpucb",
                    "adaptmc-hmc-parametric", "adaptmc-hmc-hedge", "adaptmc-hmc-sir",
                    "adaptmc-gadmala", "blackjax-nuts")

POSTERIORDB_TARGETS = tuple(
    f"pdb-{name}" for name in (
        "eight_schools-eight_schools_noncentered", "arK-arK", "diamonds-diamonds",
        "gp_pois_regr-gp_pois_regr", "low_dim_gauss_mix-low_dim_gauss_mix", "garch-garch11",
        "kidiq-kidscore_momiq", "nes1972-nes",
    )
)
DEFAULT_TARGETS = (*POSTERIORDB_TARGETS, "std-normal-10d", "gauss-2d-v2", "funnel-10d",
                   "logistic-german", "bnn-robot-arm")
QUICK_TARGETS = ("pdb-eight_schools-eight_schools_noncentered", "pdb-kidiq-kidscore_momiq",
                 "std-normal-10d")
QUICK_SAMPLERS = ("adaptmc-hmc-da", "blackjax-nuts")
QUICK_CONFIG = BenchConfig(num_chains=4, num_warmup=200, num_samples=300,
                           grid_leapfrog=(4, 16), num_tuning=6, mala_thin=4)


# ----------------------------------------------------------------------------- evaluation


def evaluate(target, output: SamplerOutput) -> dict:
    """The cell's numbers from a sampler's output (see the module docstring)."""
    from adaptmc import diagnostics

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz as az

    names, values = quantities(target, output.positions)
    finite = bool(np.all(np.isfinite(values)))
    values = np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)
    ess = diagnostics.ess(values)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rhat = diagnostics.rhat(values)
        mcse = np.array([float(az.mcse(values[..., i], method="mean"))
                         for i in range(values.shape[-1])])
    total_grads = output.warmup_grads + output.sampling_grads
    min_ess = float(np.min(ess))
    out = {
        "dim": int(target.dim),
        "num_quantities": len(names),
        "warmup_grads": int(output.warmup_grads),
        "sampling_grads": int(output.sampling_grads),
        "wall_s": float(output.wall_s),
        "compile_s": float(output.compile_s),
        "min_ess": min_ess,
        "median_ess": float(np.median(ess)),
        "min_ess_per_1k_grads": 1000.0 * min_ess / max(total_grads, 1),
        "min_ess_per_1k_sampling_grads": 1000.0 * min_ess / max(output.sampling_grads, 1),
        "min_ess_per_s": min_ess / max(output.wall_s, 1e-9),
        "max_rhat": float(np.nanmax(rhat)) if np.isfinite(rhat).any() else float("nan"),
        "divergences": int(output.divergences),
        "finite": finite,
        "params": output.params,
        "max_err_sd": None,
        "max_err_mcse": None,
        "worst": None,
    }
    ref = reference(target)
    if ref is not None and list(ref["names"]) == names:
        error = values.mean(axis=(0, 1)) - ref["mean"]
        err_sd = np.abs(error) / ref["sd"]
        err_mcse = np.abs(error) / np.sqrt(mcse**2 + ref["mcse"] ** 2)
        worst = int(np.nanargmax(err_sd))
        out.update(max_err_sd=float(np.nanmax(err_sd)),
                   max_err_mcse=float(np.nanmax(err_mcse)), worst=names[worst])
    return out


def compute_cell(cell: Cell, config: BenchConfig) -> dict:
    """Run one cell from scratch (its own process may be fresh: a Dask worker) and return
    ``{"cell": ..., "seed": ..., "config": ..., **evaluate(...)}``."""
    import jax

    jax.config.update("jax_enable_x64", True)
    if cell.sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {cell.sampler!r}; choose from {', '.join(SAMPLERS)}")
    target = get_bench_target(cell.target)
    seed = cell_seed(cell.target, cell.seed_index)
    try:
        output = SAMPLERS[cell.sampler](target, seed, config)
        return {"cell": cell._asdict(), "key": cell.key, "seed": seed,
                "config": asdict(config), **evaluate(target, output)}
    finally:
        # a cell's compiled programs are never reused by another cell, yet stay in the
        # process: a serial run of the full matrix without this died after about 75 cells
        # ("LLVM compilation error: Cannot allocate memory", most of the memory free)
        jax.clear_caches()


def deterministic_part(result: dict) -> dict:
    """A cell's result without the timings, which differ between runs of the same cell."""
    return {k: v for k, v in result.items() if k not in ("wall_s", "compile_s", "min_ess_per_s")}


# ----------------------------------------------------------------------------- running


def run_cells(
    cells: list[Cell],
    config: BenchConfig,
    out: str | os.PathLike | None = None,
    *,
    client=None,
    force: bool = False,
    retries: int = 2,
    log: Callable[[str], None] | None = None,
) -> list[dict]:
    """Compute ``cells`` serially (``client=None``) or as Dask tasks on ``client``.

    Finished cells are written to ``<out>/cells/<key>.json`` as they arrive and reused on a
    rerun with the same ``config`` unless ``force``. With Dask each task has ``retries``
    retries on an exception, and a task whose worker dies is rescheduled by the scheduler
    (``allowed_failures``).
    Returns the results in the order of ``cells``.
    """
    log = log or (lambda text: None)
    cell_dir = None if out is None else Path(out) / "cells"
    if cell_dir is not None:
        cell_dir.mkdir(parents=True, exist_ok=True)
    done: dict[str, dict] = {}
    todo = []
    wanted = json.loads(json.dumps(asdict(config)))
    for cell in cells:
        path = None if cell_dir is None else cell_dir / f"{cell.key}.json"
        cached = json.loads(path.read_text()) if path is not None and path.is_file() else None
        if cached is not None and not force and cached.get("config") == wanted:
            done[cell.key] = cached
            log(f"cached  {cell.key}")
        else:
            todo.append(cell)

    def finish(result: dict) -> None:
        done[result["key"]] = result
        if cell_dir is not None:
            tmp = cell_dir / f"{result['key']}.json.tmp"
            tmp.write_text(json.dumps(result, indent=1, default=_json_default))
            tmp.replace(cell_dir / f"{result['key']}.json")
        log(f"done    {result['key']}: min ESS/1k grads {result['min_ess_per_1k_grads']:.3g}, "
            f"max err/sd {_fmt(result['max_err_sd'])}")

    if client is None:
        for cell in todo:
            finish(compute_cell(cell, config))
    else:
        from distributed import as_completed

        futures = [
            client.submit(compute_cell, cell, config, key=f"adaptmc-bench-{cell.key}",
                          retries=retries, pure=False)
            for cell in todo
        ]
        for future in as_completed(futures):
            finish(future.result())
    return [done[cell.key] for cell in cells]


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def make_client(address: str | None, workers: int):
    """A Dask client: to the scheduler at ``address`` (``tcp://host:8786``), or to a new
    ``LocalCluster`` of ``workers`` spawned processes with one thread each."""
    from distributed import Client, LocalCluster

    if address:
        return Client(address)
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=":0")
    return Client(cluster)


# ----------------------------------------------------------------------------- reporting


def _fmt(value, spec: str = ".3g") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return format(value, spec)


def aggregate(results: list[dict]) -> list[dict]:
    """One row per (target, sampler): medians over seeds of ESS rates, worst-case accuracy,
    R-hat and total divergences, and the ratio of min ESS per gradient to `PEER_BASELINE`
    on the same target. The ratio is None unless both rows have max R-hat <= `MAX_RHAT`:
    the ESS of chains that have not mixed means nothing."""
    rows: dict[tuple[str, str], list[dict]] = {}
    for r in results:
        rows.setdefault((r["cell"]["target"], r["cell"]["sampler"]), []).append(r)
    table = []
    for (target, sampler), cells in rows.items():
        def med(key, cells=cells):
            return float(np.median([c[key] for c in cells]))

        def worst(key, cells=cells):
            vals = [c[key] for c in cells if c[key] is not None]
            return max(vals) if vals else None

        table.append({
            "target": target, "sampler": sampler, "seeds": len(cells),
            "warmup_grads": med("warmup_grads"), "sampling_grads": med("sampling_grads"),
            "wall_s": med("wall_s"), "compile_s": med("compile_s"),
            "min_ess": med("min_ess"), "median_ess": med("median_ess"),
            "min_ess_per_1k_grads": med("min_ess_per_1k_grads"),
            "min_ess_per_s": med("min_ess_per_s"), "max_rhat": worst("max_rhat"),
            "divergences": int(sum(c["divergences"] for c in cells)),
            "max_err_sd": worst("max_err_sd"), "max_err_mcse": worst("max_err_mcse"),
        })
    for row in table:
        row["converged"] = row["max_rhat"] is not None and row["max_rhat"] <= MAX_RHAT
    baseline = {row["target"]: row["min_ess_per_1k_grads"] for row in table
                if row["sampler"] == PEER_BASELINE and row["converged"]}
    for row in table:
        base = baseline.get(row["target"])
        usable = base and row["converged"]
        row["ratio_to_nuts"] = row["min_ess_per_1k_grads"] / base if usable else None
    return table


def markdown_table(results: list[dict]) -> str:
    """The aggregated table as GitHub markdown."""
    header = ("| target | sampler | seeds | warm-up grads | sampling grads | wall s (compile) "
              "| min / median ESS | min ESS / 1k grads | ratio to NUTS | min ESS / s "
              "| max R-hat | div | max abs err / sd | max err / MCSE |")
    lines = [header, "|" + "---|" * 14]
    for row in aggregate(results):
        lines.append(
            f"| {row['target']} | {row['sampler']} | {row['seeds']} "
            f"| {row['warmup_grads']:,.0f} | {row['sampling_grads']:,.0f} "
            f"| {row['wall_s']:.1f} ({_fmt(row['compile_s'], '.1f')}) "
            f"| {row['min_ess']:.0f} / {row['median_ess']:.0f} "
            f"| {row['min_ess_per_1k_grads']:.3g} | {_fmt(row['ratio_to_nuts'], '.2f')} "
            f"| {row['min_ess_per_s']:.3g} | {_fmt(row['max_rhat'], '.4g')} "
            f"| {row['divergences']} | {_fmt(row['max_err_sd'], '.3g')} "
            f"| {_fmt(row['max_err_mcse'], '.1f')} |"
        )
    return "\n".join(lines)


def plot_results(results: list[dict], path: str | os.PathLike) -> None:
    """Two panels: min ESS per 1000 gradients (tuning included) by target and sampler, log
    scale; and its ratio to BlackJAX NUTS."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = aggregate(results)
    targets = list(dict.fromkeys(r["target"] for r in table))
    samplers = list(dict.fromkeys(r["sampler"] for r in table))
    lookup = {(r["target"], r["sampler"]): r for r in table}
    width = 0.8 / max(len(samplers), 1)
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 1.1 * len(targets) + 3), 8), sharex=True)
    x = np.arange(len(targets))
    for j, sampler in enumerate(samplers):
        ess = [lookup.get((t, sampler), {}).get("min_ess_per_1k_grads", np.nan) for t in targets]
        ratio = [lookup.get((t, sampler), {}).get("ratio_to_nuts") for t in targets]
        ratio = [np.nan if r is None else r for r in ratio]
        offset = x + (j - (len(samplers) - 1) / 2) * width
        axes[0].bar(offset, np.maximum(ess, 1e-4), width, label=sampler)
        axes[1].bar(offset, np.maximum(ratio, 1e-4), width, label=sampler)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("min bulk-ESS per 1000 gradients\n(tuning included)")
    axes[1].set_yscale("log")
    axes[1].axhline(1.0, color="k", lw=0.8)
    axes[1].set_ylabel(f"ratio to {PEER_BASELINE}")
    axes[1].set_xticks(x)
    axes[1].set_xticklabels([t.removeprefix("pdb-") for t in targets], rotation=40, ha="right",
                            fontsize=8)
    axes[0].legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(results: list[dict], out: str | os.PathLike, command: str) -> Path:
    """``results.json``, ``results.md`` (the command and the table) and
    ``ess_per_grad.png`` in ``out``; returns the markdown's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(
        json.dumps({"command": command, "cells": results}, indent=1, default=_json_default)
    )
    text = (f"Generated by `{command}`.\n\n{markdown_table(results)}\n\n"
            "Plot: ess_per_grad.png. Logistic regression is compared with a long NUTS run "
            "(8 x 5000 draws, `nuts_reference`); the BNN's quantities are each draw's "
            "training and test mean squared error and its log noise precision "
            "(`bnn_quantities`), "
            "compared with a long Gibbs-within-HMC run (`bnn_reference`); accuracy columns are "
            "empty where a target has no reference; the ratio to NUTS is empty where "
            f"either max R-hat exceeds {MAX_RHAT}.\n")
    (out / "results.md").write_text(text)
    plot_results(results, out / "ess_per_grad.png")
    return out / "results.md"


def prepare_references(targets: list[str], log: Callable[[str], None] | None = print) -> None:
    """Compute (or read) every target's reference here, before the cells, so that workers
    sharing this machine's `cache_dir` find it instead of each computing it again; the
    Gibbs-within-HMC run of the BNN takes about 40 minutes on one core and shows progress."""
    import jax

    jax.config.update("jax_enable_x64", True)
    for name in targets:
        reference(get_bench_target(name), log=log)


def run_bench(
    targets: list[str],
    samplers: list[str],
    num_seeds: int,
    config: BenchConfig,
    out: str | os.PathLike,
    *,
    dask_address: str | None = None,
    workers: int = 0,
    force: bool = False,
    command: str = "adaptmc bench",
    log: Callable[[str], None] | None = print,
) -> list[dict]:
    """The whole suite: cells, serial or Dask (``workers > 1`` or an address), report."""
    unknown = [s for s in samplers if s not in SAMPLERS]
    if unknown:
        raise ValueError(f"unknown samplers {unknown}; choose from {', '.join(SAMPLERS)}")
    cells = make_cells(targets, samplers, num_seeds)
    prepare_references(targets, log)
    if workers == 0:  # auto: a local cluster when there is enough to share
        workers = min(len(cells), os.cpu_count() or 1) if len(cells) >= 4 else 1
    client = None
    if dask_address or workers > 1:
        client = make_client(dask_address, workers)
        log(f"dask: {client.dashboard_link if dask_address else f'{workers} local workers'}")
    try:
        results = run_cells(cells, config, out, client=client, force=force, log=log)
    finally:
        if client is not None:
            cluster = getattr(client, "cluster", None)
            client.close()
            if cluster is not None and not dask_address:
                cluster.close()
    write_report(results, out, command)
    return results
