"""The early warm-up (`adaptmc.adaptation.early`) as a stage of `adaptmc.run.run`: started,
stepped one chunk of `CHUNK` transitions at a time, saved to and loaded from named arrays at
any chunk (a checkpoint), so a run killed in its warm-up resumes exactly where the last
checkpoint left it: the chains' states, step sizes, dual averaging, the metric (and the last
one a chunk ran well under), every transition's draws and gradients the estimators' windows
read, the schedule's counters, the gradient count and the PRNG key."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.adaptation.early import (
    CHUNK,
    OUTPUTS,
    EarlyWarmup,
    _Chains,
    chains_result,
    chunk_ahead,
    start_chains,
    warmup_rank,
)
from adaptmc.adaptation.low_rank import LowRankInverseMass
from adaptmc.adaptation.nuts_sampling import nuts_arm


def chains_to_arrays(run: _Chains) -> dict[str, np.ndarray]:
    """Everything `_Chains` holds, as named arrays (a checkpoint): chain states, dual
    averaging, the metric and the trusted one, the PRNG key's data, every chunk's outputs,
    the counters and the choice's measurements (JSON)."""
    arrays = {f"state/{i}": np.asarray(v) for i, v in enumerate(run.state)}
    arrays.update({f"da/{i}": np.asarray(v) for i, v in enumerate(run.da)})
    arrays.update({f"metric/{i}": np.asarray(v) for i, v in enumerate(run.metric)})
    if run.trusted is not None:
        arrays.update({f"trusted/{i}": np.asarray(v) for i, v in enumerate(run.trusted[0])})
        arrays["trusted/steps"] = np.asarray(run.trusted[1])
    arrays.update({f"out/{k}": np.stack(v) for k, v in run.out.items() if v})
    arrays["key"] = np.asarray(jax.random.key_data(run.key))
    meta = {**run.counters, "num_grads": run.num_grads, "choice": run.choice,
            "metric_trusted": run.trusted is not None and run.metric is run.trusted[0]}
    arrays["meta"] = np.frombuffer(json.dumps(meta, default=_json).encode(), dtype=np.uint8)
    return arrays


def chains_from_arrays(run: _Chains, arrays: dict) -> _Chains:
    """``run`` (freshly started, the template) set to the checkpoint ``arrays``
    (`chains_to_arrays`): the warm-up goes on exactly as if never stopped."""
    meta = json.loads(bytes(arrays["meta"]).decode())
    run.state = type(run.state)(*(jnp.asarray(arrays[f"state/{i}"])
                                  for i in range(len(run.state))))
    run.da = type(run.da)(*(jnp.asarray(arrays[f"da/{i}"]) for i in range(len(run.da))))
    run.metric = LowRankInverseMass(*(arrays[f"metric/{i}"] for i in range(3)))
    run.trusted = None
    if "trusted/steps" in arrays:
        trusted = run.metric if meta["metric_trusted"] else \
            LowRankInverseMass(*(arrays[f"trusted/{i}"] for i in range(3)))
        run.trusted = (trusted, jnp.asarray(arrays["trusted/steps"]))
    run.out = {k: list(arrays[f"out/{k}"]) if f"out/{k}" in arrays else [] for k in OUTPUTS}
    run.key = jax.random.wrap_key_data(np.asarray(arrays["key"]))
    run.num_grads, run.choice = int(meta["num_grads"]), meta["choice"]
    run.counters = {k: meta.get(k, v) for k, v in run.counters.items()}  # older: schedule's
    return run


def _json(value):
    return value.tolist() if hasattr(value, "tolist") else repr(value)


@dataclass(frozen=True)
class EarlyWarmupStage:
    """The warm-up as a stage of `adaptmc.run.run`: ``start`` the chains, ``step`` one chunk
    at a time until ``done``, ``save`` and ``load`` at any chunk, and ``finish`` with
    ``then(EarlyWarmup)`` (what the run goes on with: the recipe's plan after the warm-up);
    ``nuts``: ``"off"``, or whether NUTS may sample after tuning (``"choose"``: when its
    reward wins, `adaptmc.run.nuts_stage`) or always does (``"always"``); ``init_kernel``:
    the kernel whose states the run starts from the warm-up's positions, if ``then``'s plan
    does (its program is then compiled while the warm-up runs, `adaptmc.run.loop.init_ahead`);
    ``final_window``: False to end where the final window would start
    (`adaptmc.adaptation.early.start_chains`).
    """

    num_steps: int = 500
    metric: str = "auto"
    then: Callable | None = None
    target_accept: float = 0.8
    name: str = "warm-up"
    nuts: str = "off"
    init_kernel: object | None = None
    final_window: bool = True

    @property
    def num_blocks(self) -> int:
        return -(-int(self.num_steps) // CHUNK)

    def start(self, target, positions, key, progress: bool | None = None) -> _Chains:
        return start_chains(target, positions, key, num_steps=self.num_steps,
                            metric=self.metric, target_accept=self.target_accept,
                            progress=progress, final_window=self.final_window)

    def compile_ahead(self, target, chains: int) -> None:
        """Start compiling the chunk program (`early.chunk_ahead`) for ``chains`` chains at
        default starts (the target's dtype), before the run has computed them."""
        dtype = jax.dtypes.canonicalize_dtype(np.asarray(target.initial_position).dtype)
        positions = jax.ShapeDtypeStruct((chains, target.dim), dtype)
        key = jax.eval_shape(jax.random.key, 0)
        chunk_ahead(target, positions, key, warmup_rank(target.dim, self.metric),
                    self.target_accept)

    def step(self, run: _Chains) -> _Chains:
        run.advance()
        run.adapt()
        return run

    def done(self, run: _Chains) -> bool:
        return run.done()

    def position(self, run: _Chains) -> int:
        """Chunks run so far."""
        return run.counters["index"]

    def save(self, run: _Chains) -> dict:
        return chains_to_arrays(run)

    def load(self, run: _Chains, arrays: dict) -> _Chains:
        chains_from_arrays(run, arrays)
        if run.bar is not None:
            run.bar.update(run.counters["index"] * CHUNK)
        return run

    def result(self, run: _Chains) -> EarlyWarmup:
        return chains_result(run)

    def finish(self, run: _Chains):
        """``then(EarlyWarmup)``; with ``nuts`` (``"choose"`` or ``"always"``) also
        ``nuts=(NutsArm, force)``: what sampling with NUTS after tuning needs of the warm-up
        (`adaptmc.adaptation.nuts_sampling`)."""
        if self.nuts == "off":
            return self.then(self.result(run))
        result = self.result(run)  # far chains regrouped first: the arm's steps are theirs
        return self.then(result, nuts=(nuts_arm(run), self.nuts == "always"))
