"""BENCHMARKS' per-second table from `scripts/per_second_loop.sh`'s JSON lines.

``python scripts/per_second_table.py LOOP.jsonl`` prints one markdown row per (target,
sampler): seconds from the call to the summary cold and warm (the compile seconds the run
waited for), adaptmc's programs compiled and loaded from the cache, robust ESS, gradients,
robust ESS per second and its ratio to nutpie low-rank's cell of the same target; then the
medians of adaptmc's ratios to nutpie low-rank and to BlackJAX NUTS, cold and warm, over the
targets where both cells ran, and the range of adaptmc's compile seconds. A cell that failed
or timed out is shown as such and left out of the ratios.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

import numpy as np

NAMES = {"adaptmc-adaptive-hmc": "adaptmc default", "nutpie-low-rank": "nutpie low-rank",
         "blackjax-nuts": "BlackJAX NUTS"}


def cells(path: str) -> dict:
    """``{(target, sampler): {pass: line}}`` from the loop's output (the last line of each)."""
    found: dict = defaultdict(dict)
    for text in open(path):
        if text.startswith("{"):
            line = json.loads(text)
            found[(line["target"], line["sampler"])][line["pass"]] = line
    return found


def ratio(found: dict, target: str, sampler: str, peer: str, when: str) -> float:
    """``sampler``'s robust ESS per second over ``peer``'s on ``target`` (NaN if either
    failed)."""
    a = found.get((target, sampler), {}).get(when, {})
    b = found.get((target, peer), {}).get(when, {})
    if "ess_per_s" not in a or "ess_per_s" not in b or not b["ess_per_s"]:
        return float("nan")
    return a["ess_per_s"] / b["ess_per_s"]


def row(found: dict, target: str, sampler: str) -> str:
    """One markdown row."""
    got = found[(target, sampler)]
    cold, warm = got.get("cold", {}), got.get("warm", {})

    def secs(c):
        return f"{c['call_s']:.2f} ({c['compile_s']:.2f})" if "call_s" in c else \
            f"failed ({c.get('failed', '?')})"

    def get(c, k, f="{:.0f}"):
        return f.format(c[k]) if k in c else "-"

    programs = (f"{get(cold, 'programs_compiled')}+{get(cold, 'programs_loaded')} / "
                f"{get(warm, 'programs_compiled')}+{get(warm, 'programs_loaded')}"
                if "programs_compiled" in cold else "")
    vs = " / ".join(f"{ratio(found, target, sampler, 'nutpie-low-rank', w):.2f}"
                    for w in ("cold", "warm"))
    return (f"| {target} | {NAMES.get(sampler, sampler)} | {secs(cold)} | {secs(warm)} | "
            f"{programs} | {get(cold, 'ess')} / {get(warm, 'ess')} | "
            f"{get(cold, 'grads', '{:,}')} | {get(cold, 'ess_per_s')} / "
            f"{get(warm, 'ess_per_s')} | {vs} |")


def summary(found: dict) -> list[str]:
    """The medians of adaptmc's ratios and the range of its compile seconds."""
    targets = sorted({t for t, _ in found})
    lines = []
    for peer in ("nutpie-low-rank", "blackjax-nuts"):
        for when in ("cold", "warm"):
            r = np.array([ratio(found, t, "adaptmc-adaptive-hmc", peer, when)
                          for t in targets])
            r = r[np.isfinite(r)]
            if r.size:
                lines.append(f"adaptmc / {NAMES[peer]} {when}: median {np.median(r):.2f}x "
                             f"({r.min():.2f}-{r.max():.2f}), ahead on {int(np.sum(r > 1))} "
                             f"of {r.size}")
    for when in ("cold", "warm"):
        c = [found[(t, "adaptmc-adaptive-hmc")][when]["compile_s"] for t in targets
             if "compile_s" in found.get((t, "adaptmc-adaptive-hmc"), {}).get(when, {})]
        if c:
            lines.append(f"adaptmc compile s {when}: {min(c):.2f}-{max(c):.2f} "
                         f"(median {np.median(c):.2f}, over 0.3 s: {sum(x > 0.3 for x in c)} "
                         f"of {len(c)})")
    return lines


def main(path: str) -> None:
    found = cells(path)
    print("| target | sampler | cold: call to summary s (compile s) | warm: s (compile s) | "
          "programs compiled+loaded cold / warm | robust ESS cold / warm | gradients | "
          "ESS/s cold / warm | vs nutpie low-rank cold / warm |")
    print("|---|---|---|---|---|---|---|---|---|")
    order = list(NAMES)
    for target, sampler in sorted(found, key=lambda k: (order.index(k[1])
                                                          if k[1] in order else 9, k[0])):
        print(row(found, target, sampler))
    print()
    for line in summary(found):
        print("- " + line)


if __name__ == "__main__":
    main(sys.argv[1])
