"""Running chains: the driver `run` over a `Plan`'s stages (`driver`, `plan`), the
super-transitions stage (`transitions`, `phases`), the compiled loop (`loop`), the run folder
(`store`, `resume`), InferenceData assembly (`idata`) and the progress bar (`callbacks`)."""

from adaptmc.run.driver import RECORD_FIELDS, RunResult, run
from adaptmc.run.idata import to_inference_data
from adaptmc.run.loop import (
    STEP_FIELDS,
    SuperTransitionLoop,
    default_positions,
    starting_positions,
)
from adaptmc.run.plan import Plan, Prepared, RunOptions, run_keys

__all__ = [
    "RECORD_FIELDS",
    "STEP_FIELDS",
    "Plan",
    "Prepared",
    "RunOptions",
    "RunResult",
    "SuperTransitionLoop",
    "default_positions",
    "run",
    "run_keys",
    "starting_positions",
    "to_inference_data",
]
