"""The early warm-up's schedule (`adaptmc.adaptation.early`): how many transitions its
phases run at most and at least, in chunks of `CHUNK`, and the directions its program
carries."""

from __future__ import annotations

import math

from adaptmc.adaptation.warmup_programs import CHUNK

EARLY_SHARE = 0.3
EARLY_MIN_SHARE = 0.1
FINAL_SHARE = 0.15
DENSE_MAX_DIM = 64
METRICS = ("auto", "diag", "dense", "low-rank")


def warmup_rank(dim: int, metric: str = "auto") -> int:
    """Directions the warm-up's program carries: every one up to `DENSE_MAX_DIM` (and when a
    dense metric is asked for), so that a dense metric is one of its metrics; above, a
    quarter of the dimension, at most 64, so the metric costs ``O(dim k)`` a step."""
    if metric == "diag":
        return 1
    if dim <= DENSE_MAX_DIM or metric == "dense":
        return dim
    return min(math.ceil(dim / 4), 64)


def early_min(num_steps: int) -> int:
    """The fewest transitions of the early phase: `EARLY_MIN_SHARE` of ``num_steps``, at
    least ``3 CHUNK``."""
    return max(3 * CHUNK, CHUNK * round(EARLY_MIN_SHARE * num_steps / CHUNK))


def schedule(num_steps: int) -> tuple[int, int]:
    """``(early_end, final_start)``: the most transitions of the early phase (it ends
    sooner once the chains agree, `settled.chains_agree`) and the first of the final,
    step-size-only window, both multiples of `CHUNK`."""
    final = max(3 * CHUNK, CHUNK * round(FINAL_SHARE * num_steps / CHUNK))
    early = CHUNK * round(EARLY_SHARE * num_steps / CHUNK)
    return min(early, num_steps - final), num_steps - final


def final_length(num_steps: int) -> int:
    """Transitions of the final window of a warm-up of ``num_steps`` (`schedule`)."""
    return num_steps - schedule(num_steps)[1]


def check_warmup(num_steps: int, metric: str) -> None:
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(map(repr, METRICS))}, "
                         f"got {metric!r}")
    if int(num_steps) != num_steps or num_steps < 10 * CHUNK:
        raise ValueError(f"the warm-up needs an integer number of steps >= {10 * CHUNK}, "
                         f"got {num_steps}")
