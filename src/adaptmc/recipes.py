"""Named samplers: kernel, tuner, objective and warm-up put together (stub)."""

from __future__ import annotations

from adaptmc.kernels.hmc import hmc
from adaptmc.tuners.box import Box, box_from_tunables


def hmc_box(
    step_size: tuple[float, float] = (0.01, 1.0),
    num_leapfrog: tuple[int, int] = (1, 100),
    log: bool = False,
) -> Box:
    """The box over HMC's ``(step_size, num_leapfrog)``; defaults ``[0.01, 1] x [1, 100]``;
    ``log=True`` searches both in log scale.

    The default box covers the step sizes that are stable for targets whose smallest scale
    lies between about 0.005 and 0.5 (for a Gaussian, leapfrog is unstable above twice the
    smallest standard deviation, Neal 2011, Sec. 4.2) and trajectories of up to 100 gradient
    evaluations.
    """
    names = tuple(t.name for t in hmc.tunables)
    return box_from_tunables(hmc.tunables, {"step_size": step_size, "num_leapfrog": num_leapfrog},
                             log=names if log else ())
