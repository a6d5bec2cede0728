"""Nothing lost, part three: a resume of a run killed late, a full disk at any write, a run
folder one process owns, checks before the work, damage found without the sidecar, Ctrl-C
as one line, and messages that name the problem."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
import time

import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc import io
from adaptmc.cli import main
from adaptmc.run import netcdf, store

MANUAL = ["sample", "--recipe", "manual", "--target", "gauss-2d-v1", "--no-progress",
          "--super-transitions", "4", "--warmup", "1", "--budget", "40", "--chains", "2",
          "--checkpoint-every", "2"]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def posterior(folder) -> np.ndarray:
    return np.asarray(store.read_draws(folder).posterior["x"])


def _draws_run(out, **kwargs):
    """A ``--draws``-like run: frozen after one super-transition, then as many as it takes
    to keep 120 draws per chain (the counters after a resume come from the saved record)."""
    from adaptmc.kernels import hmc
    from adaptmc.kernels.hmc import HMCParams
    from adaptmc.run import run
    from adaptmc.targets import make_target

    target = make_target(lambda x: -0.5 * jnp.sum(x**2), jnp.zeros(2), name="std-normal-2d")
    return run(target, hmc, HMCParams(0.3, 4), num_super_transitions=12, gradient_budget=40,
               num_chains=2, num_warmup=1, adapt_until=1, num_draws=120, progress=False,
               output_dir=out, checkpoint_every=2, **kwargs)


def test_a_draws_run_stopped_late_resumes_bit_identical(tmp_path):
    """Case 1: the checkpoint after a resume of a ``--draws`` run held NumPy integers
    (``Object of type int64 is not JSON serializable``)."""
    reference = _draws_run(tmp_path / "reference")
    out = tmp_path / "run"
    _draws_run(out, stop_after=5)
    _draws_run(out, resume=True, stop_after=4)  # stopped again, at super-transition 9
    resumed = _draws_run(out, resume=True)
    np.testing.assert_array_equal(np.asarray(resumed.idata.posterior["x"]),
                                  np.asarray(reference.idata.posterior["x"]))
