"""What a cell's draws are compared on: a posteriordb posterior's constrained parameters
under the reference names, a BNN's symmetry-invariant errors, else the flat coordinates."""

from __future__ import annotations

import numpy as np


def quantities(target, positions: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Names and ``(chains, draws, k)`` values of what is compared, from ``positions:
    (chains, draws, dim)``: a posteriordb target's constrained parameters under the
    reference names, a BNN's `bnn_quantities`, else the flat coordinates."""
    if "bnn" in target.info and "test" in target.info:
        return bnn_quantities(target, positions)
    if "posterior" in target.info:
        from adaptmc.targets.named_draws import constrained_draws

        named = constrained_draws(target, positions)
        return list(named), np.stack(list(named.values()), axis=-1)
    return list(target.parameter_names), np.asarray(positions)


def bnn_quantities(target, positions: np.ndarray) -> tuple[list[str], np.ndarray]:
    """What is compared on a BNN, per draw: the mean squared error (summed over outputs) of the
    draw's network on the training cases and on ``info["test"]``, and the log noise precision.
    A weight's mean says nothing, because the posterior is invariant to permuting hidden units
    and flipping the sign of a tanh unit's weights (Neal 1996, Sec. 1.2), so chains that
    sample it well disagree on every weight; these quantities are invariant to both. (The
    network's outputs at single inputs were tried first: a reference for them could not be
    had, BENCHMARKS.md.)"""
    import jax
    import jax.numpy as jnp

    from adaptmc_lab.models import bnn

    model = target.info["bnn"]
    x_test, y_test = (jnp.asarray(a) for a in target.info["test"])
    positions = np.asarray(positions)
    chains, draws, dim = positions.shape
    flat = jnp.asarray(positions.reshape(-1, dim))
    lay = bnn.layout(model)

    def per_draw(p):
        weights = lay.unravel_weights(p[: lay.num_weights])
        fit = jnp.mean(jnp.sum((bnn.forward(model.spec, weights, model.x) - model.y) ** 2, -1))
        test = jnp.mean(jnp.sum((bnn.forward(model.spec, weights, x_test) - y_test) ** 2, -1))
        return jnp.stack([fit, test, lay.unravel_precisions(p[lay.num_weights:])["noise"]])

    values = np.asarray(jax.lax.map(per_draw, flat, batch_size=4096))
    names = ["mse(train)", "mse(test)", "log_precision.noise"]
    return names, values.reshape(chains, draws, len(names))


def run_positions(result, target=None) -> np.ndarray:
    """``(chains, draws, dim)`` flat unconstrained draws of a `RunResult`, in
    ``ravel_pytree`` order. A target that stores its draws constrained (a Stan program, a
    posteriordb translation: ``theta``, ``mu``, ``tau`` for ``theta_trans``, ``mu``,
    ``log_tau``) has each draw mapped back (`adaptmc.targets.initial.unconstrained_draws`;
    its transformed parameters and generated quantities ignored); otherwise the
    posterior's variables are the positions (`adaptmc.run` writes them in tree-flatten
    order, which is ravel order)."""
    posterior = result.idata.posterior
    chains, draws = posterior.sizes["chain"], posterior.sizes["draw"]
    if getattr(target, "constrain", None) is not None:
        from adaptmc.targets.initial import unconstrained_draws

        return unconstrained_draws(target, {name: posterior[name].values
                                            for name in posterior.data_vars})
    return np.concatenate(
        [np.asarray(posterior[name].values).reshape(chains, draws, -1)
         for name in posterior.data_vars],
        axis=-1,
    )
