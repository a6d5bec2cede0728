"""ArviZ, imported without its FutureWarning, and its diagnostics run on NumPy alone.

With Numba installed (PyMC and nutpie bring it) ArviZ compiles its variance functions on
their first call in every process (its ``stats_variance_2d``, not cached): 0.25-0.45 s of a
run on the 2-core development box, more than all of a run's diagnostics take with NumPy
(about 1 ms a parameter). `numpy_only` switches ArviZ's Numba flag off while inside and
restores it after, so a user's own ArviZ calls keep their setting.
"""

from __future__ import annotations

import contextlib
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az

__all__ = ["az", "numpy_only"]


@contextlib.contextmanager
def numpy_only():
    """ArviZ's Numba flag off inside the block, its previous value restored after."""
    was = az.Numba.numba_flag
    az.Numba.numba_flag = False
    try:
        yield
    finally:
        az.Numba.numba_flag = was
