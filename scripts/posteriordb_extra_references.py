"""Make the references of the lab's posteriordb posteriors without published draws
(src/adaptmc_lab/data/posteriordb-extra/references/<posterior>.json), cheapest first.

For each posterior: a pilot run (nutpie low-rank, 4 chains x (150 + 100)) estimates the
seconds of the two long runs (`adaptmc_lab.bench.extra_references.REFERENCE_RUN`, nutpie
low-rank and BlackJAX NUTS); over ``--max-minutes`` the posterior is skipped and a
``"skipped"`` record says so. Otherwise both runs, their agreement and, when they agree, the
reference (`make_reference`). Resumable: a posterior that has a ``"reference"`` or
``"no reference"`` record is skipped (``--force`` makes it again; skipped ones are retried).

    nice -n 10 python scripts/posteriordb_extra_references.py [--posteriors A,B] \
        [--max-minutes 10] [--draws 5000] [--force]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _floor_s(target, settings: dict) -> float:
    """The least the two long runs can cost: the seconds of one gradient (timed over 50 at
    the start) times 7 leapfrog steps per transition (a NUTS tree of depth 3), for every
    transition of every chain of both runs."""
    import jax

    grad = jax.jit(target.logdensity_and_grad)
    jax.block_until_ready(grad(target.initial_position))
    tick = time.perf_counter()
    for _ in range(50):
        jax.block_until_ready(grad(target.initial_position))
    per_gradient = (time.perf_counter() - tick) / 50
    transitions = settings["num_chains"] * (settings["num_warmup"] + settings["num_draws"])
    return 2 * 7 * transitions * per_gradient


def _estimate_s(target, max_s: float, settings: dict) -> float:
    """Seconds of the two long runs: `_floor_s` when that is over ``max_s`` already, else
    from a pilot of nutpie low-rank (both samplers assumed to cost the same per transition;
    the pilot's early warm-up is the dearest part, so this overestimates)."""
    from adaptmc_lab.bench.extra_references import run_sampler

    floor = _floor_s(target, settings)
    if floor > max_s:
        return floor
    pilot = {**settings, "num_warmup": 150, "num_draws": 100}
    seconds = run_sampler(target, "nutpie-low-rank", pilot)["sampling_s"]  # no compilation
    scale = (settings["num_warmup"] + settings["num_draws"]) / 250
    return 2 * seconds * scale


def one(name: str, max_minutes: float, command: str, draws: int | None = None) -> str:
    """Make, skip or borrow the reference of ``name``; its status."""
    import jax

    from adaptmc import io
    from adaptmc_lab.bench import extra_references as refs
    from adaptmc_lab.datasets import posteriordb_extra as extra
    from adaptmc_lab.targets import get_target

    jax.config.update("jax_enable_x64", True)
    settings = {**refs.REFERENCE_RUN, "num_draws": draws or refs.REFERENCE_RUN["num_draws"]}
    stamp = {"command": command, "commit": _commit(), "load": os.getloadavg(),
             "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if name in refs.BORROWED:
        record = refs.borrowed_reference(name)
    else:
        target = get_target(f"stan-{name}")
        estimate = _estimate_s(target, 60 * max_minutes, settings)
        print(f"{name}: pilot says ~{estimate / 60:.1f} min for both runs", flush=True)
        if estimate > 60 * max_minutes:
            record = {"posterior": name, "target": f"stan-{name}", "status": "skipped",
                      "reason": f"estimated {estimate / 60:.0f} min for the two runs "
                                f"(> {max_minutes:g} min)", "settings": settings}
        else:
            record = refs.make_reference(target, name, settings,
                                         log=lambda line: print(line, flush=True))
    extra.REFERENCES_DIR.mkdir(parents=True, exist_ok=True)
    io.write_json(extra.reference_path(name), {**record, **stamp})
    return record["status"]


def _skipped(name: str, reason: str, command: str) -> None:
    from adaptmc import io
    from adaptmc_lab.bench.extra_references import REFERENCE_RUN
    from adaptmc_lab.datasets import posteriordb_extra as extra

    extra.REFERENCES_DIR.mkdir(parents=True, exist_ok=True)
    io.write_json(extra.reference_path(name), {
        "posterior": name, "target": f"stan-{name}", "status": "skipped", "reason": reason,
        "settings": REFERENCE_RUN, "command": command, "commit": _commit(),
        "load": os.getloadavg(), "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    print(f"{name}: skipped ({reason})", flush=True)


def main(argv=None) -> None:
    from adaptmc_lab.datasets import posteriordb_extra as extra

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posteriors", default=None, help="comma-separated names")
    parser.add_argument("--max-minutes", type=float, default=10.0)
    parser.add_argument("--draws", type=int, default=None,
                        help="draws per chain (default: REFERENCE_RUN's 5000)")
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--skip-reason", default=None,
                        help="write a skipped record with this reason, run nothing")
    args = parser.parse_args(argv)
    names = args.posteriors.split(",") if args.posteriors else extra.extra_posteriors()
    command = "python scripts/posteriordb_extra_references.py " + " ".join(sys.argv[1:])
    for index, name in enumerate(names, 1):
        record = extra.reference_record(name)
        if record and record["status"] != "skipped" and not args.force:
            print(f"[{index}/{len(names)}] {name}: {record['status']} (kept)", flush=True)
            continue
        if args.skip_reason:
            _skipped(name, args.skip_reason, command)
            continue
        tick = time.perf_counter()
        print(f"[{index}/{len(names)}] {name} ...", flush=True)
        try:
            status = one(name, args.max_minutes, command.strip(), args.draws)
        except Exception as error:  # noqa: BLE001 - one posterior's failure stops no other
            print(f"[{index}/{len(names)}] {name}: failed, no record ({error})", flush=True)
            continue
        print(f"[{index}/{len(names)}] {name}: {status} "
              f"({time.perf_counter() - tick:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
