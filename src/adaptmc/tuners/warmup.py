"""A tuner that only switches settings when burn-in ends.

Kernels that adapt inside every step (gradient-based adaptive MCMC, adaptive Metropolis,
per-step dual averaging) carry their adaptation in their state and take an ``adapt``
switch at call time. `switch_after_warmup` proposes ``during`` for every super-transition
and returns ``after`` as its ``best``, so ``run(..., adapt_until=n)`` freezes adaptation
(``after={"adapt": 0}``) or lets it go on diminishing (``after={"lr_decay": 0.6}``) from
super-transition ``n`` on.
"""

from __future__ import annotations

from adaptmc.tuners.base import Tuner


def switch_after_warmup(during: dict | None = None, after: dict | None = None) -> Tuner:
    """``during`` (default ``{"adapt": 1}``) until ``adapt_until``, then ``after`` (default
    ``{"adapt": 0}``); both dicts map kernel parameter names to numbers."""
    during = {"adapt": 1.0} if during is None else dict(during)
    after = {"adapt": 0.0} if after is None else dict(after)
    names = tuple(dict.fromkeys((*during, *after)))
    for name in names:
        if name not in during or name not in after:
            raise ValueError(f"{name!r} must be set both during and after warm-up")
    return Tuner(
        name="switch-after-warmup",
        names=names,
        init=lambda key: (),
        propose=lambda key, state: (dict(during), state),
        update=lambda state, proposal, reward, stats: state,
        best=lambda state: dict(after),
    )
