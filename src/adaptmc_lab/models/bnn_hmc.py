"""HMC on the weights of a Bayesian neural network, Gibbs on its precisions.

Neal (1996), Ch. 3: each transition is one HMC trajectory of ``num_leapfrog`` steps on
the weights given the current hyperparameters, with per-weight step sizes ``eps * s_w`` from
Neal's heuristic (`adaptmc_lab.models.bnn.step_scales`), followed by a Gibbs draw of every
precision from its Gamma conditional. The per-weight step sizes are a diagonal inverse mass
``s_w**2`` passed to the HMC step of `adaptmc.kernels.hmc`, which is reused unchanged.

The kernel reads the model from the target: ``target.info["bnn"]`` (a `BNN`) and
``target.info["masks"]``, either ``None`` (one network on all the data, position
``(dim,)``) or ``(copies, n)`` 0/1 case weights for a product chain over ``copies``
independent networks (cross-validation, `adaptmc_lab.models.cv`), position ``(copies * dim,)``
laid out copy by copy; ``target.info["inputs"]``, if present and not ``None``, gives each
copy its own inputs ``(copies, n, I)``. The copies advance in lockstep with the same
parameters, each with its own accept/reject; one product gradient evaluates all copies at
once and counts as one gradient evaluation, so a super-transition of budget S gives each
copy S leapfrog steps.

``num_grads`` per step is ``num_leapfrog + 1``: the gradient at the start of a trajectory is
recomputed because the Gibbs update changed the precisions.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from adaptmc.kernels.base import Kernel, StepInfo, check_positive, check_shape
from adaptmc.kernels.hmc import TUNABLES as HMC_TUNABLES
from adaptmc.kernels.hmc import HMCParams, HMCState
from adaptmc.kernels.hmc import step as hmc_step
from adaptmc_lab.models import bnn

Array = jax.Array


class BNNHMCParams(NamedTuple):
    """step_size: eps, the factor on Neal's per-weight scales; num_leapfrog: L; jitter: j of
    the step-size jitter ``eps * U(1 - j, 1 + j)``."""

    step_size: float = 0.1
    num_leapfrog: int = 100
    jitter: float = 0.0


class BNNState(NamedTuple):
    """``position``: flat weights and log precisions (of every copy); ``logdensity``: the
    joint log density there (summed over copies)."""

    position: Array
    logdensity: Array


class _Conditional(NamedTuple):
    """What `adaptmc.kernels.hmc.step` needs of a target: the weights' conditional."""

    logdensity_and_grad: object


def _masks(target) -> Array | None:
    return target.info.get("masks")


def init(position: Array, target) -> BNNState:
    position = jnp.asarray(position)
    return BNNState(position, target.logdensity(position))


def network_step(
    key: Array, position: Array, model: bnn.BNN, mask: Array, params: BNNHMCParams
) -> tuple[Array, Array, StepInfo]:
    """One HMC trajectory on the weights, then Gibbs on the precisions, for one network.

    ``position: (dim,)``, ``mask: (n,)``; returns ``(position, log_joint, info)``.
    """
    lay = bnn.layout(model)
    weights, log_prec_flat = position[: lay.num_weights], position[lay.num_weights :]
    log_prec = lay.unravel_precisions(log_prec_flat)

    def conditional(w):
        return bnn.log_joint(model, jnp.concatenate([w, log_prec_flat]), mask)

    cond = _Conditional(jax.value_and_grad(conditional))
    logdensity, grad = cond.logdensity_and_grad(weights)
    scales = bnn.step_scales(model, log_prec, mask)
    hmc_params = HMCParams(
        step_size=params.step_size,
        num_leapfrog=params.num_leapfrog,
        inverse_mass=scales * scales,
        refresh_angle=math.pi / 2,
        jitter=params.jitter,
    )
    key_hmc, key_gibbs = jax.random.split(key)
    start = HMCState(weights, logdensity, grad, jnp.full_like(weights, jnp.nan))
    end, info = hmc_step(key_hmc, start, cond, hmc_params)
    new_prec = bnn.gibbs_precisions(key_gibbs, model, lay.unravel_weights(end.position), mask)
    new_position = jnp.concatenate([end.position, ravel_pytree(new_prec)[0]])
    new_position = new_position.astype(position.dtype)
    info = info._replace(num_grads=info.num_grads + 1)
    return new_position, bnn.log_joint(model, new_position, mask), info


def step(key: Array, state: BNNState, target, params: BNNHMCParams) -> tuple[BNNState, StepInfo]:
    """One transition of every network copy (see the module docstring)."""
    model = target.info["bnn"]
    masks = _masks(target)
    if masks is None:
        mask = jnp.ones(model.x.shape[0], model.x.dtype)
        position, logdensity, info = network_step(key, state.position, model, mask, params)
        return BNNState(position, logdensity), info
    copies = masks.shape[0]
    rows = state.position.reshape(copies, -1)
    keys = jax.random.split(key, copies)
    inputs = target.info.get("inputs")
    if inputs is None:
        rows, logdensities, infos = jax.vmap(network_step, in_axes=(0, 0, None, 0, None))(
            keys, rows, model, masks, params
        )
    else:
        rows, logdensities, infos = jax.vmap(
            lambda k, r, m, x: network_step(k, r, model._replace(x=x), m, params)
        )(keys, rows, masks, inputs)
    info = StepInfo(
        acceptance_rate=jnp.mean(infos.acceptance_rate),
        accepted=jnp.any(infos.accepted),
        is_divergent=jnp.any(infos.is_divergent),
        energy_error=jnp.mean(infos.energy_error),
        num_grads=infos.num_grads[0],
    )
    return BNNState(rows.reshape(-1), jnp.sum(logdensities)), info


def cost(params: BNNHMCParams) -> int:
    return int(params.num_leapfrog) + 1


def check_params(params: BNNHMCParams, dim: int | None = None) -> None:
    check_positive("step_size", params.step_size)
    check_shape("step_size", params.step_size, dim)
    num = params.num_leapfrog
    if int(num) != num or int(num) < 1:
        raise ValueError(f"num_leapfrog must be an integer >= 1, got {num}")
    if not 0.0 <= float(params.jitter) < 1.0:
        raise ValueError(f"jitter must be in [0, 1), got {params.jitter}")


bnn_hmc = Kernel("bnn-hmc", init, step, cost, check_params, BNNHMCParams, HMC_TUNABLES)
