"""The stop rule (`adaptmc.tuners.stopping`) and the run loop's early end of adaptation: the
bound by hand, stopping at the minimum on a flat reward and never on a peaked one, the freed
super-transitions dropped with every gradient counted, resume across the stop point."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from adaptmc import recipes, tuners
from adaptmc.diagnostics import format_summary
from adaptmc.kernels import HMCParams, hmc
from adaptmc.recipes.adaptive import tuned_plan
from adaptmc.run import run
from adaptmc.targets import gaussian
from adaptmc.tuners.annealed import Posterior
from adaptmc.tuners.box import make_box, to_unit
from adaptmc.tuners.stopping import regret_bound, separation

BOX = make_box({"step_size": (0.05, 0.4), "num_leapfrog": (2, 12)}, integer=("num_leapfrog",),
               log=("step_size", "num_leapfrog"))
INITIAL = {"step_size": 0.15, "num_leapfrog": 5}
TARGET = gaussian(np.zeros(2), np.ones(2), name="iid-2d", initial_position=np.array([0.5, -0.5]))


def _stopper(min_updates: int, tolerance: float):
    return tuners.stop_when_separated(tuners.gp_ucb(BOX, initial=INITIAL),
                                      min_updates=min_updates, tolerance=tolerance)


def _drive(tuner, reward_fn, num_steps: int, seed: int):
    """Run ``tuner`` as the run loop would on ``reward_fn(u)`` (``u``: the unit point); the
    states after each update."""
    key = jax.random.key(seed)
    state = tuner.init(jax.random.fold_in(key, 10**6))
    states = []
    for i in range(num_steps):
        proposal, state = tuner.propose(jax.random.fold_in(key, i), state)
        u = to_unit(BOX, np.array([proposal["step_size"], proposal["num_leapfrog"]]))
        state = tuner.update(state, proposal, reward_fn(u), {"divergences": 0})
        states.append(state)
    return states


def test_regret_bound_and_expected_improvement_by_hand():
    """mu = 0.5 + 0.5 u, sd = 0.1 on a 1-d box: the measured best is u = 1 (LCB 0.8), the
    box's UCB peaks there at 1.2; rewards 2..4 make the bound 2 * 0.4 / 4 = 0.2. EI over
    mu(1) = 1 peaks there too, at 0.1 phi(0)."""
    box = make_box({"a": (0.0, 1.0)})
    predict = lambda u: (0.5 + 0.5 * np.asarray(u)[:, 0], np.full(len(u), 0.1))  # noqa: E731
    post = Posterior(box, predict, np.array([[0.2], [1.0]]), 2.0, 4.0)
    assert regret_bound(post) == pytest.approx(0.2, rel=1e-9)
    assert regret_bound(post, kappa=1.0) == pytest.approx(2 * 0.2 / 4, rel=1e-9)
    assert regret_bound(post._replace(measured=np.array([[1.0]]))) == math.inf  # < 2 d
    assert regret_bound(post._replace(low=-4.0, high=-2.0)) == math.inf  # no positive reward
    assert regret_bound(None) == math.inf
    ei = 0.1 / math.sqrt(2 * math.pi)
    assert separation(post)[2] == pytest.approx(2 * ei / 4, rel=1e-9)
    assert separation(post)[1] == pytest.approx(0.0, abs=1e-12)  # UCB peaks at the best
    # the best measured at u = 0.5 instead: the lead is mu(1) - mu(0.5) = 0.25, times 2 / 3.5
    lead = separation(post._replace(measured=np.array([[0.2], [0.5]])))[1]
    assert lead == pytest.approx(2 * 0.25 / 3.5, rel=0.02)  # DIRECT samples near u = 1


def test_stops_at_the_minimum_where_no_setting_can_be_much_better_and_never_before():
    """A clear best arm at the box's centre, 5 % above the rest: once four settings have
    scored, no setting can beat the frozen one by 10 %, so the rule fires at its minimum;
    before it the rule is not consulted."""
    tuner = _stopper(min_updates=5, tolerance=0.1)
    bump = lambda u: 1.0 + 0.05 * np.exp(-np.sum((u - 0.5) ** 2) / 0.1)  # noqa: E731
    states = _drive(tuner, bump, 9, seed=1)
    assert [tuner.done(s) for s in states] == [False] * 4 + [True] * 5
    assert int(states[-1]["stopped_at"]) == 5
    bounds = states[4]["gaps"]
    assert np.all(np.isnan(bounds[:4])) and bounds[4] <= 0.1 and len(bounds) == 5
    # stopped: it proposes its best, and rewards no longer reach the bandit
    after = states[-1]
    assert after["inner"]["rewards"].shape == (5,)
    proposal, _ = tuner.propose(jax.random.key(0), after)
    assert proposal == tuner.best(after)
    facts = tuner.describe(after)
    assert facts["wrapper"] == "stop" and facts["stopped_at"] == 5
    assert facts["gaps"][:4] == facts["leads"][:4] == facts["eis"][:4] == [None] * 4


def test_runs_to_the_maximum_on_a_peaked_reward():
    """A narrow peak (rewards 0.1 to 1.1 across the box): the bandit cannot rule out a better
    setting it has not measured, so the rule never fires in twelve updates."""
    tuner = _stopper(min_updates=5, tolerance=0.1)
    peak = np.array([0.8, 0.3])
    states = _drive(tuner, lambda u: 0.1 + np.exp(-np.sum((u - peak) ** 2) / 0.02), 12, seed=2)
    assert not any(tuner.done(s) for s in states)
    assert np.all(states[-1]["gaps"][4:] > 0.1)


def test_a_tuner_without_a_posterior_is_refused():
    with pytest.raises(ValueError, match="no posterior"):
        tuners.stop_when_separated(tuners.random_search(BOX), min_updates=3, tolerance=0.1)
    with pytest.raises(ValueError, match="min_updates"):
        tuners.stop_when_separated(tuners.gp_ucb(BOX), min_updates=0, tolerance=0.1)
    with pytest.raises(ValueError, match="rule"):
        tuners.stop_when_separated(tuners.gp_ucb(BOX), min_updates=3, tolerance=0.1,
                                   rule="pi")


def flat_reward(positions, stats, num_grads):
    """Every setting scores the same: the stop rule fires as soon as it may."""
    return 1.0


RUN = dict(num_super_transitions=10, gradient_budget=60, num_chains=2, num_warmup=6,
           adapt_until=6, objective=flat_reward, seed=4, progress=False, checkpoint_every=2)


def _run(tuner=None, **kwargs):
    tuner = _stopper(4, 0.1) if tuner is None else tuner
    return run(TARGET, hmc, HMCParams(jitter=0.2), tuner=tuner, **{**RUN, **kwargs})


def test_an_early_stop_drops_the_freed_tuning_and_counts_every_gradient():
    """Stopped after four of six tuning super-transitions: the run has two fewer, the four
    sampling ones as planned (the kept draws are theirs), the frozen setting is the tuner's
    best, and the gradients add up."""
    result = _run()
    tuning = result.idata.tuning
    assert tuning.attrs["adapted"] == 4 and tuning.attrs["adapt_until"] == 6
    assert tuning.sizes["super_transition"] == 8
    warm = np.asarray(tuning["warmup"].values, dtype=bool)
    np.testing.assert_array_equal(warm, [True] * 4 + [False] * 4)
    assert result.idata.posterior.sizes["draw"] == int(tuning["num_draws"].values[~warm].sum())
    assert result.idata.warmup_posterior.sizes["draw"] == int(
        tuning["num_draws"].values[warm].sum())
    # the starts' first states, and the checks: each start, the fingerprint's point
    assert result.num_grads == 2 + int(tuning["num_grads"].values.sum()) + 3
    assert result.idata.attrs["total_grad_evals"] == result.num_grads
    assert result.idata.attrs["num_super_transitions"] == 8
    assert "tuning stopped after 4 of at most 6" in format_summary(result.idata)
    frozen = (tuning["step_size"].values[4:], tuning["num_leapfrog"].values[4:])
    assert len(set(zip(*frozen, strict=True))) == 1
    facts = json.loads(tuning.attrs["tuner_config"])
    assert facts["stopped_at"] == 4
    # the same bandit without the stop rule: all six tuning super-transitions
    full = _run(tuners.gp_ucb(BOX, initial=INITIAL)).idata.tuning
    assert full.attrs["adapted"] == 6 and full.sizes["super_transition"] == 10
    assert int(np.sum(~np.asarray(full["warmup"].values, dtype=bool))) == 4
    # the first four super-transitions are the same in both runs
    np.testing.assert_array_equal(full["step_size"].values[:4], tuning["step_size"].values[:4])


@pytest.mark.parametrize("stop_after", [3, 5])
def test_resume_across_the_stop_point_is_bit_identical(tmp_path, stop_after):
    """Killed (``stop_after``) before the stop at super-transition 4 or after it, the resumed
    run makes the draws, record and gradient count of an uninterrupted one."""
    whole = _run()
    out = tmp_path / "run"
    assert _run(output_dir=out, stop_after=stop_after).idata is None
    meta = json.loads(bytes(np.load(out / "checkpoint.npz")["meta"]).decode())
    assert meta["next"] == stop_after
    assert meta["adapt_stop"] == (4 if stop_after > 4 else None)
    resumed = _run(output_dir=out, resume=True)
    np.testing.assert_array_equal(resumed.idata.posterior.x.values,
                                  whole.idata.posterior.x.values)
    for name in ("step_size", "num_leapfrog", "reward", "num_grads", "warmup"):
        np.testing.assert_array_equal(resumed.idata.tuning[name].values,
                                      whole.idata.tuning[name].values)
    assert resumed.num_grads == whole.num_grads
    assert resumed.idata.tuning.attrs["adapted"] == 4


def _warm(step_size=0.3):
    """What `tuned_plan` reads of a warm-up."""
    return SimpleNamespace(trajectory_steps=np.array([3, 5, 8, 10]), step_size=step_size,
                           inverse_mass=np.ones(2))


@pytest.mark.parametrize("tuner, tuning, tolerance, stops, first", [
    ("gp-ucb", 12, 0.1, True, 6), ("gp-ucb", 30, 0.1, True, 6), ("hedge", 12, 0.1, True, 6),
    ("gp-ucb", 6, 0.1, False, None), ("gp-ucb", 12, 0.0, False, None),
    ("random", 12, 0.1, False, None), ("parametric", 12, 0.1, False, None),
])
def test_adaptive_hmc_puts_its_gp_bandit_under_the_stop_rule(tuner, tuning, tolerance, stops,
                                                            first):
    """From `MIN_TUNING` (6) tuning super-transitions on; off with tolerance 0, with too
    little tuning, or without a GP posterior."""
    plan = tuned_plan(_warm(), tuner=tuner, tuning=tuning, draws=200, budget=None,
                      objective=None, jitter=0.2, options={},
                      stop=("ucb-lcb", tolerance))
    assert plan.tuner.name.startswith("stop+") == stops
    assert plan.adapt_until == plan.num_warmup == tuning
    facts = plan.tuner.describe(plan.tuner.init(jax.random.key(0)))
    if stops:
        assert facts["min_updates"] == first and facts["tolerance"] == tolerance
    # the GP bandits compare rewards on the log scale (`adaptive.LOG_SCALE`), the others not
    assert ("'log_rewards': True" in repr(facts)) == (tuner in ("gp-ucb", "hedge"))


def test_stop_tolerance_on_the_command_line_and_checked():
    from adaptmc.cli import build_parser, recipe_options

    args = build_parser().parse_args(["sample", "--target", "std-normal-10d", "--out", "x",
                                      "--stop-tolerance", "0"])
    assert recipe_options(args)["stop_tolerance"] == 0.0
    with pytest.raises(ValueError, match="stop_tolerance"):
        recipes.adaptive_hmc(TARGET, stop_tolerance=-0.1)
    with pytest.raises(ValueError, match="stop_rule"):
        recipes.adaptive_hmc(TARGET, stop_rule="pi")


def test_the_ei_rule_searches_ei_and_reads_the_ucb_at_its_points():
    """Each rule's own ratio comes from its own DIRECT search; the other rule's is a lower
    bound read at that search's points. On the by-hand posterior both acquisitions peak at
    u = 1, a measured setting, so both searches give the exact ratios."""
    box = make_box({"a": (0.0, 1.0)})
    predict = lambda u: (0.5 + 0.5 * np.asarray(u)[:, 0], np.full(len(u), 0.1))  # noqa: E731
    post = Posterior(box, predict, np.array([[0.2], [1.0]]), 2.0, 4.0)
    by_ucb, by_ei = separation(post, rule="ucb-lcb"), separation(post, rule="ei")
    np.testing.assert_allclose(by_ucb, by_ei, rtol=1e-12)
    bump = lambda u: (0.5 + 0.4 * np.exp(-(np.asarray(u)[:, 0] - 0.37) ** 2 / 0.01),  # noqa: E731
                      np.full(len(u), 0.05))
    post = post._replace(predict=bump, measured=np.array([[0.0], [1.0]]))
    ucb_gap, _, ei_read = separation(post, rule="ucb-lcb")
    ucb_read, _, ei_gap = separation(post, rule="ei")
    assert ei_read <= ei_gap * (1 + 1e-9) and ucb_read <= ucb_gap * (1 + 1e-9)
    assert ei_gap > 0.9 * ei_read and ucb_gap > 0.9 * ucb_read  # the peaks are near each other


def _tuning_length(draws: int, reward_fn, seed: int = 0) -> int:
    """Tuning super-transitions of the default plan (the ``ei`` rule at `value_tolerance`)
    after a warm-up of typical length 6, driven on ``reward_fn`` of the plan's own box."""
    from adaptmc.recipes.adaptive import STOP_RULE

    plan = tuned_plan(_warm(), tuner="gp-ucb", tuning=12, draws=draws, budget=None,
                      objective=None, jitter=0.2, options={}, stop=(STOP_RULE, None))
    key = jax.random.key(seed)
    state = plan.tuner.init(jax.random.fold_in(key, 10**6))
    for i in range(plan.adapt_until):
        proposal, state = plan.tuner.propose(jax.random.fold_in(key, i), state)
        u = to_unit(plan.box, np.array([proposal["step_size"], proposal["num_leapfrog"]]))
        state = plan.tuner.update(state, proposal, reward_fn(u), {"divergences": 0})
        if plan.tuner.done(state):
            return i + 1
    return plan.adapt_until


def test_default_tuning_earns_its_cost():
    """On a flat box (every setting within a few per cent) a 1000-draw run stops at the
    first super-transition the rule is consulted; a 100000-draw run, whose sampling phase
    a 1 % better setting would repay many super-transitions over, tunes to the end."""
    from adaptmc.recipes.adaptive import MIN_TUNING, value_tolerance

    rng = np.random.default_rng(0)
    flat = lambda u: 50.0 * (1 + 0.02 * rng.normal())  # noqa: E731
    assert _tuning_length(1000, flat) == MIN_TUNING
    assert _tuning_length(100_000, flat) == 12
    assert value_tolerance(160, 1000, 8) == pytest.approx(0.02)


def test_separation_on_the_log_scale_is_a_fraction_of_the_frozen_reward():
    """With rewards compared on the log scale a normalised difference ``d`` over a range of
    log rewards ``span`` is the ratio ``exp(span d)``: the rule's ratios are ``expm1`` of it
    (here the box's best lies half the range, a factor sqrt(2), above the frozen setting)."""
    from adaptmc.tuners.annealed import Posterior
    from adaptmc.tuners.stopping import SETTINGS_PER_DIM, separation

    box = tuners.make_box({"step_size": (0.1, 1.0)}, log=("step_size",))
    measured = np.linspace(0.0, 0.5, SETTINGS_PER_DIM + 1)[:, None]

    def predict(u):
        u = np.atleast_2d(u)
        return u[:, 0].astype(float), np.zeros(len(u))

    posterior = Posterior(box, predict, measured, np.log(10.0), np.log(20.0), log=True)
    for rule in ("ucb-lcb", "ucb", "ei"):
        for ratio in separation(posterior, rule=rule):
            assert ratio == pytest.approx(np.sqrt(2.0) - 1.0, rel=1e-3)  # DIRECT's grid
    linear = posterior._replace(low=10.0, high=20.0, log=False)
    assert separation(linear, rule="ei")[2] == pytest.approx(5.0 / 15.0, rel=1e-3)


def test_the_default_tunes_only_what_a_tenth_of_the_sampling_pays_for():
    """``tuning=None``: as many super-transitions as `TUNING_SHARE` of the sampling's
    gradients (``draws`` NUTS transitions of the warm-up's mean length) pays for, at most
    `TUNING`, none when fewer than `MIN_TUNING`; an integer is taken as asked."""
    from adaptmc.recipes.adaptive import MIN_TUNING, TUNING, TUNING_SHARE, planned_tuning

    assert planned_tuning(None, 400, 1000, 5.0) == 0  # 500 gradients pay for one: none
    assert planned_tuning(None, 400, 100_000, 5.0) == TUNING
    enough = int(np.ceil(MIN_TUNING * 400 / (TUNING_SHARE * 5.0)))
    assert planned_tuning(None, 400, enough, 5.0) == MIN_TUNING
    assert planned_tuning(None, 400, enough - 1, 5.0) == 0
    assert planned_tuning(3, 400, 1000, 5.0) == 3 and planned_tuning(0, 400, 10**6, 5) == 0
    plan = tuned_plan(_warm(), tuner="gp-ucb", tuning=None, draws=1000, budget=None,
                      objective=None, jitter=0.2, options={}, stop=("ei", None))
    assert plan.adapt_until == plan.num_warmup == 0 and not plan.tuner.name.startswith("stop+")
    plan = tuned_plan(_warm(), tuner="gp-ucb", tuning=None, draws=100_000, budget=None,
                      objective=None, jitter=0.2, options={}, stop=("ei", None))
    assert plan.adapt_until == plan.num_warmup == TUNING
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="tuning"):
            recipes.adaptive_hmc(TARGET, tuning=bad)


def test_a_default_run_samples_with_nuts_right_after_the_warm_up():
    """A 1000-draw default run tunes nothing (`planned_tuning`): NUTS samples under the
    warm-up's metric, recorded in the ``sampler`` attr, every gradient counted."""
    import adaptmc

    idata = adaptmc.sample("std-normal-10d", chains=2, seed=0, progress=False, draws=200,
                           warmup_steps=150, mams="off")  # MAMS samples by default
    assert json.loads(idata.attrs["sampler"])["sampler"] == "nuts"
    assert idata.tuning.attrs["adapt_until"] == 0  # no tuning super-transition
    assert not np.any(idata.tuning["warmup"].values)
    assert idata.posterior.sizes["draw"] == 200
    assert np.all((0.6 < idata.tuning["acceptance_rate"].values)
                  & (idata.tuning["acceptance_rate"].values < 0.95))
