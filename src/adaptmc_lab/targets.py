"""Target names the lab adds to the library's built-ins: the robot-arm BNN of the
reproductions (`adaptmc_lab.models.robot_arm`), and ``stan-<posterior>`` for every posteriordb
posterior sampled straight from its ``model.stan`` and data (`adaptmc.targets.stan`; the
``stan`` extra), so the bench runs each beside its hand translation ``pdb-<posterior>``."""

from __future__ import annotations

from adaptmc.targets import Target
from adaptmc.targets import get_target as library_target


def robot_arm() -> Target:
    from adaptmc_lab.models.robot_arm import robot_arm_target

    return robot_arm_target()


LAB_TARGETS = {"bnn-robot-arm": robot_arm}


def stan_posterior_files(spec: str) -> tuple[str, str] | None:
    """``(model.stan, data.json.zip)`` of the posteriordb posterior ``spec`` names
    (``stan-<posterior>``), or None when ``spec`` names none."""
    from adaptmc.datasets.posteriordb import default_posteriordb_dir

    if not spec.startswith("stan-"):
        return None
    folder = default_posteriordb_dir() / spec.removeprefix("stan-")
    if not (folder / "model.stan").is_file():
        return None
    return str(folder / "model.stan"), str(folder / "data.json.zip")


def get_target(spec: str) -> Target:
    """A lab target by name, else whatever `adaptmc.targets.get_target` makes of ``spec``."""
    if spec in LAB_TARGETS:
        return LAB_TARGETS[spec]()
    files = stan_posterior_files(spec)
    if files is not None:
        return library_target(files[0], data=files[1])
    return library_target(spec)
