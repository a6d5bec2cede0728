"""What the command line writes beside a finished run's draws: its plots, then
``summary.txt``, last and atomically (`adaptmc sample`); ``posterior_predictive.nc``
(`adaptmc predict`). A run folder holding ``draws.nc`` and no
``summary.txt`` is one whose summary and plots were not written (a full disk, Ctrl-C):
``adaptmc resume`` writes them from its draws, without running anything again."""

from __future__ import annotations

from pathlib import Path

SUMMARY = "summary.txt"
PLOT_BYTES = 250_000  # about the largest plot's bytes (docs/notes/full-disk.md)
PLOTS = 7  # the most plots a run writes: trace, rank, energy, pair and three of tuning


def outputs_unwritten(folder: str | Path) -> bool:
    """Whether the run in ``folder`` has finished (``draws.nc``) without its summary and
    plots."""
    return (Path(folder) / "draws.nc").is_file() and not (Path(folder) / SUMMARY).exists()


def finished_draws(folder: str | Path):
    """The draws of the finished run in ``folder``, checked against their checksum."""
    from adaptmc.run.netcdf import read_draws, verify_draws

    verify_draws(Path(folder))
    return read_draws(Path(folder))


def write_outputs(idata, folder: str | Path, plan) -> list[Path]:
    """Print the summary of ``idata`` (the warnings and notes, once), write the posterior
    plots, the tuning plots (unless ``plan``'s tuner is fixed or a grid) and then
    ``summary.txt`` into ``folder``; returns the plots' paths. A full disk is one
    `adaptmc.io.WriteError` saying the draws are kept and `adaptmc resume` writes the rest."""
    from adaptmc import io
    from adaptmc.diagnostics import format_summary
    from adaptmc.disk import telling_a_full_disk
    from adaptmc.posterior_plots import write_posterior_plots

    text = format_summary(idata)
    print(text)
    kept = (f"the run finished and its draws are in {folder}/draws.nc: free space, then "
            f"`adaptmc resume {folder}` writes its summary and plots")
    with telling_a_full_disk(f"the summary and plots in {str(folder)!r}", folder,
                             len(text) + PLOTS * PLOT_BYTES, kept):
        paths = write_posterior_plots(idata, folder)
        if plan.options.get("tuner") not in ("fixed", "grid"):
            from adaptmc.plots import write_tuning_plots

            skip = plan.plot_skip if plan.warmup is None else None
            paths += write_tuning_plots(idata, folder, box=plan.box, skip=skip)
        io.atomic_write_bytes(Path(folder) / SUMMARY, (text + "\n").encode(), shared=True)
    return paths


def write_predictive(group, path: Path) -> None:
    """``group`` to ``path`` through a temporary file; a full disk is one line."""
    from adaptmc.disk import telling_a_full_disk
    from adaptmc.run.netcdf import abandon

    tmp = path.with_suffix(".nc.tmp")
    kept = f"the run is kept: free space, then `adaptmc predict {path.parent}` again"
    with telling_a_full_disk(repr(str(path)), path.parent, group.nbytes + 2**20, kept,
                             cleanup=lambda: abandon(tmp)):
        group.to_netcdf(tmp)
        tmp.replace(path)
