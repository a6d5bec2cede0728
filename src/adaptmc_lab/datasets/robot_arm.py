"""MacKay's robot-arm regression problem: fresh draws from MacKay's and Neal's generative
process, not their data sets.

MacKay (1992), "A practical Bayesian framework for backpropagation networks"; Neal
(1996), "Bayesian Learning for Neural Networks", Ch. 3 describe the process below; each seed
draws a new training and test set from it, so a test error differs from the published ones
by the noise of the draw (`true_function_error` gives each draw's floor):

- ``x1`` uniform on ``[-1.932, -0.453] U [0.453, 1.932]``, ``x2`` uniform on
  ``[0.534, 3.142]``;
- ``y1 = 2.0 cos(x1) + 1.3 cos(x1 + x2) + e1``, ``y2 = 2.0 sin(x1) + 1.3 sin(x1 + x2) + e2``
  with independent Gaussian noise of standard deviation 0.05;
- 200 training and 400 test cases.

The test error of a predictor is the mean over test cases of the squared error summed over
both outputs; noise alone gives ``2 * 0.05**2 = 0.0050`` in expectation, and
`true_function_error` gives that floor for a particular draw of the test set.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

X1_RANGE = (0.453, 1.932)
X2_RANGE = (0.534, 3.142)
NOISE_SD = 0.05
NOISE_FLOOR = 2 * NOISE_SD**2


class RobotArmData(NamedTuple):
    """``x_train: (200, 2)``, ``y_train: (200, 2)``, ``x_test: (400, 2)``, ``y_test: (400, 2)``."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    seed: int


def true_function(x: np.ndarray) -> np.ndarray:
    """The noise-free arm end point: ``x: (n, 2)`` joint angles -> ``(n, 2)`` coordinates."""
    x = np.asarray(x, dtype=float)
    x1, x2 = x[:, 0], x[:, 1]
    return np.stack(
        [2.0 * np.cos(x1) + 1.3 * np.cos(x1 + x2), 2.0 * np.sin(x1) + 1.3 * np.sin(x1 + x2)],
        axis=1,
    )


def sample_inputs(rng: np.random.Generator, num_cases: int) -> np.ndarray:
    """``(num_cases, 2)`` inputs; ``x1`` takes either sign with probability 1/2, so it is
    uniform on the union of the two (equal-length) intervals."""
    magnitude = rng.uniform(*X1_RANGE, size=num_cases)
    sign = np.where(rng.uniform(size=num_cases) < 0.5, -1.0, 1.0)
    x2 = rng.uniform(*X2_RANGE, size=num_cases)
    return np.stack([sign * magnitude, x2], axis=1)


def generate(
    seed: int = 0, num_train: int = 200, num_test: int = 400, noise_sd: float = NOISE_SD
) -> RobotArmData:
    """Draw a training and a test set with ``numpy.random.default_rng(seed)``."""
    if num_train < 1 or num_test < 1:
        raise ValueError(f"need at least one case, got num_train={num_train}, num_test={num_test}")
    if not noise_sd >= 0:
        raise ValueError(f"noise_sd must be >= 0, got {noise_sd}")
    rng = np.random.default_rng(seed)
    x_train = sample_inputs(rng, num_train)
    y_train = true_function(x_train) + noise_sd * rng.standard_normal((num_train, 2))
    x_test = sample_inputs(rng, num_test)
    y_test = true_function(x_test) + noise_sd * rng.standard_normal((num_test, 2))
    return RobotArmData(x_train, y_train, x_test, y_test, seed)


def test_error(predictions: np.ndarray, targets: np.ndarray) -> float:
    """Mean over cases of the squared error summed over outputs.

    ``predictions, targets: (n, 2)``.
    """
    predictions, targets = np.asarray(predictions), np.asarray(targets)
    if predictions.shape != targets.shape:
        raise ValueError(f"shapes differ: {predictions.shape} vs {targets.shape}")
    return float(np.mean(np.sum((predictions - targets) ** 2, axis=-1)))


def true_function_error(data: RobotArmData) -> float:
    """Test error of the true function on this test set: the floor for this draw."""
    return test_error(true_function(data.x_test), data.y_test)
