"""Bracketing search of a log step size toward a target acceptance: double while the target
is met, halve while it is missed, then bisect between the largest step that met it and the
smallest that did not (the step-size search of the mass warm-up and of Hoffman & Gelman's
2014, Algorithm 4, initial-step heuristic)."""

from __future__ import annotations

import math

import numpy as np


def bracket_step(log_step: float, bracket: np.ndarray, met_target: bool):
    """One bracketing move on the log step size.

    Parameters
    ----------
    log_step
        The log step size just tried.
    bracket
        ``(2,)``: ``[largest log step that met the target, smallest that missed it]``
        (``-inf`` / ``inf`` while none has).
    met_target
        Whether ``log_step`` met the target.

    Returns
    -------
    ``(new_log_step, new_bracket)``: ``log_step + log 2`` while nothing has missed,
    ``log_step - log 2`` while nothing has met, else the bracket's midpoint.
    """
    low, high = (max(bracket[0], log_step), bracket[1]) if met_target else \
        (bracket[0], min(bracket[1], log_step))
    if not np.isfinite(high):
        new = log_step + math.log(2.0)
    elif not np.isfinite(low):
        new = log_step - math.log(2.0)
    else:
        new = 0.5 * (low + high)
    return new, np.array([low, high])
