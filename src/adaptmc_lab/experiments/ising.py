"""``adaptmc-lab reproduce ising``: intra-cluster moves on constrained Ising models and an RBM,
tuned by Bayesian optimisation (re-run of the protocol of Mahendran, Wang, Hamze & de
Freitas 2012, Sec. 5).

For each model (`adaptmc_lab.models.ising`: 2-d ferromagnet, 3-d spin glass, RBM) the same chains
(burned in with the expert move from uniform states of ``S_n``) are continued by five
methods:

- ``gp-hedge``: GP-Hedge over PI/EI/UCB tunes ``(L, gamma)`` on the talk's box for
  ``tune`` super-transitions of equal flips, rewarded by the windowed energy
  autocorrelation ``h`` (`energy_objective.windowed_autocorrelation`, with the energy's
  variance from the second half of the burn-in, the same for every setting), then freezes
  its best setting;
- ``sir-mixture``: the SIR policy, then the mixture of ``M = 10`` resampled settings
  (`adaptmc_lab.experiments.sir_mixture`);
- ``random``: random search over the box for as many super-transitions, then its best;
- ``expert``: the talk's hand-set move (no tuning);
- ``kawasaki``: single-pair-exchange Metropolis (no tuning).

The expert and Kawasaki run as many flips unmeasured as the tuners spend tuning, so every
method is measured from the same point: ``measure`` super-transitions of the same number of
flips per chain; the integrated autocorrelation time of the energy is reported in flips,
``tau = flips / ESS`` (chains pooled, bulk ESS), with flips per second of the measured phase
(all chains together, one process, wall clock). Tuning flips are reported separately.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc import diagnostics
from adaptmc.kernels.discrete import KawasakiParams, SAWParams, kawasaki, saw
from adaptmc.tuners import hedge, make_box, random_search
from adaptmc_lab.experiments import checked_sizes
from adaptmc_lab.experiments.energy_objective import windowed_autocorrelation
from adaptmc_lab.experiments.sir_mixture import sir_mixture
from adaptmc_lab.models import ising

MIXTURE_SIZE = 10
METHODS = ("gp-hedge", "sir-mixture", "random", "expert", "kawasaki")


@dataclass(frozen=True)
class Protocol:
    """One model of the talk: its box for ``(L, gamma)`` and the expert's move
    (``random_length``: ``L`` uniform on ``{1..walk_length}``), as issue #17 quotes them."""

    model: str
    walk_length: tuple[int, int]
    gamma: tuple[float, float]
    expert_length: int
    expert_gamma: float
    expert_random_length: bool


PROTOCOLS = {
    "ferromagnet-2d": Protocol("ferromagnet-2d", (1, 300), (0.0, 0.88), 90, 0.44, False),
    "spin-glass-3d": Protocol("spin-glass-3d", (1, 50), (0.0, 1.6), 25, 0.8, True),
    "rbm": Protocol("rbm", (1, 50), (0.0, 1.6), 20, 0.8, True),
}


@dataclass(frozen=True)
class Budget:
    """Flips per chain of one super-transition, of the shared burn-in, and the number of
    super-transitions of tuning and of measurement; chains run vmapped."""

    flips: int
    burn_in: int
    tune: int
    measure: int
    chains: int = 4


FULL = {"ferromagnet-2d": Budget(20_000, 2_000_000, 20, 10),
        "spin-glass-3d": Budget(20_000, 1_000_000, 25, 10),
        "rbm": Budget(6_000, 200_000, 25, 10)}
QUICK = {name: Budget(4_000, 4_000, 5, 3, 2) for name in PROTOCOLS}


def saw_params(walk_length, gamma, random_length=False) -> SAWParams:
    """Settings as ``(MIXTURE_SIZE,)`` vectors (a single setting repeated), so that single
    settings and SIR mixtures share one compiled program."""
    lengths = np.resize(np.asarray(walk_length, dtype=float), MIXTURE_SIZE)
    gammas = np.resize(np.asarray(gamma, dtype=float), MIXTURE_SIZE)
    return SAWParams(jnp.asarray(lengths), jnp.asarray(gammas), jnp.asarray(random_length))


class Segment:
    """One super-transition of every chain: ``budget // cost`` moves under ``jit``,
    recording each move's energy (positions are not kept: O(M) memory per chain). The loop
    runs outside the ``vmap`` over chains, so the energy buffer is updated in place."""

    def __init__(self, target, kernel, capacity: int):
        self.kernel, self.capacity = kernel, capacity

        def segment(keys, states, params, num_steps):
            step = jax.vmap(lambda k, s: kernel.step(k, s, target, params))
            fold = jax.vmap(jax.random.fold_in, in_axes=(0, None))
            num_chains = keys.shape[0]
            energies = jnp.zeros((num_chains, capacity), states.energy.dtype)

            def body(t, carry):
                states, energies, flips, accept = carry
                states, info = step(fold(keys, t), states)
                energies = jax.lax.dynamic_update_index_in_dim(energies, states.energy, t, 1)
                return states, energies, flips + info.num_grads, accept + info.acceptance_rate

            zero = jnp.zeros(num_chains, states.energy.dtype)
            return jax.lax.fori_loop(0, num_steps, body, (
                states, energies, jnp.zeros(num_chains, jnp.int32), zero))

        self.fn = jax.jit(segment)

    def __call__(self, key, states, params, flips: int):
        num_steps = min(self.capacity, max(1, flips // self.kernel.cost(params)))
        keys = jax.random.split(key, states.position.shape[0])
        states, energies, spent, accept = self.fn(keys, states, params, num_steps)
        return (states, np.asarray(energies[:, :num_steps]), np.asarray(spent),
                float(np.mean(accept)) / num_steps)


def energy_window(budget: Budget) -> tuple[float, float]:
    """Lags of the objective ``h``, in flips: 1/20 to 1/4 of a super-transition, so every
    setting of the box has at least two draws per window lag."""
    return budget.flips / 20, budget.flips / 4


def tau_in_flips(energies: np.ndarray, flips_per_chain: float) -> tuple[float, float]:
    """``(tau, ess)``: flips per effective draw of the energy, ``chains x flips / ESS``,
    where no chain moved (ESS 0) tau is reported as the whole measured length (ESS 1), a
    lower bound (`results_table` marks it unresolved)."""
    ess = float(diagnostics.ess(energies[..., None])[0])
    return energies.shape[0] * flips_per_chain / (ess if ess > 0 else 1.0), ess


def tune(segment, key, states, tuner, budget: Budget, variance: float | None):
    """Adapt ``tuner`` for ``budget.tune`` super-transitions, rewarded by the windowed
    energy autocorrelation ``h`` with the burn-in's ``variance`` (`windowed_autocorrelation`);
    returns the states, the tuner state, the flips spent (all chains) and the history
    ``[(L, gamma, h)]``."""
    tuner_state = tuner.init(jax.random.fold_in(key, 0))
    spent, history = 0, []
    for i in range(budget.tune):
        proposal, tuner_state = tuner.propose(jax.random.fold_in(key, 2 * i + 1), tuner_state)
        params = saw_params(proposal["walk_length"], proposal["gamma"])
        states, energies, flips, accept = segment(jax.random.fold_in(key, 2 * i + 2), states,
                                                  params, budget.flips)
        cost = flips.mean() / energies.shape[1]
        reward = windowed_autocorrelation(energies, cost, energy_window(budget), variance)
        # a discrete move's log ratio below -1000 is a rejection, not a divergence
        tuner_state = tuner.update(tuner_state, proposal, reward,
                                   {"divergences": 0, "acceptance_rate": accept,
                                    "num_grads": int(flips.sum())})
        spent += int(flips.sum())
        history.append((float(proposal["walk_length"]), float(proposal["gamma"]), reward))
    return states, tuner_state, spent, history


def measure(segment, key, states, params, budget: Budget) -> dict:
    """Run ``budget.measure`` super-transitions with fixed ``params``: energy trace, tau,
    acceptance, flips per second."""
    traces, flips, accepts = [], 0, []
    tick = time.perf_counter()
    for i in range(budget.measure):
        states, energies, spent, accept = segment(jax.random.fold_in(key, i), states, params,
                                                  budget.flips)
        traces.append(energies)
        flips += int(spent.sum())
        accepts.append(accept)
    wall = time.perf_counter() - tick
    energies = np.concatenate(traces, axis=1)
    tau, ess = tau_in_flips(energies, flips / energies.shape[0])
    return {"tau_flips": tau, "ess": ess, "flips": flips, "wall_s": wall,
            "energy_first": float(traces[0].mean()), "energy_last": float(traces[-1].mean()),
            "flips_per_s": flips / wall, "acceptance": float(np.mean(accepts)),
            "flips_per_draw": flips / energies.size, "energies": energies}


def burn_in(target, segment, key, budget: Budget, seed: int):
    """Kawasaki exchanges from uniform states of ``S_n`` for ``budget.burn_in`` flips per
    chain; returns the states, the energy's variance over the second half of the burn-in
    (all chains pooled: the stationary variance the tuners' objective divides by; `None`
    when the energy did not move) and the mean energy at the start and at the end."""
    graph = target.info["graph"]
    starts = jnp.asarray(ising.random_states(graph, budget.chains, seed + 1))
    states = jax.vmap(lambda x: kawasaki.init(x, target))(starts)
    num_segments = max(1, budget.burn_in // budget.flips)
    first = last = None
    kept = []
    for i in range(num_segments):
        states, energies, _, _ = segment(jax.random.fold_in(key, 1000 + i), states,
                                         KawasakiParams(), budget.flips)
        first = energies[:, 0].mean() if first is None else first
        last = energies[:, -1].mean()
        if i >= num_segments // 2:
            kept.append(energies[:, :: max(1, energies.shape[1] // 1000)])
    variance = float(np.var(np.concatenate(kept, axis=1)))
    return states, (variance if variance > 0 else None), (first, last)


def run_model(name: str, budget: Budget, seed: int = 0, log=print) -> dict:
    """Burn in with Kawasaki exchanges from uniform states, then tune (or, for the expert and
    Kawasaki, just run) for ``budget.tune`` super-transitions and measure every method on
    model ``name``; returns per-method results (energy traces included) and tuner states."""
    proto = PROTOCOLS[name]
    target = ising.MODELS[name](seed=seed)
    graph = target.info["graph"]
    box = make_box({"walk_length": proto.walk_length, "gamma": proto.gamma},
                   integer=("walk_length",))
    saw_segment = Segment(target, saw, budget.flips // 2 + 1)
    kawasaki_segment = Segment(target, kawasaki, budget.flips // 2 + 1)
    expert = saw_params(proto.expert_length, proto.expert_gamma, proto.expert_random_length)
    key = jax.random.fold_in(jax.random.key(seed), 17)

    tick = time.perf_counter()
    burned, variance, (first, last) = burn_in(target, kawasaki_segment, key, budget, seed)
    log(f"  {name}: Kawasaki burn-in {budget.burn_in} flips/chain, mean energy {first:.1f} -> "
        f"{last:.1f}, energy variance {variance}, {time.perf_counter() - tick:.1f} s "
        "(compile included)")
    states = jax.vmap(lambda x: saw.init(x, target))(burned.position)
    tuners = {"gp-hedge": hedge(box), "random": random_search(box),
              "sir-mixture": sir_mixture(box, num_settings=MIXTURE_SIZE, seed=seed)}
    results, tuner_states = {}, {}
    for index, method in enumerate(METHODS):
        method_key = jax.random.fold_in(key, 100 + index)
        tick = time.perf_counter()
        history, setting = [], None
        if method in tuners:
            chain, tuner_state, tuning_flips, history = tune(
                saw_segment, method_key, states, tuners[method], budget, variance)
            tuner_states[method] = tuner_state
            setting = tuners[method].best(tuner_state)
            segment, params = saw_segment, saw_params(setting["walk_length"], setting["gamma"])
        else:  # as many flips before measuring as the tuners spend tuning: same start
            segment, params, chain = ((kawasaki_segment, KawasakiParams(), burned)
                                      if method == "kawasaki" else (saw_segment, expert, states))
            chain, tuning_flips = advance(segment, method_key, chain, params, budget)
        out = measure(segment, jax.random.fold_in(method_key, 9), chain, params, budget)
        out.update(tuning_flips=tuning_flips, history=history,
                   setting=None if setting is None else {k: np.asarray(v).tolist()
                                                         for k, v in setting.items()},
                   total_s=time.perf_counter() - tick)
        results[method] = out
        log(f"  {name} {method:12s} tau {out['tau_flips']:12.0f} flips  ESS {out['ess']:8.1f}  "
            f"acc {out['acceptance']:.2f}  {out['flips_per_s']:9.0f} flips/s  E "
            f"{out['energy_first']:.1f} -> {out['energy_last']:.1f}  "
            f"setting {_describe(method, setting, proto)}")
    return {"results": results, "tuner_states": tuner_states, "box": box,
            "energy_variance": variance,
            "num_sites": graph.num_sites, "distance": graph.distance, "beta": graph.beta}


def advance(segment, key, states, params, budget: Budget):
    """``budget.tune`` unmeasured super-transitions; returns the states and flips spent."""
    spent = 0
    for i in range(budget.tune):
        states, _, flips, _ = segment(jax.random.fold_in(key, 2 * i + 2), states, params,
                                      budget.flips)
        spent += int(flips.sum())
    return states, spent


def _describe(method: str, setting, proto: Protocol) -> str:
    if method == "kawasaki":
        return "pair exchange"
    if method == "expert":
        length = (f"U{{1..{proto.expert_length}}}" if proto.expert_random_length
                  else str(proto.expert_length))
        return f"L={length}, gamma={proto.expert_gamma}"
    lengths = np.atleast_1d(setting["walk_length"])
    gammas = np.atleast_1d(setting["gamma"])
    if lengths.size > 1:
        return (f"mixture of {lengths.size}: L {lengths.min():.0f}-{lengths.max():.0f}, "
                f"gamma {gammas.min():.2f}-{gammas.max():.2f}")
    return f"L={lengths[0]:.0f}, gamma={gammas[0]:.3f}"


def _plot_acf(path: Path, name: str, results: dict, max_flips: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for method, out in results.items():
        energies, per_draw = out["energies"], out["flips_per_draw"]
        lags = max(2, min(energies.shape[1] // 2, int(max_flips / per_draw) + 1))
        acf = diagnostics.autocorrelation(energies, lags)
        ax.plot(np.arange(acf.size) * per_draw, acf,
                label=f"{method} (tau {out['tau_flips']:.3g})")
    ax.set(xlabel="lag (flips)", ylabel="energy autocorrelation", title=name,
           xlim=(0, max_flips))
    ax.axhline(0, color="grey", lw=0.5)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_surface(path: Path, name: str, box, tuner_state: dict, results: dict) -> None:
    """The GP-Hedge posterior mean of the normalised ``h`` over the box, with the settings
    tried and the SIR mixture."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from adaptmc.tuners.box import scale_unit
    from adaptmc.tuners.gp import gp_predict
    from adaptmc.tuners.surrogate import fit_gp

    grid = np.stack(np.meshgrid(np.linspace(0, 1, 60), np.linspace(0, 1, 60)), -1).reshape(-1, 2)
    mean = gp_predict(fit_gp(box, tuner_state), grid)[0].reshape(60, 60)
    xy = scale_unit(box, grid).reshape(60, 60, 2)
    fig, ax = plt.subplots(figsize=(6, 4))
    filled = ax.contourf(xy[..., 0], xy[..., 1], mean, levels=20, cmap="viridis")
    fig.colorbar(filled, label="GP mean of normalised h")
    points = np.asarray(tuner_state["points"])
    ax.scatter(points[:, 0], points[:, 1], c="white", s=12, edgecolors="k", label="GP-Hedge tries")
    mixture = (results.get("sir-mixture") or {}).get("setting")
    if mixture:
        ax.scatter(mixture["walk_length"], mixture["gamma"], marker="x", c="red",
                   label="SIR mixture")
    ax.set(xlabel="walk length L", ylabel="gamma", title=f"{name}: learned objective")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


MIN_ESS = 20
"""Below this many effective draws (``*`` in the table) tau is not resolved: the chains
hardly moved in the measured flips, and tau is at least of the order of their length."""


def results_table(all_results: dict) -> str:
    """Markdown: tau in flips per method and model, its ratio to the expert's, flips/s;
    ``*`` marks taus from fewer than `MIN_ESS` effective draws."""
    rows = ["| model | method | setting | tau (flips) | tau expert / tau | ESS | acceptance "
            "| flips/s | flips before measuring (tuning) |", "|" + "---|" * 9]
    for name, model in all_results.items():
        results = model["results"]
        expert_tau = results["expert"]["tau_flips"]
        for method, out in results.items():
            mark = "*" if out["ess"] < MIN_ESS else ""
            rows.append(
                f"| {name} | {method} | {_describe(method, out['setting'], PROTOCOLS[name])} "
                f"| {out['tau_flips']:.4g}{mark} | {expert_tau / out['tau_flips']:.2f} "
                f"| {out['ess']:.1f} | {out['acceptance']:.2f} | {out['flips_per_s']:.0f} "
                f"| {out['tuning_flips']} |")
    return "\n".join(rows)


def parameters_table(all_results: dict, budgets: dict) -> str:
    rows = ["| model | M | n | 1/beta | box L | box gamma | expert | flips / super-transition "
            "/ chain | chains | tuning / measured super-transitions | window of h (flips) |",
            "|" + "---|" * 11]
    for name, model in all_results.items():
        proto, budget = PROTOCOLS[name], budgets[name]
        rows.append(
            f"| {name} | {model['num_sites']} | {model['distance']} | {1 / model['beta']:g} "
            f"| {proto.walk_length[0]}..{proto.walk_length[1]} "
            f"| {proto.gamma[0]}..{proto.gamma[1]} "
            f"| {_describe('expert', None, proto)} | {budget.flips} | {budget.chains} "
            f"| {budget.tune} / {budget.measure} "
            f"| {energy_window(budget)[0]:g}..{energy_window(budget)[1]:g} |")
    return "\n".join(rows)


LITERATURE = (
    "Literature (second-hand, as issue #17 quotes the talk of Mahendran, Wang, Hamze & de "
    "Freitas 2012): the boxes and expert settings in the parameters table; the talk reports "
    "the BO-tuned move beating the expert's on all three models (no numbers quoted here).")


def budgets_with(budgets: dict, sizes: dict | None) -> dict:
    """``budgets`` (model -> `Budget`) with the fields named in ``sizes`` (``adaptmc
    reproduce ising --set measure=40``) replaced for every model; one clear error for an
    unknown field or a value that is not a positive integer (``burn_in`` may be 0)."""
    if not sizes:
        return dict(budgets)
    checked = checked_sizes("ising", sizes, tuple(Budget.__dataclass_fields__),
                            may_be_zero=("burn_in",))
    return {model: replace(budget, **checked) for model, budget in budgets.items()}


def run_ising(out, quick: bool = False, force: bool = False, seed: int = 0,
              models: tuple[str, ...] | None = None, sizes: dict | None = None) -> int:
    """Run the protocol on every model, write ``results.json``, ``table.md``,
    ``parameters.md`` and the figures ``acf_<model>.png`` and ``surface_<model>.png``.
    ``sizes``: `Budget` fields set for every model (`budgets_with`)."""
    from adaptmc import io

    budgets = budgets_with(QUICK if quick else FULL, sizes)  # checked before any writing
    out = Path(out)
    io.prepare_output_dir(out, force=force)
    io.create_output_dir(out, force=force)
    models = tuple(PROTOCOLS) if models is None else models
    started = time.perf_counter()
    all_results = {}
    for name in models:
        model = run_model(name, budgets[name], seed)
        all_results[name] = model
        _plot_acf(out / f"acf_{name}.png", name, model["results"], budgets[name].flips)
        _plot_surface(out / f"surface_{name}.png", name, model["box"],
                      model["tuner_states"]["gp-hedge"], model["results"])
    table, parameters = results_table(all_results), parameters_table(all_results, budgets)
    (out / "table.md").write_text(table + "\n")
    (out / "parameters.md").write_text(parameters + "\n\n" + LITERATURE + "\n")
    summary = {
        name: {method: {k: v for k, v in res.items() if k != "energies"}
               for method, res in model["results"].items()}
        for name, model in all_results.items()
    }
    summary["budgets"] = {name: asdict(budgets[name]) for name in models}
    summary["energy_variance"] = {name: all_results[name]["energy_variance"] for name in models}
    summary["wall_s"] = time.perf_counter() - started
    io.write_json(out / "results.json", summary)
    print(parameters, "", LITERATURE, "", table, sep="\n")
    print(f"\nwall {summary['wall_s']:.0f} s; written to {out}")
    return 0
