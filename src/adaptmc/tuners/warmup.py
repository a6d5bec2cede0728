"""A tuner that only switches settings when burn-in ends.

Kernels that adapt inside every step (gradient-based adaptive MCMC, adaptive Metropolis,
per-step dual averaging) carry their adaptation in their state and take an ``adapt``
switch at call time. `switch_after_warmup` proposes ``during`` for every super-transition
and returns ``after`` as its ``best``; the switch happens where the tuner is frozen: with
``num_warmup`` given it is wrapped in `adaptmc.tuners.freeze.freeze` (after ``num_warmup``
super-transitions), otherwise ``run(..., adapt_until=n)`` freezes it at super-transition
``n``. ``after={"adapt": 0}`` stops adaptation; ``after={"lr_decay": 0.6}`` lets it go on
diminishing.
"""

from __future__ import annotations

from adaptmc.tuners.base import Tuner
from adaptmc.tuners.freeze import freeze


def switch_after_warmup(during: dict | None = None, after: dict | None = None,
                        num_warmup: int | None = None) -> Tuner:
    """``during`` (default ``{"adapt": 1}``) until the tuner is frozen, then ``after`` (default
    ``{"adapt": 0}``); both dicts map kernel parameter names to numbers. ``num_warmup``:
    freeze after that many super-transitions (`freeze`); None leaves freezing to the run's
    ``adapt_until``."""
    during = {"adapt": 1.0} if during is None else dict(during)
    after = {"adapt": 0.0} if after is None else dict(after)
    names = tuple(dict.fromkeys((*during, *after)))
    for name in names:
        if name not in during or name not in after:
            raise ValueError(f"{name!r} must be set both during and after warm-up")
    facts = {"policy": "switch-after-warmup", "during": during, "after": after}
    switch = Tuner(
        name="switch-after-warmup",
        names=names,
        init=lambda key: (),
        propose=lambda key, state: (dict(during), state),
        update=lambda state, proposal, reward, stats: state,
        best=lambda state: dict(after),
        describe=lambda state: facts,
    )
    return switch if num_warmup is None else freeze(switch, num_warmup)
