"""The Bayesian workflow around the draws: precision, pointwise log-likelihood (LOO),
posterior predictive draws, names and diagnostics as the model's language has them."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SRC = Path(__file__).parents[1] / "src"
STAN_PROGRAM = Path(__file__).parent / "data" / "eight_schools_loo.stan"
EIGHT = {"J": 8, "y": [28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0],
         "sigma": [15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0]}
NO_STAN = (importlib.util.find_spec("httpstan") is None
           or shutil.which(os.environ.get("CXX", "g++")) is None)
needs_stan = pytest.mark.skipif(NO_STAN, reason="needs httpstan and a C++ compiler")
QUICK = dict(chains=2, draws=60, warmup_steps=150, tuning=4, progress=False)

PRECISION_SCRIPT = """
import sys, warnings
import jax
jax.config.update("jax_enable_x64", False)
import numpy as np
import adaptmc
{model}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", RuntimeWarning)
    idata = {call}
dtypes = {{str(v.dtype) for v in idata.posterior.data_vars.values() if v.dtype.kind == "f"}}
print(sorted(dtypes), [str(w.message) for w in caught if w.category is RuntimeWarning])
"""
NUMPYRO_MODEL = """
import numpyro, numpyro.distributions as dist
def model(y):
    mu = numpyro.sample("mu", dist.Normal(0, 5))
    sigma = numpyro.sample("sigma", dist.HalfNormal(2))
    numpyro.sample("y", dist.Normal(mu, sigma), obs=y)
"""


def _precision_run(model: str, call: str) -> str:
    script = PRECISION_SCRIPT.format(model=model, call=call)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_numpyro_draws_are_float64_with_jax_x64_off():
    line = _precision_run(NUMPYRO_MODEL, "adaptmc.sample(model, np.array([0.3, -1.2, 2.0, 0.7]), "
                          f"seed=1, **{QUICK!r})")
    assert line == "['float64'] []"


@needs_stan
def test_stan_draws_are_float64_with_jax_x64_off():
    line = _precision_run("", f"adaptmc.sample({str(STAN_PROGRAM)!r}, data={EIGHT!r}, seed=1, "
                          f"**{QUICK!r})")
    assert line == "['float64'] []"


def test_float32_when_asked():
    import jax.numpy as jnp

    import adaptmc
    from adaptmc.options import OptionError

    target = (lambda x: -0.5 * jnp.sum(x**2), jnp.zeros(2))
    try:
        idata = adaptmc.sample(target, float32=True, **QUICK)
        draws = idata.posterior["x"].values
        np.testing.assert_array_equal(draws.astype(np.float32), draws)  # computed in float32
    finally:
        import jax

        jax.config.update("jax_enable_x64", True)
    with pytest.raises(OptionError, match="float32"):
        adaptmc.sample(target, float32="yes", **QUICK)
