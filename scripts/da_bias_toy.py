"""Dual averaging's averaged step in a short window (docs/notes/nutseff.md): a toy whose
acceptance at step ``eps`` (the right one is 1) is ``0.8 ** (eps ** 4)`` plus N(0, 0.15)
noise; dual averaging (Hoffman & Gelman 2014, Alg. 5; gamma 0.05, t0 10, kappa 0.75)
started at the right step, ``mu = log(ten)``. Prints the median ``exp(xbar)`` over 200
repeats and the acceptance there, per window length and ``ten``.

    python scripts/da_bias_toy.py
"""

from __future__ import annotations

import numpy as np


def acceptance(eps):
    return np.exp(np.log(0.8) * eps**4)


def averaged_step(rng, n: int, ten: float, noise: float = 0.15) -> float:
    x, mu, h, xbar = 0.0, np.log(ten), 0.0, 0.0
    for t in range(1, n + 1):
        a = np.clip(acceptance(np.exp(x)) + noise * rng.standard_normal(), 0.0, 1.0)
        h = (1 - 1 / (t + 10)) * h + (0.8 - a) / (t + 10)
        x = mu - np.sqrt(t) / 0.05 * h
        w = t**-0.75
        xbar = w * x + (1 - w) * xbar
    return float(np.exp(xbar))


def main() -> None:
    rng = np.random.default_rng(0)
    for n in (50, 80, 150, 300, 1000):
        for ten in (10.0, 2.0, 1.0):
            step = np.median([averaged_step(rng, n, ten) for _ in range(200)])
            print(f"window {n:5d} mu=log({ten:g} eps): step {step:.3f} of the right one, "
                  f"acceptance there {acceptance(step):.3f}")


if __name__ == "__main__":
    main()
