"""Peak resident memory of a run whose draws total about 2 GiB (issue 13).

A ``dim``-d standard Gaussian, ``chains`` chains, ``super_transitions`` super-transitions of
``budget`` one-gradient HMC steps (step size 0.9, one leapfrog step), thin 1, float64, in a
run folder. A thread samples ``VmRSS`` from ``/proc/self/status`` every 50 ms; the peak is
reported for each phase: imports, sampling (until the draws are consolidated), writing
``draws.nc`` and the summary (the ``describe`` callback of `adaptmc.run.store.write_draws`).

Usage::

    python scripts/peak_memory.py OUT_DIR [--dim 1000 --chains 4 --super-transitions 67
                                           --budget 1000 --checkpoint-every 2]

``OUT_DIR`` is replaced (``force``); it holds about 2 GiB when the run ends.
"""

from __future__ import annotations

import argparse
import os
import shutil
import threading
import time


class RssSampler:
    """Peak ``VmRSS`` (bytes) per named phase, sampled in a daemon thread."""

    def __init__(self, interval: float = 0.05):
        self.interval = interval
        self.phase = "imports"
        self.peaks: dict[str, int] = {}
        self.started = time.perf_counter()
        self.times: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    @staticmethod
    def rss() -> int:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            time.sleep(self.interval)

    def sample(self) -> None:
        self.peaks[self.phase] = max(self.peaks.get(self.phase, 0), self.rss())

    def enter(self, phase: str) -> None:
        self.sample()
        now = time.perf_counter()
        self.times[self.phase] = now - self.started
        print(f"{self.phase:>18}: peak RSS {self.peaks[self.phase] / 1e9:.3f} GB  "
              f"({self.times[self.phase]:.0f} s)", flush=True)
        self.started = now
        self.phase = phase
        self.sample()

    def stop(self) -> None:
        self.enter("end")
        self._stop.set()
        self._thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--dim", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--super-transitions", type=int, default=67)
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--checkpoint-every", type=int, default=2)
    parser.add_argument("--snapshot", help="hard-link the run folder here before draws.nc is "
                        "written (resume a copy of it to measure the writing alone)")
    parser.add_argument("--resume", action="store_true", help="resume OUT (a snapshot)")
    args = parser.parse_args()

    sampler = RssSampler()
    import jax

    jax.config.update("jax_enable_x64", True)
    import numpy as np

    import adaptmc
    from adaptmc.run import driver, store

    sampler.enter("sampling")
    write_draws = store.write_draws

    def measured_write_draws(run_dir, idata, describe=None):
        if args.snapshot:
            shutil.copytree(run_dir, args.snapshot, copy_function=os.link)
        sampler.enter("write draws.nc")

        def measured_describe(lazy):
            sampler.enter("summary")
            describe(lazy)
            sampler.enter("write attributes")

        return write_draws(run_dir, idata, describe=measured_describe)

    store.write_draws = measured_write_draws
    target = adaptmc.targets.gaussians.gaussian(np.zeros(args.dim), 1.0)
    driver.run(target, adaptmc.kernels.hmc, adaptmc.kernels.HMCParams(0.9, 1),
               num_super_transitions=args.super_transitions, gradient_budget=args.budget,
               num_chains=args.chains, output_dir=args.out, force=not args.resume,
               resume=args.resume,
               checkpoint_every=args.checkpoint_every, progress=False)
    sampler.stop()
    draws_gib = args.chains * args.super_transitions * args.budget * args.dim * 8 / 2**30
    overall = max(peak for phase, peak in sampler.peaks.items() if phase != "end")
    print(f"draws: {draws_gib:.2f} GiB of positions; peak RSS of the run {overall / 1e9:.3f} GB")


if __name__ == "__main__":
    main()
