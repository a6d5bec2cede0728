"""Each hand-translated posteriordb program (`adaptmc.targets.posteriordb.MODELS`) against its
Stan original: the same log density up to a constant and the same gradient at 20 random
points of Stan's unconstrained space. Slow: each program is compiled once (then cached)."""

from __future__ import annotations

import importlib.util
import os
import shutil

import numpy as np
import pytest

from adaptmc.datasets.posteriordb import default_posteriordb_dir, load_posterior
from adaptmc.targets.posteriordb import MODELS, posteriordb_model

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("httpstan") is None
                       or shutil.which(os.environ.get("CXX", "g++")) is None,
                       reason="needs httpstan (pip install 'adaptmc[stan]') and a C++ compiler"),
    pytest.mark.skipif(not default_posteriordb_dir().is_dir(),
                       reason="../shared/posteriordb not available"),
]


# The Lotka-Volterra program solves its ODE with Stan's rk45 (forward sensitivities) and the
# translation with JAX's Dormand-Prince (adjoint gradients), both at the program's loose
# tolerances (rtol 1e-5, atol 1e-3): at reference draws the log densities differ by up to
# 0.06 beyond a constant and the gradients by up to 34%. Stan's gradient agrees with its own
# central differences to 1e-3; the translation's adjoint gradient misses its own by up to 0.2.
ODE = "hudson_lynx_hare-lotka_volterra"
NAMES = [pytest.param(name, marks=pytest.mark.xfail(
    strict=True, reason="ODE solvers at rtol 1e-5, atol 1e-3 differ (see ODE above)"))
         if name == ODE else name for name in sorted(MODELS)]


@pytest.mark.parametrize("name", NAMES)
def test_translation_equals_stan(name):
    from adaptmc.targets.stan import stan_target
    from adaptmc.targets.stan.check import compare, reference_points

    folder = default_posteriordb_dir() / name
    target = stan_target(folder / "model.stan", folder / "data.json.zip")
    model, posterior = target.info["stan_model"], load_posterior(folder)
    # reference draws (the posterior's bulk), else around Stan's initial point (zero)
    points = reference_points(model, posterior, 20)
    if points is None:
        rng = np.random.default_rng(7)
        points = np.asarray(target.initial_position) + rng.normal(0.0, 0.5, (20, target.dim))
    result = compare(model, posteriordb_model(posterior), points)
    scale = 1.0 + np.max(np.abs(result.stan_lp))
    assert result.lp_spread() < 1e-8 * scale, result.stan_lp - result.jax_lp
    assert result.grad_error() < 1e-6
