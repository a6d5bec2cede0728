"""Facts of a run's record for its summary: where its gradients went, the chains its
warm-up found far from the others, where tuning stopped, the portfolio's trials and the
run's notes (`adaptmc.diagnostics.format_summary`)."""

from __future__ import annotations

import json

import numpy as np


def gradient_shares(idata, attrs: dict) -> dict[str, int]:
    """Gradients over all chains spent before the first kept draw (``warm-up``: a recipe's
    own warm-up and the chains' first evaluations; ``tuning``: the super-transitions whose
    draws were not kept) and after it (``sampling``), from the run's record; they add up to
    its ``total_grad_evals``. Empty without a tuning record."""
    tuning = getattr(idata, "tuning", None)
    if tuning is None or "num_grads" not in tuning or "warmup" not in tuning:
        return {}
    total = int(attrs.get("total_grad_evals", 0))
    unkept = np.asarray(tuning["warmup"].values, dtype=bool)
    grads = np.asarray(tuning["num_grads"].values, dtype=float)
    tuned, sampled = int(grads[unkept].sum()), int(grads[~unkept].sum())
    return {"warm-up": max(0, total - tuned - sampled), "tuning": tuned, "sampling": sampled}


def share_lines(idata, attrs: dict) -> list[str]:
    """The line saying where the gradients went: warm-up, tuning, sampling, each with its
    share of the run's total."""
    shares = gradient_shares(idata, attrs)
    total = sum(shares.values())
    if not total:
        return []
    return ["gradients: " + ", ".join(f"{name} {count:,} ({100 * count / total:.0f} %)"
                                      for name, count in shares.items())]


def far_chain_warnings(attrs: dict) -> list[str]:
    """From a run's attributes ``attrs``: the warm-up's far chains
    (`adaptmc.adaptation.chains.regroup_far_chains`), named."""
    warm = attrs.get("warmup")
    warm = json.loads(warm) if isinstance(warm, str) else dict(warm or {})
    far = warm.get("far_chains")
    if not far:
        return []
    out = []
    if far["moved"]:
        out.append(f"chain {', '.join(map(str, far['moved']))} ended the warm-up far from the "
                   f"others at a lower log density (a second mode?) and was restarted from "
                   f"chain {far['to']}'s position before tuning: the draws do not visit "
                   "that region")
    if far["kept"]:
        out.append(f"chain {', '.join(map(str, far['kept']))} ended the warm-up far from the "
                   "others at a higher log density (a second mode?): the chains disagree")
    return out


def stop_lines(idata) -> list[str]:
    """The line of a run whose tuner stopped adapting before its ``adapt_until`` (a stop
    rule, `adaptmc.tuners.stopping`): how many tuning super-transitions it took."""
    tuning = getattr(idata, "tuning", None)
    attrs = {} if tuning is None else tuning.attrs
    adapted, most = int(attrs.get("adapted", -1)), int(attrs.get("adapt_until", -1))
    if not 0 <= adapted < most:
        return []
    return [f"tuning stopped after {adapted} of at most {most} super-transitions (stop rule; "
            "the tuning record's tuner_config says why)"]


def portfolio_lines(attrs: dict) -> list[str]:
    """The line of an ``adaptive-portfolio`` run (``attrs["portfolio"]``): which kernel won
    and both trials' scores (lag-one ESS per 1000 gradients; NaN and why when out)."""
    if "portfolio" not in attrs:
        return []
    record = attrs["portfolio"]
    record = json.loads(record) if isinstance(record, str) else record
    scores = []
    for name, trial in record["trials"].items():
        score = trial["score"]
        scores.append(f"{name} {score:.4g}" + (f" (out: {trial['out']})" if trial["out"]
                                               else ""))
    return [f"portfolio: {record['winner']} won the trials (ess-lag1 per 1000 gradients: "
            + ", ".join(scores) + ")"]


def notes(attrs: dict, num_chains: int) -> list[str]:
    """The summary's quiet lines: the run's tuning notes
    (`adaptmc.diagnostics.tuning_notes`) and, for one chain, that R-hat needs more."""
    notes = attrs.get("tuning_notes", "[]")
    notes = json.loads(notes) if isinstance(notes, str) else list(notes)
    out = [f"note: {n}" for n in notes]
    record = _sampler(attrs)
    if record is not None and record["sampler"] == "mams":
        out.append(f"note: {mams_line(record)}")
    elif record is not None and _tuned(record):
        out.append(f"note: {sampler_line(record)}")
    elif record is not None and record.get("thinned"):
        out.append("note: sampled with the warm-up's HMC setting, untuned: NUTS, which "
                   "would have sampled, does not thin (--thin); --tuning N tunes HMC first")
    tried = _warmup_mams(attrs)
    if tried is not None and not tried["used"]:
        out.append(f"note: {mams_dropped_line(tried)}")
    if num_chains == 1:
        out.append("note: R-hat needs two chains or more (--chains); it is not computed")
    return out


def mams_dropped_line(tried: dict) -> str:
    """Why MAMS did not sample (`adaptmc.recipes.mams_sampling.STEP_FLOOR`) and what it
    cost."""
    return (f"MAMS not used: its step fell to {tried['step_size']:.3g}, below its floor "
            f"{tried['floor']:.3g} (a tenth of its first; a log density with walls?); NUTS "
            f"sampled instead, after {tried['num_grads']:,} gradients of MAMS's adaptation "
            "(counted before the first draw)")


def _warmup_mams(attrs: dict) -> dict | None:
    record = attrs.get("warmup")
    record = json.loads(record) if isinstance(record, str) else record
    return (record or {}).get("mams")


def sampler_line(record) -> str:
    """Which sampler the run sampled with after tuning and both rewards
    (`adaptmc.run.nuts_stage.choose_sampler`)."""
    record = json.loads(record) if isinstance(record, str) else record
    nuts, hmc = record["nuts_reward"], record["hmc_reward"]
    won = "NUTS under the warm-up's metric" if record["sampler"] == "nuts" else \
        "the frozen HMC setting"
    return (f"sampled with {won} (reward, robust ESS per 1000 gradients of the run: NUTS "
            f"{nuts:.4g}, HMC {hmc:.4g})")


def mams_line(record: dict) -> str:
    """How MAMS sampled (`adaptmc.recipes.mams_sampling`): its step, steps per transition,
    and the thinning the run measured."""
    every = _ordinal(int(record["thin"]))
    return (f"MAMS step {record['step_size']:.3g} x {record['num_leapfrog']} steps "
            f"(trajectory length from the chains' autocorrelation, acceptance "
            f"{record['target_accept']:g} by dual averaging); every "
            f"{every}transition kept (k* = {record['k_star']:.3g} from ESS per transition "
            f"{record['r1']:.3g}, {record['overhead_per_draw']:.3g} gradients per chain per "
            "draw before the first)")


def _ordinal(k: int) -> str:
    return {1: "", 2: "2nd ", 3: "3rd "}.get(k, f"{k}th ")


def _sampler(attrs: dict) -> dict | None:
    record = attrs.get("sampler")
    return json.loads(record) if isinstance(record, str) else record


def _tuned(record: dict | None) -> bool:
    """Whether HMC was tuned before the sampler was chosen (its reward was measured)."""
    return record is not None and np.isfinite(float(record["hmc_reward"]))


def header_lines(attrs: dict, num_chains: int, num_draws: int) -> list[str]:
    """The summary's first two lines: the target and what sampled (the kernel and tuner, or
    NUTS under the warm-up's metric, `adaptmc.run.nuts_stage`), chains and draws (and the
    super-transitions of a run that sampled with them)."""
    record = _sampler(attrs)
    target = f"target {attrs.get('target', '?')}"
    if record is not None and record["sampler"] == "mams":
        return [f"{target}  sampler MAMS under the warm-up's metric, every "
                f"{_ordinal(int(attrs.get('thin', record['thin'])))}transition",
                f"chains {num_chains}  draws/chain {num_draws}"]
    if record is not None and record["sampler"] == "nuts":
        after = f" after tuning HMC with {attrs.get('tuner', '?')}" if _tuned(record) else ""
        return [f"{target}  sampler NUTS under the warm-up's metric{after}",
                f"chains {num_chains}  draws/chain {num_draws}"]
    return [f"{target}  kernel {attrs.get('kernel', '?')}  tuner {attrs.get('tuner', '?')}",
            f"chains {num_chains}  draws/chain {num_draws}  super-transitions "
            f"{attrs.get('num_super_transitions', '?')} x {attrs.get('gradient_budget', '?')} "
            "gradients"]


def census_lines(attrs: dict) -> list[str]:
    """One line from the run's compile census (`adaptmc.run.compile_clock.census`), when it
    has one: how many programs XLA compiled for the run (how many of them alongside it, in
    threads of their own), how many it loaded from the persistent compile cache, and the
    seconds the run waited for tracing, lowering and compiling (its ``compile_s``; the
    census's own sum when the record has none)."""
    if "compile_census" not in attrs:
        return []
    programs = json.loads(attrs["compile_census"])
    loaded = sum(1 for p in programs if p.get("cached"))
    compiled = sum(1 for p in programs if p["compile_s"] > 0) - loaded
    seconds = float(attrs.get("compile_s", sum(p["trace_s"] + p["lower_s"] + p["compile_s"]
                                               for p in programs)))
    ahead = sum(1 for p in programs if p["compile_s"] > 0 and p.get("ahead"))
    alongside = f" ({ahead} of them alongside the run)" if ahead else ""
    return [f"compiled {compiled} programs, loaded {loaded} from the compile cache, in "
            f"{seconds:.1f} s{alongside}"]
