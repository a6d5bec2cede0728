"""Gradients spent before the first kept draw: the default recipe (NUTS window warm-up of
500 transitions, then 12 tuning super-transitions, at the bench's sizes) against BlackJAX
NUTS's window adaptation of 1000 iterations (Stan's and BlackJAX's default), same starts,
4 chains, all chains counted (issue 14).

    python scripts/warmup_gradients.py pdb-arK-arK neal-100d ... > table.md
"""

import dataclasses
import statistics
import sys

import jax

jax.config.update("jax_enable_x64", True)

from adaptmc.targets import get_target  # noqa: E402
from adaptmc_lab.bench.config import BenchConfig  # noqa: E402
from adaptmc_lab.bench.samplers import SAMPLERS  # noqa: E402


def main(names):
    bench = BenchConfig()
    stan = dataclasses.replace(bench, num_warmup=1000, num_samples=10)
    print("| target | adaptive-hmc warm-up + tuning | BlackJAX NUTS 1000-iteration warm-up "
          "| ratio |")
    print("|---|---|---|---|")
    ratios = []
    for name in names:
        target = get_target(name)
        ours = SAMPLERS["adaptmc-adaptive-hmc"](target, 0, bench).warmup_grads
        nuts = SAMPLERS["blackjax-nuts"](target, 0, stan).warmup_grads
        ratios.append(ours / nuts)
        print(f"| {name} | {ours:,} | {nuts:,} | {ours / nuts:.2f} |", flush=True)
    ratios.sort()
    lower = sum(r < 1 for r in ratios)
    print(f"\nmedian ratio {statistics.median(ratios):.2f}; lower on {lower} of {len(ratios)}")


if __name__ == "__main__":
    main(sys.argv[1:])
