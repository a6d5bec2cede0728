"""Facts of a run's record for its summary: where its gradients went and the chains its
warm-up found far from the others (`adaptmc.diagnostics.format_summary`)."""

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
