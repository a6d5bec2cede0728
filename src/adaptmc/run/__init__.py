"""Running chains: the compiled super-transition loop (`loop`), the run folder (`store`),
InferenceData assembly (`idata`), progress callbacks (`callbacks`) and the driver `run`."""

from adaptmc.run.driver import RECORD_FIELDS, RunResult, run
from adaptmc.run.idata import to_inference_data
from adaptmc.run.loop import (
    STEP_FIELDS,
    SuperTransitionLoop,
    default_positions,
    starting_positions,
)

__all__ = [
    "RECORD_FIELDS",
    "STEP_FIELDS",
    "RunResult",
    "SuperTransitionLoop",
    "default_positions",
    "starting_positions",
    "run",
    "to_inference_data",
]
