"""The schedule of the super-transitions stage: which super-transitions adapt the tuner,
which are warm-up (their draws not kept), and how long the run is, given where the tuner's
stop rule ended adaptation (``adapt_stop``) and, with ``num_draws``, how many draws are
still to keep. Pure arithmetic over a `Progress`'s record and counters."""

from __future__ import annotations

from typing import NamedTuple


class Phases(NamedTuple):
    """num_super_transitions: the planned length; num_warmup: leading super-transitions
    whose draws go to the ``warmup_*`` groups; adapt_until: where the tuner's best is frozen
    (None: never); num_draws: None, or kept draws per chain, exactly."""

    num_super_transitions: int
    num_warmup: int
    adapt_until: int | None
    num_draws: int | None

    def shift(self, state) -> int:
        """Super-transitions an early stop of the tuner freed (0 without one)."""
        if state.adapt_stop is None or self.adapt_until is None:
            return 0
        return self.adapt_until - state.adapt_stop

    def length(self, state) -> int:
        """The run's super-transitions: as planned, less those an early stop freed; with
        ``num_draws``, those run so far plus as many as the draws still to keep need at the
        last one's rate (exact once they are kept)."""
        planned = self.num_super_transitions - self.shift(state)
        if self.num_draws is None:
            return planned
        kept = _kept(state)
        if not kept or kept[-1] < 1:
            return planned
        missing = max(0, self.num_draws - sum(kept))
        return len(state.record["num_draws"]) + -(-missing // kept[-1])

    def kept_missing(self, state) -> int:
        """Draws per chain still to keep (``num_draws`` mode)."""
        return self.num_draws - sum(_kept(state))

    def more(self, state, index: int) -> bool:
        """Whether super-transition ``index`` runs: within the run's length, or, with
        ``num_draws``, a warm-up one or draws still to keep."""
        if self.num_draws is None:
            return index < self.length(state)
        return self.is_warmup(state, index) or self.kept_missing(state) > 0

    def adapting(self, state, index: int) -> bool:
        end = self.adapt_until if state.adapt_stop is None else state.adapt_stop
        return end is None or index < end

    def adapted(self, state) -> int:
        """Super-transitions the tuner adapted (proposed and was updated) in."""
        if state.adapt_stop is not None:
            return state.adapt_stop
        return self.length(state) if self.adapt_until is None else self.adapt_until

    def is_warmup(self, state, index: int) -> bool:
        """Whether super-transition ``index``'s draws are warm-up draws: those of the planned
        schedule's index (after an early stop, ``index`` plus the super-transitions freed)."""
        stopped = state.adapt_stop is not None and index >= state.adapt_stop
        return index + (self.shift(state) if stopped else 0) < self.num_warmup

    def max_group(self, checkpoint_every: int) -> int:
        """The most frozen super-transitions one device call runs: those between two
        checkpoints (the loop also caps the buffer's bytes); 1 when the tuner never
        freezes. It does not depend on whether a run folder is kept, so a run makes the
        same draws with and without one."""
        length = self.num_super_transitions if self.num_draws is None else 2**62
        if self.adapt_until is None or self.adapt_until >= length:
            return 1
        return min(length - self.adapt_until, checkpoint_every)


def _kept(state) -> list[int]:
    """Draws per chain each non-warm-up super-transition kept so far."""
    return [n for n, warm in zip(state.record["num_draws"], state.record["warmup"],
                                 strict=True) if not warm]
