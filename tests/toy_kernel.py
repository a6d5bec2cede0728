"""A kernel with a parameter of its own, in one file (tests/test_extending.py registers it
with one entry, ``KERNELS["toy"] = toy``): Metropolis with a uniform proposal of half-width
``spread`` around the current point (symmetric, so the acceptance is ``min(1, pi(y)/pi(x))``)."""

from __future__ import annotations

from typing import NamedTuple

import jax

from adaptmc.kernels import Kernel, Param, StepInfo, Tunable
from adaptmc.kernels.base import check_positive, metropolis_hastings, select


class ToyParams(NamedTuple):
    spread: float = 1.0


class ToyState(NamedTuple):
    position: jax.Array
    logdensity: jax.Array


def init(position, target) -> ToyState:
    return ToyState(position, target.logdensity(position))


def step(key, state: ToyState, target, params: ToyParams) -> tuple[ToyState, StepInfo]:
    key_proposal, key_accept = jax.random.split(key)
    shift = jax.random.uniform(key_proposal, state.position.shape, state.position.dtype,
                               -1.0, 1.0)
    proposal = state.position + params.spread * shift
    logdensity = target.logdensity(proposal)
    accept, info = metropolis_hastings(key_accept, logdensity - state.logdensity, 1)
    return select(accept, ToyState(proposal, logdensity), state), info


def check_params(params: ToyParams, dim: int | None = None) -> None:
    check_positive("spread", params.spread)


toy = Kernel("toy", init, step, lambda params: 1, check_params, ToyParams,
             tunables=(Tunable("spread", bounds=(0.2, 3.0)),),
             parameters=(Param("spread", "float", "half-width of the uniform proposal",
                               0.0, 100.0, "low"),))
