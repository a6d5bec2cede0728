"""Compile seconds of the warm-up's chunk program: BlackJAX's NUTS kernel against the
compact one (`adaptmc.adaptation.compact_nuts`), same target, shapes and metric arrays.
Usage: python scripts/cnuts_compile.py TARGET {blackjax,compact} [chains]; one fresh
process per measurement, no compile cache."""

import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from adaptmc.adaptation.chains import over_chains  # noqa: E402
from adaptmc.adaptation.dual_averaging import da_init, da_update  # noqa: E402
from adaptmc.adaptation.early import warmup_rank  # noqa: E402
from adaptmc.adaptation.warmup_programs import CHUNK  # noqa: E402


def program2(target, target_accept=0.8):
    """The compact kernel, the chunk's random words drawn at once, the metric shared."""
    from adaptmc.adaptation.compact_nuts import nuts_step, transition_bits
    words = transition_bits(target.dim) + 1

    def one(row, metric):
        key, state, da, jitter = row

        def body(carry, bits):
            state, da = carry
            u = (bits[-1].astype(float) + 0.5) * 2.0**-32 * 2.0 - 1.0
            step = jnp.exp(da.log_step_size) * (1.0 + jitter * u)
            state, info = nuts_step(bits[:-1], state, target.logdensity_and_grad, step, metric)
            da = da_update(da, info.acceptance_rate, target_accept)
            return (state, da), (state.position, state.logdensity_grad, state.logdensity,
                                 info.num_integration_steps, info.is_divergent,
                                 info.acceptance_rate, step)

        bits = jax.random.bits(key, (CHUNK, words), jnp.uint32)
        (state, da), out = jax.lax.scan(body, (state, da), bits)
        return state, da, out

    def chunk(rows):
        key, state, da, metric, jitter = rows
        diag, vectors, values = (a[0] for a in metric)
        metric = (jnp.sqrt(diag), vectors, values)
        return jax.lax.map(lambda r: one(r, metric), (key, state, da, jitter))

    return jax.jit(chunk)


def program3(target, target_accept=0.8):
    """program2 with the carry and outputs packed in few arrays (fewer slices and updates)."""
    from blackjax.mcmc.hmc import HMCState

    from adaptmc.adaptation.compact_nuts import nuts_step, transition_bits
    from adaptmc.adaptation.dual_averaging import DualAveragingState
    words = transition_bits(target.dim) + 1
    d = target.dim

    def one(row, metric):
        key, packed, jitter = row

        def body(packed, bits):
            state = HMCState(packed[:d], packed[2 * d], packed[d:2 * d])
            da = DualAveragingState(*(packed[2 * d + 1 + i] for i in range(5)))
            u = (bits[-1].astype(float) + 0.5) * 2.0**-32 * 2.0 - 1.0
            step = jnp.exp(da.log_step_size) * (1.0 + jitter * u)
            state, info = nuts_step(bits[:-1], state, target.logdensity_and_grad, step, metric)
            da = da_update(da, info.acceptance_rate, target_accept)
            new = jnp.concatenate([state.position, state.logdensity_grad,
                                   jnp.stack([state.logdensity, *da])])
            out = jnp.concatenate([new[:2 * d + 1], jnp.stack([
                info.num_integration_steps.astype(float), info.is_divergent.astype(float),
                info.acceptance_rate, step])])
            return new, out

        bits = jax.random.bits(key, (CHUNK, words), jnp.uint32)
        return jax.lax.scan(body, packed, bits)

    def chunk(rows):
        key, state, da, metric, jitter = rows
        diag, vectors, values = (a[0] for a in metric)
        metric = (jnp.sqrt(diag), vectors, values)
        packed = jnp.concatenate([state.position, state.logdensity_grad,
                                  jnp.stack([state.logdensity, *da], axis=1)], axis=1)
        packed, out = jax.lax.map(lambda r: one(r, metric), (key, packed, jitter))
        state = HMCState(packed[:, :d], packed[:, 2 * d], packed[:, d:2 * d])
        da = DualAveragingState(*(packed[:, 2 * d + 1 + i] for i in range(5)))
        return state, da, (out[..., :d], out[..., d:2 * d], out[..., 2 * d],
                           out[..., 2 * d + 1].astype(jnp.int32), out[..., 2 * d + 2] > 0,
                           out[..., 2 * d + 3], out[..., 2 * d + 4])

    return jax.jit(chunk)


def program(target, which, target_accept=0.8):
    if which == "wired":  # this branch's chunk program (metric arrays shared, not per chain)
        from adaptmc.adaptation.warmup_programs import chunk_program
        chunk = chunk_program(target, target_accept)
        from adaptmc.adaptation.compact_nuts import NutsState

        def wired(rows):
            keys, state, da, metric, jitter = rows
            state = NutsState(state.position, state.logdensity, state.logdensity_grad)
            return chunk((keys, state, da, tuple(a[0] for a in metric), jitter))
        return jax.jit(wired)
    if which == "floor":  # compact3 with one leapfrog step in place of NUTS: the scaffolding
        import adaptmc.adaptation.compact_nuts as cn

        def one_step(bits, state, lg, step, metric):
            x = state.position + step * state.logdensity_grad
            lp, g = lg(x)
            info = cn.NutsInfo(jnp.int32(1), jnp.bool_(False),
                               jnp.exp(jnp.minimum(lp - state.logdensity, 0.0)))
            return state._replace(position=x, logdensity=lp, logdensity_grad=g), info
        cn.nuts_step = one_step
        return program3(target, target_accept)
    if which == "compact3":
        return program3(target, target_accept)
    if which == "compact2":
        return program2(target, target_accept)
    if which == "blackjax":
        import blackjax
        from blackjax.mcmc.metrics import LowRankInverseMassMatrix
        bj = blackjax.nuts.build_kernel()

        def kernel(key, state, step, metric):
            diag, vectors, values = metric
            return bj(key, state, target.logdensity, step,
                      LowRankInverseMassMatrix(jnp.sqrt(diag), vectors, values))
    else:
        from adaptmc.adaptation.compact_nuts import nuts_step

        def kernel(key, state, step, metric):
            diag, vectors, values = metric
            return nuts_step(key, state, target.logdensity_and_grad, step,
                             (jnp.sqrt(diag), vectors, values))

    def one(row):
        key, state, da, metric, jitter = row

        def body(carry, key):
            state, da = carry
            u = jax.random.uniform(jax.random.fold_in(key, 1), minval=-1.0, maxval=1.0)
            step = jnp.exp(da.log_step_size) * (1.0 + jitter * u)
            state, info = kernel(key, state, step, metric)
            da = da_update(da, info.acceptance_rate, target_accept)
            return (state, da), (state.position, state.logdensity_grad, state.logdensity,
                                 info.num_integration_steps, info.is_divergent,
                                 info.acceptance_rate, step)

        (state, da), out = jax.lax.scan(body, (state, da), jax.random.split(key, CHUNK))
        return state, da, out

    return jax.jit(over_chains(one))


def rows(target, chains=4):
    from blackjax.mcmc.hmc import HMCState
    d = target.dim
    rank = warmup_rank(d)
    x = np.tile(np.asarray(target.initial_position, float), (chains, 1))
    lp, g = jax.jit(jax.vmap(target.logdensity_and_grad))(x)
    state = HMCState(x, np.asarray(lp), np.asarray(g))
    da = da_init(np.full(chains, 0.1))
    metric = (np.ones((chains, d)), np.zeros((chains, d, rank)), np.ones((chains, rank)))
    keys = jax.random.split(jax.random.key(0), chains)
    return keys, state, da, metric, np.zeros(chains)


if __name__ == "__main__":
    if sys.argv[1].startswith("std-normal"):
        from adaptmc.targets import as_target
        target = as_target(sys.argv[1])
    else:
        from adaptmc_lab.targets import get_target
        target = get_target(sys.argv[1])
    args = rows(target, int(sys.argv[3]) if len(sys.argv) > 3 else 4)
    f = program(target, sys.argv[2])
    cpu0, tick = time.process_time(), time.perf_counter()
    lowered = f.lower(args)
    mid = time.perf_counter()
    compiled = lowered.compile()
    end, cpu1 = time.perf_counter(), time.process_time()
    out = compiled(args)
    jax.block_until_ready(out)
    tick2, steps = time.perf_counter(), 0
    for i in range(20):  # the chains move on: each call from the last one's states
        keys = jax.random.split(jax.random.key(i + 1), args[0].shape[0])
        args = (keys, type(args[1])(*out[0]), out[1], *args[3:])
        out = compiled(args)
        steps += int(np.sum(out[2][3]))
    run = (time.perf_counter() - tick2) / steps
    print(f"{sys.argv[1]} {sys.argv[2]} dim {target.dim} trace+lower {mid - tick:.3f} "
          f"compile {end - mid:.3f} s (cpu, lower+compile {cpu1 - cpu0:.3f} s, "
          f"{compiled.as_text().count(' fusion(')} fusions); "
          f"run {run * 1e6:.2f} us per leapfrog step "
          f"({steps} steps)")
