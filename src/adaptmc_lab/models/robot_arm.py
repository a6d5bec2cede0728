"""MacKay's robot arm as a BNN target (Neal 1996, Sec. 3.2; Wang 2012, Sec. 4.1): the
built-in target ``bnn-robot-arm`` and the optimised starting point the robot-arm
reproduction and the bench's Gibbs-within-HMC reference start from."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from adaptmc.targets.base import Target
from adaptmc_lab.datasets import robot_arm as robot_arm_data
from adaptmc_lab.models import bnn


def robot_arm_target(num_hidden: int = 8) -> Target:
    """The robot-arm BNN (2 inputs, ``num_hidden`` tanh units, 2 outputs, 200 training cases
    generated with seed 0) as a `Target` over weights and log precisions, named
    ``bnn-robot-arm``; ``info["bnn"]`` is the model and ``info["test"]`` the 400 test cases
    ``(x: (400, 2), y: (400, 2))``."""
    data = robot_arm_data.generate(seed=0)
    model = bnn.make_bnn(bnn.MLPSpec(2, num_hidden, 2), data.x_train, data.y_train)
    target = bnn.bnn_target(model, name="bnn-robot-arm")
    test = (np.asarray(data.x_test), np.asarray(data.y_test))
    return dataclasses.replace(target, info={**target.info, "test": test})


def find_start(model: bnn.BNN, key, num_steps: int, learning_rate: float = 0.01):
    """A common starting point: weights from ``N(0, 0.1**2)`` improved by ``num_steps`` Adam
    steps on the log joint with the precisions at Neal's start (standard deviation 0.5), then
    the noise precision set from the residuals. Avoids the collapse of the weight precisions
    that a start at zero weights invites (Neal 1996 starts with the hyperparameters fixed for
    a while). Returns ``(position: (dim,), gradient evaluations)``."""
    import optax

    target = bnn.bnn_target(model, key=key)
    lay = bnn.layout(model)
    position = target.initial_position
    weights, log_prec = position[: lay.num_weights], position[lay.num_weights :]
    mask = jnp.ones(model.x.shape[0], model.x.dtype)

    def loss(w):
        return -bnn.log_joint(model, jnp.concatenate([w, log_prec]), mask)

    optimiser = optax.adam(learning_rate)

    def body(carry, _):
        w, opt_state = carry
        g = jax.grad(loss)(w)
        updates, opt_state = optimiser.update(g, opt_state)
        return (optax.apply_updates(w, updates), opt_state), None

    (weights, _), _ = jax.lax.scan(body, (weights, optimiser.init(weights)), None, num_steps)
    prec = lay.unravel_precisions(log_prec)
    if "noise" in prec:
        resid = model.y - bnn.forward(model.spec, lay.unravel_weights(weights), model.x)
        prec = {**prec, "noise": -jnp.log(jnp.mean(resid * resid))}
    flat = jnp.concatenate([weights, ravel_pytree(prec)[0]])
    return flat.astype(position.dtype), int(num_steps)
