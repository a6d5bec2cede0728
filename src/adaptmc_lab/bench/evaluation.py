"""A cell's numbers from a sampler's output.

`evaluate`: min and median bulk-ESS (Vehtari et al. 2021) of the reference quantities
(`adaptmc_lab.bench.quantities`; those constant in every draw of every chain left out,
`structural_constants`), min ESS per 1000 gradients (tuning included) and per second,
max R-hat, divergences, and the accuracy against the reference (`adaptmc_lab.bench.references`):
the largest ``|mean - reference mean| / reference sd`` and the largest error in MCSE units
(``sqrt(mcse^2 + reference mcse^2)``). `compute_cell` runs one cell from scratch.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict

import numpy as np

from adaptmc.run.compile_clock import compile_seconds
from adaptmc_lab.bench.config import BenchConfig, Cell, SamplerOutput, cell_seed
from adaptmc_lab.bench.quantities import quantities
from adaptmc_lab.bench.references import bench_target_digest, mean_mcse, reference
from adaptmc_lab.bench.samplers import SAMPLERS, row_options


def _ess_rhat_mcse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The robust ESS (the smallest of bulk-ESS of x, of x^2 and tail-ESS: an antithetic
    sampler is not credited with draws its second moments do not show), R-hat and ArviZ's
    MCSE of the mean of each quantity of ``values: (chains, draws, k)``."""
    from adaptmc import diagnostics

    ess = diagnostics.robust_ess(values)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rhat = diagnostics.rhat(values)
        mcse = mean_mcse(values)
    return ess, rhat, mcse


def structural_constants(values: np.ndarray) -> np.ndarray:
    """``values: (chains, draws, k) -> (k,)``: the quantities that take one value in every
    draw of every chain, up to rounding (``1e-12`` relative: a Cholesky factor's zeros, a
    correlation matrix's unit diagonal computed as ``L L^T``), which have no ESS to measure
    (rounding's is noise); left out of the ESS. A sampler that never moves is not credited:
    its chains, from different starts, hold different values (ESS 0)."""
    flat = values.reshape(-1, values.shape[-1])
    return np.all(np.abs(flat - flat[:1]) <= 1e-12 * np.abs(flat[:1]), axis=0)


def evaluate(target, output: SamplerOutput) -> dict:
    """The cell's numbers from a sampler's output (see the module docstring)."""
    names, values = quantities(target, output.positions)
    finite = bool(np.all(np.isfinite(values)))
    values = np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)
    ess, rhat, mcse = _ess_rhat_mcse(values)
    fixed = structural_constants(values)
    moving = ess[~fixed] if not fixed.all() else np.zeros(1)
    total_grads = output.warmup_grads + output.sampling_grads
    min_ess = float(np.min(moving))
    out = {
        "dim": int(target.dim),
        "num_quantities": len(names),
        "num_constant": int(fixed.sum()),
        "warmup_grads": int(output.warmup_grads),
        "sampling_grads": int(output.sampling_grads),
        "wall_s": float(output.wall_s),
        "compile_s": float(output.compile_s),
        "host_s": float(output.host_s),
        "min_ess": min_ess,
        "median_ess": float(np.median(moving)),
        "min_ess_per_1k_grads": 1000.0 * min_ess / max(total_grads, 1),
        "min_ess_per_1k_sampling_grads": 1000.0 * min_ess / max(output.sampling_grads, 1),
        # per second of the time a user waits: compilation, warm-up and tuning included
        "min_ess_per_s": min_ess / max(output.wall_s + np.nan_to_num(output.compile_s), 1e-9),
        "max_rhat": float(np.nanmax(rhat)) if np.isfinite(rhat).any() else float("nan"),
        "divergences": int(output.divergences),
        "finite": finite,
        "params": output.params,
        "programs": output.programs,
        "max_err_sd": None,
        "max_err_mcse": None,
        "worst": None,
    }
    ref = reference(target)
    if ref is not None and list(ref.names) == names:
        ref_mcse = np.zeros(len(names)) if ref.mcse is None else ref.mcse
        error = values.mean(axis=(0, 1)) - ref.mean
        err_sd = np.abs(error) / ref.sd
        err_mcse = np.abs(error) / np.sqrt(mcse**2 + ref_mcse**2)
        worst = int(np.nanargmax(err_sd))
        out.update(max_err_sd=float(np.nanmax(err_sd)),
                   max_err_mcse=float(np.nanmax(err_mcse)), worst=names[worst])
    return out


def compute_cell(cell: Cell, config: BenchConfig) -> dict:
    """Run one cell from scratch (its own process may be fresh: a Dask worker) and return
    ``{"cell": ..., "seed": ..., "config": ..., **evaluate(...)}``."""
    import jax

    from adaptmc_lab.targets import get_target

    jax.config.update("jax_enable_x64", True)
    if cell.sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {cell.sampler!r}; choose from {', '.join(SAMPLERS)}")
    target = get_target(cell.target)
    seed = cell_seed(cell.target, cell.seed_index)
    try:
        before = compile_seconds()
        output = SAMPLERS[cell.sampler](target, seed, config)
        # every sampler measured alike, NumPyro's and the small programs' compilation too
        jax_compile_s = compile_seconds() - before
        return {"cell": cell._asdict(), "key": cell.key, "seed": seed,
                "config": asdict(config), "sampler_options": row_options(cell.sampler),
                "target_digest": bench_target_digest(target),
                **evaluate(target, output), "jax_compile_s": jax_compile_s}
    finally:
        # a cell's compiled programs are never reused by another cell, yet stay in the
        # process: a serial run of the full matrix without this died after about 75 cells
        # ("LLVM compilation error: Cannot allocate memory", most of the memory free)
        jax.clear_caches()


def deterministic_part(result: dict) -> dict:
    """A cell's result without the timings and the compile census, which differ between runs
    of the same cell."""
    timings = ("wall_s", "compile_s", "host_s", "min_ess_per_s", "jax_compile_s", "programs")
    return {k: v for k, v in result.items() if k not in timings}
