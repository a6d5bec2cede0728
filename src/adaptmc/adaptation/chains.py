"""How the warm-up's chains run and what it checks of them: in lockstep or one after the
other (and the gradients each way computes), and which chain ended far from the others."""

from __future__ import annotations

import functools

import jax
import numpy as np

FAR = 4.0
"""How many of the other chains' standard deviations a chain's mean over the final window
may lie from theirs, in some coordinate, before it counts as far (`far_chains`)."""


def lockstep() -> bool:
    """Whether the warm-up runs its chains in lockstep (``jax.vmap``): on an accelerator,
    where one batched step costs about what one chain's does. A vmapped ``while_loop`` runs
    until its last chain is done, evaluating every chain's gradient at every step, so a
    NUTS transition costs ``chains x`` the longest chain's steps (or a little more: a
    finished chain's inner tree-building loop runs with the others'). On a CPU, where every
    chain's gradient costs its own time, the chains run one after the other
    (``jax.lax.map``): each computes exactly the gradients its own trajectories take."""
    return jax.default_backend() != "cpu"


def over_chains(fn):
    """``fn(row)`` over a leading chain axis of every array of ``rows`` (a tuple):
    vmapped in `lockstep`, else mapped one chain at a time. No Python frame of its own
    stands between the caller and ``fn`` (the path to a kernel step stays short)."""
    if lockstep():
        return jax.vmap(fn)
    return functools.partial(jax.lax.map, fn)


def chain_grads(per_chain: np.ndarray) -> int:
    """Gradients computed for ``per_chain: (chains, ...)`` steps per transition: their sum
    when the chains run one after the other, ``chains x`` each transition's longest when
    they run in `lockstep` (its lower bound: see there)."""
    per_chain = np.asarray(per_chain)
    if not lockstep():
        return int(np.sum(per_chain))
    return int(per_chain.shape[0] * np.sum(np.max(per_chain, axis=0)))


def far_chains(draws: np.ndarray, logdensity: np.ndarray) -> list[tuple[int, bool]]:
    """Chains whose mean over ``draws: (chains, n, dim)`` lies more than `FAR` standard
    deviations of the other chains' pooled draws from those chains' mean, in some
    coordinate (a chain left in another mode, or still on its way in), each with whether
    its mean ``logdensity: (chains, n)`` is below the others' (a lesser mode). Needs three
    chains: of two, neither is the odd one."""
    chains = draws.shape[0]
    if chains < 3:
        return []
    out = []
    for c in range(chains):
        others = np.delete(draws, c, axis=0).reshape(-1, draws.shape[-1])
        sd = others.std(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            distance = np.abs(draws[c].mean(axis=0) - others.mean(axis=0)) / sd
        if np.any(np.nan_to_num(distance, nan=0.0, posinf=np.inf) > FAR):
            lower = logdensity[c].mean() < np.delete(logdensity, c, axis=0).mean()
            out.append((c, bool(lower)))
    return out


def regroup_far_chains(run, first_chunk: int) -> dict | None:
    """Before tuning (``run``: the warm-up's chains, `adaptmc.adaptation.early`; its final
    window from chunk ``first_chunk``): each chain `far_chains` finds in the final window
    with a lower log density than the others is moved to where the chain of highest mean
    log density stands (its state copied); a far chain of higher log density stays (the
    others may be the ones in a lesser mode). Returns what was found (for a warning),
    None if nothing. The metric was pooled over every chain and is kept: the chains
    tuning and sampling go on from are the agreeing ones."""
    x = np.concatenate(run.out["x"][first_chunk:], axis=1)
    lp = np.concatenate(run.out["lp"][first_chunk:], axis=1)
    found = far_chains(x, lp)
    if not found:
        return None
    moved = [c for c, lower in found if lower]
    best = int(np.argmax(np.where(np.isin(np.arange(len(lp)), moved), -np.inf,
                                  lp.mean(axis=1))))
    if moved:
        rows = np.arange(len(lp))
        rows[moved] = best
        # rows picked on the host: indexing a device array compiles a program per shape
        run.state = jax.tree_util.tree_map(lambda a: np.asarray(a)[rows], run.state)
        run.da = jax.tree_util.tree_map(lambda a: np.asarray(a)[rows], run.da)
    return {"moved": moved, "to": best if moved else None,
            "kept": [c for c, lower in found if not lower]}
