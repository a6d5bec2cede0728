"""``adaptive-portfolio``: the kernel as an arm. One NUTS warm-up, then an equal-cost trial of
adaptive HMC and of gadMALA from where it stopped, then the sampling budget goes to the
kernel whose trial scored the higher reward, continuing from that trial's chains.

A portfolio in the sense of GP-Hedge (Hoffman, Brochu & de Freitas 2011), which allocates
among acquisition functions by their measured gains; here the arms are kernels, tried once
each during warm-up (two arms and one allocation, so no hedging schedule is needed).

1. **Warm-up**: `adaptmc.adaptation.window.window_warmup`, as in `adaptmc.recipes.adaptive`
   (its gradients counted once).
2. **Trials**, each ``tuning + audition`` super-transitions of the same gradient budget per
   chain (the adaptive-HMC budget, `adaptmc.recipes.adaptive.tuned_plan`), both from the
   warm-up's positions:

   - HMC: adaptive HMC's tuning phase (GP-UCB over ``(eps, L)`` in the box the warm-up
     measured), then ``audition`` super-transitions at its frozen best setting;
   - gadMALA (Titsias & Dellaportas 2019): ``tuning`` super-transitions adapting inside
     every step, from the proposal factor ``L = eps_w C`` with ``C C^T`` the warm-up's
     inverse metric and ``eps_w`` its step (one leapfrog step with a fresh momentum is
     MALA with this factor, Neal 2011, Sec. 5.2), then ``audition`` frozen.

3. **Score**: the reward adaptive HMC's bandit learns from, the lag-one ESS of ``x`` and
   ``x^2`` per gradient (`adaptmc.objectives.lag_one_ess_per_grad`), averaged over the
   audition's super-transitions, i.e. measured on the frozen kernel the sampling phase
   would run. The paper is silent on disqualification; we chose: a trial whose audition
   diverged (a NaN reward) or whose chains disagree on the log density (split R-hat over
   the audition above `MAX_RHAT_LP`) is out. When both are out, HMC runs (the default
   recipe's kernel).
4. **Sampling**: the winner's frozen kernel continues from its trial's chain states (the
   adapted gadMALA factor included) and keeps exactly ``draws`` draws per chain. The
   audition's draws are not kept; every gradient of both trials is counted in the run's total.

Resuming a run folder repeats the warm-up and both trials (deterministic, as adaptive HMC's
warm-up is), then continues the sampling run from its checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc import tuners
from adaptmc.adaptation.low_rank import LowRankInverseMass, low_rank_dense
from adaptmc.adaptation.window import window_warmup
from adaptmc.diagnostics import rhat
from adaptmc.kernels import GADMALAParams, HMCParams, gadmala, hmc
from adaptmc.objectives import lag_one_ess_per_grad
from adaptmc.recipes.adaptive import check_sizes, tuned_plan, warmup_record
from adaptmc.recipes.parts import in_step_adaptation
from adaptmc.recipes.plan import Plan, Prepared, check_plan, options_of, sampling_length
from adaptmc.run import run
from adaptmc.run.loop import init_states
from adaptmc.targets.base import Target

NAME = "adaptive-portfolio"
MAX_RHAT_LP = 1.1  # Gelman & Rubin's classical threshold: the audition is short
KERNELS = ("hmc", "gadmala")


class Trial(NamedTuple):
    """One arm's trial: its score (NaN: out), what disqualified it (or None), the run's
    result (end states and frozen params) and facts for the record."""

    score: float
    out: str | None
    result: Any
    record: dict


def adaptive_portfolio(
    target: Target,
    *,
    metric: str = "auto",
    warmup_steps: int = 500,
    tuning: int = 12,
    audition: int = 4,
    draws: int = 1000,
    budget: int | None = None,
    jitter: float = 0.2,
    seed: int = 0,
) -> Plan:
    """Adaptive HMC or gadMALA, whichever wins an equal-cost trial (module docstring).

    Parameters
    ----------
    metric, warmup_steps, tuning, draws, budget, jitter
        As `adaptmc.recipes.adaptive_hmc`; ``tuning`` is also gadMALA's adapting
        super-transitions in its trial.
    audition
        Frozen super-transitions at the end of each trial, on which it is scored.
    seed
        Unused here (the warm-up takes the run's key); accepted for a uniform interface.
    """
    check_sizes(metric, budget, warmup_steps=warmup_steps, tuning=tuning,
                audition=audition, draws=draws)
    hmc.check_params(HMCParams(jitter=jitter))
    options = options_of(locals())

    return Plan(NAME, hmc, HMCParams(jitter=jitter), tuners.fixed(), lag_one_ess_per_grad,
                tuning + 1, max(budget or 1000, 1), tuning, tuning, options=options,
                warmup=PortfolioStage(metric, warmup_steps, tuning, audition, draws, budget,
                                      jitter, options),
                draws=draws)


@dataclass(frozen=True)
class PortfolioStage:
    """The warm-up and both trials as the first stage of a run, in one step (not
    resumable: a resumed run repeats it, deterministically, then continues from its
    checkpoint); ``finish`` gives the winner's sampling plan."""

    metric: str
    warmup_steps: int
    tuning: int
    audition: int
    draws: int
    budget: int | None
    jitter: float
    options: dict
    name: str = "portfolio"

    def start(self, target: Target, positions, key, progress=None) -> dict:
        return {"target": target, "positions": np.asarray(positions), "key": key,
                "prepared": None}

    def step(self, state: dict) -> dict:
        state["prepared"] = self.prepare(state["target"], state["positions"], state["key"])
        return state

    def done(self, state: dict) -> bool:
        return state["prepared"] is not None

    def position(self, state: dict) -> int:
        return int(self.done(state))

    def save(self, state: dict) -> None:
        return None

    def load(self, state: dict, arrays: dict) -> dict:
        return state

    def finish(self, state: dict) -> Prepared:
        return state["prepared"]

    def prepare(self, target: Target, positions: np.ndarray, key) -> Prepared:
        """The warm-up, both trials, the winner's plan and the record."""
        warm = window_warmup(target, positions, key, num_steps=self.warmup_steps,
                             metric=self.metric)
        hmc_plan = tuned_plan(warm, tuner="gp-ucb", tuning=self.tuning, draws=self.draws,
                              budget=self.budget, objective=lag_one_ess_per_grad,
                              jitter=self.jitter, options=self.options)
        trials = run_trials(target, warm, hmc_plan, self.audition, key)
        winner = choose(trials)
        plan = sampling_plan(winner, trials[winner].result, hmc_plan.gradient_budget,
                             self.draws, self.options)
        grads = warm.num_grads + sum(t.result.num_grads for t in trials.values())
        record = {**warmup_record(warm, hmc_plan),
                  "num_grads": grads, "warmup_num_grads": warm.num_grads,
                  "divergences": warm.divergences + sum(t.record["divergences"]
                                                        for t in trials.values()),
                  "wall_s": warm.wall_s + sum(t.result.wall_s for t in trials.values()),
                  "compile_s": warm.compile_s + sum(t.result.compile_s
                                                    for t in trials.values()),
                  "portfolio": portfolio_record(winner, trials)}
        return Prepared(plan, trials[winner].result.states.position, grads, record,
                        trials[winner].result.states)


def run_trials(target: Target, warm, hmc_plan: Plan, audition: int, key) -> dict[str, Trial]:
    """Both arms' trials from the warm-up ``warm``: ``tuning + audition`` super-transitions
    of ``hmc_plan``'s budget each, with run seeds drawn from ``key``."""
    tuning = hmc_plan.num_warmup
    length = tuning + audition
    hmc_trial = hmc_plan._replace(num_super_transitions=length, thin=1)
    gad_params = GADMALAParams(step_size=warm.step_size)
    gad_trial = Plan(NAME, gadmala, gad_params, in_step_adaptation(gadmala, None),
                     lag_one_ess_per_grad, length, hmc_plan.gradient_budget, tuning, tuning)
    check_plan(gad_trial)
    starts = gadmala_states(target, warm.positions, warm.step_size, warm.inverse_mass)
    chains = warm.positions.shape[0]
    return {
        "hmc": run_trial(target, hmc_trial, trial_seed(key, 0),
                         initial_positions=warm.positions),
        "gadmala": run_trial(target, gad_trial, trial_seed(key, 1), initial_states=starts,
                             init_grads=chains),
    }


def trial_seed(key, index: int) -> int:
    """A run seed for trial ``index`` from the preparation's key (so no trial shares the
    sampling run's keys)."""
    return int(jax.random.bits(jax.random.fold_in(key, index), dtype=jnp.uint32))


def gadmala_states(target: Target, positions, step_size: float, inverse_mass) -> Any:
    """gadMALA's chain states at ``positions: (chains, dim)`` with the factor
    ``L = step_size C``, ``C`` the lower Cholesky factor of ``inverse_mass`` (``(dim,)``
    diagonal, ``(dim, dim)`` or a `LowRankInverseMass`, made dense), written in the
    kernel's scaled parametrisation ``L = (I + N) diag(exp(l))``: ``exp(l) = step_size
    diag(C)``, ``I + N = C diag(C)^-1``."""
    states = init_states(target, gadmala, jnp.asarray(positions))
    if isinstance(inverse_mass, LowRankInverseMass):
        inverse_mass = low_rank_dense(inverse_mass)
    inverse_mass = np.asarray(inverse_mass, dtype=float)
    chol = np.diag(np.sqrt(inverse_mass)) if inverse_mass.ndim == 1 else \
        np.linalg.cholesky(inverse_mass)
    diag = np.diag(chol)
    chains = positions.shape[0]
    dtype = states.position.dtype
    log_diag = jnp.asarray(np.log(step_size * diag), dtype)
    unit_lower = jnp.asarray(np.tril(chol / diag[None, :], -1), dtype)
    factor = {"log_diag": jnp.broadcast_to(log_diag, (chains, *log_diag.shape)),
              "unit_lower": jnp.broadcast_to(unit_lower, (chains, *unit_lower.shape))}
    return states._replace(factor=factor)


def run_trial(target: Target, plan: Plan, seed: int, *, initial_positions=None,
              initial_states=None, init_grads: int = 0) -> Trial:
    """Run one arm's trial ``plan`` and score its audition (the super-transitions after
    ``plan.adapt_until``): the mean reward, out when a reward is NaN (a divergence) or the
    chains' split R-hat of the log density exceeds `MAX_RHAT_LP`. ``init_grads``: gradients
    spent making ``initial_states``, added to the trial's count."""
    chains = (initial_positions if initial_states is None else initial_states.position).shape[0]
    result = run(target, plan.kernel, plan.params,
                 num_super_transitions=plan.num_super_transitions,
                 gradient_budget=plan.gradient_budget, num_chains=chains, tuner=plan.tuner,
                 objective=plan.objective, num_warmup=plan.num_warmup,
                 adapt_until=plan.adapt_until, seed=seed, initial_positions=initial_positions,
                 initial_states=initial_states, thin=plan.thin, progress=False)
    result.num_grads += init_grads
    tuning = result.idata.tuning
    rewards = np.asarray(tuning["reward"].values, dtype=float)[plan.adapt_until:]
    lp = np.asarray(result.idata.sample_stats["lp"].values, dtype=float)
    rhat_lp = float(rhat(lp[..., None])[0]) if chains > 1 else 1.0
    score, out = float(np.mean(rewards)), None
    if not np.all(np.isfinite(rewards)):
        score, out = float("nan"), "diverged"
    elif not rhat_lp <= MAX_RHAT_LP:
        score, out = float("nan"), f"chains disagree (R-hat of lp {rhat_lp:.3f})"
    record = {"score": score, "out": out, "rhat_lp": rhat_lp,
              "audition_rewards": rewards.tolist(), "num_grads": result.num_grads,
              "divergences": int(np.sum(tuning["divergences"].values)),
              "params": _setting(result.params)}
    return Trial(score, out, result, record)


def choose(trials: dict[str, Trial]) -> str:
    """The arm with the higher score; HMC on a tie or when both are out."""
    gad, hmc_score = trials["gadmala"].score, trials["hmc"].score
    if np.isfinite(gad) and (not np.isfinite(hmc_score) or gad > hmc_score):
        return "gadmala"
    return "hmc"


def sampling_plan(winner: str, result, budget: int, draws: int, options: dict) -> Plan:
    """The winner's frozen kernel (its trial's last parameters) in super-transitions of
    ``budget`` gradients until each chain kept ``draws`` draws."""
    kernel = hmc if winner == "hmc" else gadmala
    params = result.params
    sampling = sampling_length(draws, budget // kernel.cost(params))
    plan = Plan(NAME, kernel, params, tuners.fixed(), lag_one_ess_per_grad, sampling, budget,
                0, 0, None, 0, options, None, 1, draws)
    check_plan(plan)
    return plan


def portfolio_record(winner: str, trials: dict[str, Trial]) -> dict:
    """The run's ``portfolio`` attribute: the winner and each trial's facts."""
    return {"winner": winner, "scores": {k: t.score for k, t in trials.items()},
            "trials": {k: t.record for k, t in trials.items()}}


def _setting(params) -> dict:
    """The scalar fields of a kernel's ``Params`` (JSON-able; the metric left out)."""
    out = {}
    for name, value in params._asdict().items():
        value = np.asarray(value)
        if value.ndim == 0:
            out[name] = value.item()
    return out


__all__ = ["KERNELS", "NAME", "adaptive_portfolio"]
