"""adaptmc: self-tuning MCMC in JAX.

The pieces compose in one call::

    import adaptmc
    target = adaptmc.targets.get_target("neal-100d")
    result = adaptmc.run.run(target, adaptmc.kernels.hmc, adaptmc.kernels.HMCParams(0.01, 50),
                             num_super_transitions=20, gradient_budget=1000)
    print(adaptmc.diagnostics.format_summary(result.idata))
"""

from adaptmc import diagnostics, kernels, objectives, run, targets, tuners
from adaptmc.api import sample
from adaptmc.compile_cache import use_compile_cache
from adaptmc.predictive import sample_posterior_predictive
from adaptmc.run import RunResult
from adaptmc.targets import Target, make_target

__version__ = "0.1.0"

__all__ = [
    "RunResult",
    "Target",
    "diagnostics",
    "kernels",
    "make_target",
    "objectives",
    "run",
    "sample",
    "sample_posterior_predictive",
    "targets",
    "tuners",
    "use_compile_cache",
]
