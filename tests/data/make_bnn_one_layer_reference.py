"""Regenerate ``bnn_one_layer_reference.npz``: values of the one-hidden-layer BNN computed with
the code of commit e9e981a (before `MLPSpec` took several hidden layers). The test
`tests/test_dexter.py::test_one_layer_network_is_unchanged` compares today's code with them.

Run from the repository root: ``PYTHONPATH=src python tests/data/make_bnn_one_layer_reference.py``.
"""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

jax.config.update("jax_enable_x64", True)

from adaptmc_lab.datasets import robot_arm  # noqa: E402
from adaptmc_lab.models import bnn, cv  # noqa: E402
from adaptmc_lab.models.bnn_hmc import BNNHMCParams, init, step  # noqa: E402


def one_case(name, spec, x, y) -> dict:
    model = bnn.make_bnn(spec, x, y)
    target = bnn.bnn_target(model, key=jax.random.key(1))
    position = target.initial_position + 0.2 * jax.random.normal(jax.random.key(2),
                                                                (target.dim,))
    mask = jnp.asarray(cv.kfold_masks(200, 4, seed=3)[1])
    value, grad = jax.value_and_grad(lambda p: bnn.log_joint(model, p, mask))(position)
    pos = bnn.unravel(model, position)
    gibbs = bnn.gibbs_precisions(jax.random.key(5), model, pos.weights, mask)
    masks = np.concatenate([cv.kfold_masks(200, 2, seed=0), np.ones((1, 200))])
    product = cv.product_target(model, masks)
    state = init(jnp.tile(position, 3), product)
    params = BNNHMCParams(step_size=0.2, num_leapfrog=7, jitter=0.1)
    advance = jax.jit(lambda k, s: step(k, s, product, params))
    for i in range(3):
        state, _ = advance(jax.random.key(10 + i), state)
    out = {
        f"{name}_position": np.asarray(position),
        f"{name}_logjoint": np.asarray(value),
        f"{name}_grad": np.asarray(grad),
        f"{name}_scales": np.asarray(bnn.step_scales(model, pos.log_precisions, mask)),
        f"{name}_gibbs": np.asarray(ravel_pytree(gibbs)[0]),
        f"{name}_chain": np.asarray(state.position),
        f"{name}_chain_logdensity": np.asarray(state.logdensity),
    }
    return out


def reference_values() -> dict:
    data = robot_arm.generate(0)
    out = {}
    cases = {
        "arm": (bnn.MLPSpec(2, 16, 2), data.x_train, data.y_train),
        "ard": (bnn.MLPSpec(2, 5, 1, "bernoulli", ard=True), data.x_train,
                (data.y_train[:, 0] > 0).astype(float)),
    }
    for name, (spec, x, y) in cases.items():
        out.update(one_case(name, spec, x, y))
    return out


if __name__ == "__main__":
    path = Path(__file__).with_name("bnn_one_layer_reference.npz")
    np.savez(path, **reference_values())
    print("written", path)
