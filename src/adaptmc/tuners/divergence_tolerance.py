"""A tuner that counts a super-transition as failed only when more than a given fraction
of its steps diverged.

The bandits and the moving box treat a super-transition with any divergence as a failure
(`adaptmc.tuners.annealed`, `adaptmc.tuners.moving_box`): right for leapfrog, where a
divergence marks a step size past the stability limit of some region of the target (Neal
2011, Sec. 5.4.1). For kernels whose divergences are rare numerical events of an exactly
corrected step, e.g. a fixed point of the generalised leapfrog that did not converge
(`adaptmc.kernels.manifold`: the step is rejected, the chain stays exact), the strict rule
fails a super-transition of ``n`` steps whenever the rate exceeds about ``1 / n`` and pushes
the tuner to steps far below those a fixed-step pilot accepts. `tolerate_divergences` shows
the inner tuner no divergence while their fraction is at most ``max_rate``; pair it with
`adaptmc.objectives.tolerating_divergences` so that the reward agrees.

The run passes ``num_transitions`` (steps over all chains) in ``stats``; without it the
wrapper changes nothing (the strict rule).
"""

from __future__ import annotations

from adaptmc.tuners.base import Tuner, describe_inner


def tolerate_divergences(inner: Tuner, max_rate: float) -> Tuner:
    """``inner`` seeing ``divergences = 0`` in ``stats`` when at most ``max_rate`` of the
    super-transition's ``num_transitions`` diverged; above that, the counts unchanged.
    State ``{"inner": inner state}``; ``done`` and ``posterior`` are the inner tuner's."""
    if not 0.0 <= max_rate < 1.0:
        raise ValueError(f"max_rate must be in [0, 1), got {max_rate}")

    def init(key):
        return {"inner": inner.init(key)}

    def propose(key, state):
        proposal, inner_state = inner.propose(key, state["inner"])
        return proposal, {"inner": inner_state}

    def update(state, proposal, reward, stats):
        stats = dict(stats or {})
        transitions = stats.get("num_transitions")
        if transitions and stats.get("divergences", 0) <= max_rate * transitions:
            stats["divergences"] = 0
        return {"inner": inner.update(state["inner"], proposal, reward, stats)}

    def describe(state):
        return {"wrapper": "tolerate_divergences", "max_rate": max_rate,
                "inner": describe_inner(inner, state["inner"])}

    return Tuner(
        f"{inner.name}+tolerating", inner.names, init, propose, update,
        lambda state: inner.best(state["inner"]), describe,
        None if inner.done is None else (lambda state: inner.done(state["inner"])),
        None if inner.posterior is None else (lambda state: inner.posterior(state["inner"])),
    )
