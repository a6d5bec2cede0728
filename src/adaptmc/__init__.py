"""adaptmc: self-tuning MCMC in JAX.

The pieces compose in one call::

    import adaptmc
    target = adaptmc.targets.get_target("neal-100d")
    result = adaptmc.run.run(target, adaptmc.kernels.hmc, adaptmc.kernels.HMCParams(0.01, 50),
                             num_super_transitions=20, gradient_budget=1000)
    print(adaptmc.diagnostics.format_summary(result.idata))
"""

from adaptmc._start import quiet_interrupts_at_start

quiet_interrupts_at_start()  # first: a Ctrl-C during the imports below is one line

from adaptmc import diagnostics, kernels, objectives, run, targets, tuners  # noqa: E402
from adaptmc.api import sample  # noqa: E402
from adaptmc.compile_cache import use_compile_cache  # noqa: E402
from adaptmc.predictive import sample_posterior_predictive  # noqa: E402
from adaptmc.run import RunResult  # noqa: E402
from adaptmc.targets import Target, make_target  # noqa: E402

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
