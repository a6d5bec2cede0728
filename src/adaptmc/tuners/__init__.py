"""Tuners that set kernel parameters between super-transitions.

A tuner is ``init / propose / update / best`` (and optionally ``describe``) over an explicit
state (`Tuner`, `adaptmc.tuners.base`). The bandits are split as BoTorch splits Bayesian
optimisation:

- surrogates: `adaptmc.tuners.gp` (GP on the unit cube), `adaptmc.tuners.nig` (Bayesian
  parametric NIG model), `adaptmc.tuners.surrogate` (reward normalisation, their
  hyperparameters ``GPConfig`` / ``NIGConfig`` and fits over a box);
- acquisitions: `adaptmc.tuners.acquisition` (UCB, EI, PI, Student-t EI, Hedge);
- the acquisition optimiser: `adaptmc.tuners.optimise` (batched DIRECT);
- by name: `TUNERS` (`adaptmc.tuners.named`), the dict the recipes and the command line
  read; a new tuner is one module and one entry there;
- policies: `adaptmc.tuners.policies` (`gp_ucb`, `parametric`, `hedge`, `sir`,
  `random_search`) over the annealed adoption rule of `adaptmc.tuners.annealed`; baselines
  `fixed`, `grid` and `dual_averaging_tuner`.

Wrappers compose like Optax transforms. Each is ``wrapper(inner: Tuner, **options) -> Tuner``:
its state is a dict holding the inner state under ``"inner"``, its ``describe`` nests the
inner facts under ``"inner"``, and `chain` applies several, innermost first::

    tuner = chain(partial(mass_adaptation, dim=d, num_warmup=15, warm_start=True),
                  partial(freeze, after=30))(gp_ucb(box))

- `mass_adaptation` (`adaptmc.tuners.mass`): mass matrix and step size during warm-up,
  then the inner tuner;
- `freeze` (`adaptmc.tuners.freeze`): after ``after`` updates, ``inner.best`` forever;
- `moving_box` (`adaptmc.tuners.moving_box`): while every reward is NaN, the step's range
  shrinks below the smallest failed step and the policy starts afresh in it; at mid-tuning
  an edge holding the best setting extends (it wraps a policy-maker, ``make(box,
  initial)``, since the policy's box is what changes);
- `stop_when_separated` (`adaptmc.tuners.stopping`): adapt until the bandit's posterior
  bounds the reward lost by freezing its best setting within a tolerance (a UCB/LCB gap),
  then ``best`` forever, with ``done`` True so that the run freezes at once;
- `tolerate_divergences` (`adaptmc.tuners.divergence_tolerance`): a super-transition fails
  only when more than a fraction of its steps diverged (kernels whose divergences are rare
  numerical events of an exactly corrected step, e.g. MSD's fixed points);
- `switch_after_warmup` (`adaptmc.tuners.warmup`): the burn-in switch of kernels that adapt
  inside each step (``during`` until frozen, then ``after``; ``num_warmup`` wraps it in
  `freeze`).
"""

from adaptmc.tuners.base import Tuner, Wrapper, chain
from adaptmc.tuners.box import Box, box_from_tunables, make_box, parse_box
from adaptmc.tuners.divergence_tolerance import tolerate_divergences
from adaptmc.tuners.fixed import fixed, grid
from adaptmc.tuners.freeze import freeze
from adaptmc.tuners.mass import mass_adaptation
from adaptmc.tuners.moving_box import moving_box
from adaptmc.tuners.named import TUNERS, TunerEntry, bandit_tuners
from adaptmc.tuners.policies import gp_ucb, hedge, parametric, random_search, sir
from adaptmc.tuners.schedules import SCHEDULES, constant, exponential, geometric, polynomial
from adaptmc.tuners.step_size import dual_averaging_tuner
from adaptmc.tuners.stopping import stop_when_separated
from adaptmc.tuners.surrogate import normalise_rewards
from adaptmc.tuners.warmup import switch_after_warmup

__all__ = [
    "SCHEDULES",
    "TUNERS",
    "TunerEntry",
    "bandit_tuners",
    "Box",
    "Tuner",
    "Wrapper",
    "chain",
    "box_from_tunables",
    "constant",
    "dual_averaging_tuner",
    "exponential",
    "fixed",
    "freeze",
    "geometric",
    "gp_ucb",
    "grid",
    "hedge",
    "make_box",
    "mass_adaptation",
    "moving_box",
    "normalise_rewards",
    "parametric",
    "parse_box",
    "polynomial",
    "random_search",
    "sir",
    "stop_when_separated",
    "switch_after_warmup",
    "tolerate_divergences",
]
