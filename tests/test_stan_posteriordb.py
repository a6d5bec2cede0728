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


@pytest.mark.parametrize("name", sorted(MODELS))
def test_translation_equals_stan(name):
    from adaptmc.targets.stan import stan_target
    from adaptmc.targets.stan.check import compare

    folder = default_posteriordb_dir() / name
    target = stan_target(folder / "model.stan", folder / "data.json.zip")
    model = target.info["stan_model"]
    rng = np.random.default_rng(7)
    # around Stan's initial point (zero, where each program was checked to have a density)
    points = np.asarray(target.initial_position) + rng.normal(0.0, 0.5, (20, target.dim))
    result = compare(model, posteriordb_model(load_posterior(folder)), points)
    scale = 1.0 + np.max(np.abs(result.stan_lp))
    assert result.lp_spread() < 1e-8 * scale, result.stan_lp - result.jax_lp
    assert result.grad_error() < 1e-6
