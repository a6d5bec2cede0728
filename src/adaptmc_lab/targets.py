"""Target names the lab adds to the library's built-ins: the robot-arm BNN of the
reproductions (`adaptmc_lab.models.robot_arm`), and ``stan-<posterior>`` for every posteriordb
posterior sampled straight from its ``model.stan`` and data (`adaptmc.targets.stan`; the
``stan`` extra), so the bench runs each beside its hand translation ``pdb-<posterior>``: the
library's posteriordb copies, and the 26 the lab ships (`adaptmc_lab.datasets.posteriordb_extra`)
with the references the lab made for them."""

from __future__ import annotations

import dataclasses

from adaptmc.targets import Target
from adaptmc.targets import get_target as library_target
from adaptmc_lab.datasets import posteriordb_extra


def robot_arm() -> Target:
    from adaptmc_lab.models.robot_arm import robot_arm_target

    return robot_arm_target()


LAB_TARGETS = {"bnn-robot-arm": robot_arm}


def stan_posterior_files(spec: str) -> tuple[str, str] | None:
    """``(model.stan, data.json.zip)`` of the posteriordb posterior ``spec`` names
    (``stan-<posterior>``): the library's copy, else the lab's; None when ``spec`` names
    none."""
    from adaptmc.datasets.posteriordb import default_posteriordb_dir

    if not spec.startswith("stan-"):
        return None
    name = spec.removeprefix("stan-")
    folder = default_posteriordb_dir() / name
    if not (folder / "model.stan").is_file():
        folder = posteriordb_extra.folder(name)
    if folder is None:
        return None
    return str(folder / "model.stan"), str(folder / "data.json.zip")


def get_target(spec: str) -> Target:
    """A lab target by name, else whatever `adaptmc.targets.get_target` makes of ``spec``."""
    if spec in LAB_TARGETS:
        return LAB_TARGETS[spec]()
    files = stan_posterior_files(spec)
    if files is not None:
        target = library_target(files[0], data=files[1])
        name = spec.removeprefix("stan-")
        if target.reference is None and posteriordb_extra.folder(name) is not None:
            return extra_target(target, name)
        return target
    return library_target(spec)


def extra_target(target: Target, name: str) -> Target:
    """A lab-shipped posterior's Stan target compared on its constrained parameters (as the
    library's posteriordb targets are) against the lab's reference, when one was made."""
    target.info["posterior"] = name
    return dataclasses.replace(target, reference=posteriordb_extra.load_reference(name))
