"""Target names the lab adds to the library's built-ins: the robot-arm BNN of the
reproductions (`adaptmc_lab.models.robot_arm`)."""

from __future__ import annotations

from adaptmc.targets import Target
from adaptmc.targets import get_target as library_target


def robot_arm() -> Target:
    from adaptmc_lab.models.robot_arm import robot_arm_target

    return robot_arm_target()


LAB_TARGETS = {"bnn-robot-arm": robot_arm}


def get_target(spec: str) -> Target:
    """A lab target by name, else whatever `adaptmc.targets.get_target` makes of ``spec``."""
    return LAB_TARGETS[spec]() if spec in LAB_TARGETS else library_target(spec)
