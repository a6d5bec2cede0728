"""The bench's samplers: plain functions ``(target, seed, config) -> SamplerOutput`` in
`SAMPLERS`, giving draws on the flat unconstrained space, gradient evaluations of warm-up and
tuning and of sampling counted separately and exactly, and wall and compile seconds.

adaptmc's HMC warms up by dual averaging (`_hmc_warmup`), optionally tunes (L) on a grid or
(eps, L) with a bandit, then samples at fixed settings; gadMALA adapts then freezes; NUTS is
`adaptmc.baselines.nuts` (BlackJAX) or `adaptmc.baselines.numpyro_nuts`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from adaptmc.bench.config import BenchConfig, SamplerOutput, initial_positions
from adaptmc.bench.quantities import run_positions


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
    return result, run_positions(result)


def _frozen_setting(result, tuner) -> dict:
    """The setting of the last super-transition of a run with ``adapt_until`` one short of
    its length: the tuner's ``best``."""
    tuning = result.idata.tuning
    return {name: float(tuning[name].values[-1]) for name in tuner.names}


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
    `adaptmc.tuners.policies`) over step size in ``[0.5, 2] x`` the warm-up's and L in
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
    positions = run_positions(result)
    divergences = int(result.idata.sample_stats["diverging"].values.sum())
    return SamplerOutput(positions, result.num_grads - posterior_grads, posterior_grads,
                         result.wall_s - result.compile_s, result.compile_s, divergences,
                         {"step_size": float(params.step_size)})


def blackjax_nuts(target, seed: int, config: BenchConfig) -> SamplerOutput:
    """BlackJAX NUTS (Hoffman & Gelman 2014) after Stan-style window adaptation of the step
    size and a diagonal mass matrix, chains vectorised, one compiled program
    (`adaptmc.baselines.nuts`). Gradients: one per chain at the start plus one per leapfrog
    step."""
    from adaptmc.baselines import nuts

    starts = initial_positions(target, seed, config.num_chains, config.init_jitter)
    result = nuts(target, seed, num_chains=config.num_chains, num_warmup=config.num_warmup,
                  num_draws=config.num_samples, initial_positions=starts)
    return SamplerOutput(result.positions, int(np.sum(result.warmup_grads)),
                         result.sampling_grads, result.wall_s, result.compile_s,
                         int(np.sum(result.divergent)),
                         {"step_size": float(np.mean(result.step_size))})


def numpyro_nuts(target, seed: int, config: BenchConfig) -> SamplerOutput:
    """NumPyro NUTS (`adaptmc.baselines.numpyro_nuts`): Stan-style warm-up with a diagonal
    mass matrix, chains vectorised; ``compile_s`` is NaN and ``wall_s`` includes
    compilation."""
    from adaptmc.baselines import numpyro_nuts as run_numpyro

    starts = initial_positions(target, seed, config.num_chains, config.init_jitter)
    result = run_numpyro(target, seed, num_chains=config.num_chains,
                         num_warmup=config.num_warmup, num_draws=config.num_samples,
                         initial_positions=starts)
    return SamplerOutput(result.positions, int(np.sum(result.warmup_grads)),
                         result.sampling_grads, result.wall_s, result.compile_s,
                         int(np.sum(result.divergent)), {})


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
