"""Tuners that set kernel parameters between super-transitions."""

from adaptmc.tuners.base import Tuner
from adaptmc.tuners.fixed import fixed, grid

__all__ = ["Tuner", "fixed", "grid"]
