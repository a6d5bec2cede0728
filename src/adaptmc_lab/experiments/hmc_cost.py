"""Per-gradient cost of adaptmc's HMC against BlackJAX's HMC at the same fixed (eps, L).

Both samplers run the same number of transitions of the same target, vmapped over the same
number of chains, under ``jit``, float64, keeping every draw. Timings alternate between the
two (so machine noise hits both alike) and the median over repeats is reported, with the
ratio adaptmc / BlackJAX and each one's compile time. adaptmc is timed through its real
super-transition loop (`adaptmc.run.SuperTransitionLoop`, the compiled function every run
calls), and also end to end through `adaptmc.api.run_plan` with the ``manual`` recipe at the
same setting (tuning record, host transfer included), against the floor: the target's
jitted ``value_and_grad``, vmapped over the chains, called as many times in a compiled loop
(issue 14: the whole run within 1.2x of it on the expensive targets).
"""

from __future__ import annotations

import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

CASES = {
    # name: (target builder, step size, leapfrog steps)
    "neal-100d": ("neal-100d", 0.013, 100),
    "logistic-german": ("logistic-german", 0.05, 20),
    "bnn-robot-arm": ("bnn-robot-arm", 0.001, 20),
}


def _raw_runner(target, num_chains, num_grads):
    """The floor: ``num_grads`` calls of the vmapped ``value_and_grad`` in one compiled loop
    (each call's input depends on the last output, so none is hoisted or skipped)."""
    evaluate = jax.vmap(target.logdensity_and_grad)

    def loop(starts):
        def body(_, carry):
            x, total = carry
            value, grad = evaluate(x)
            return x + 1e-12 * grad, total + value

        return jax.lax.fori_loop(0, num_grads, body, (starts, jnp.zeros(num_chains)))

    starts = jnp.tile(target.initial_position, (num_chains, 1))
    compiled = jax.jit(loop).lower(starts).compile()

    def call():
        return float(jax.block_until_ready(compiled(starts))[1].mean())

    return call


def _blackjax_runner(target, step_size, num_leapfrog, num_chains, num_steps):
    import blackjax

    sampler = blackjax.hmc(target.logdensity, step_size, jnp.ones(target.dim), num_leapfrog)

    def one_chain(key, position):
        state = sampler.init(position)

        def body(state, key):
            state, info = sampler.step(key, state)
            return state, (state.position, info.acceptance_rate)

        _, (positions, acceptance) = jax.lax.scan(body, state, jax.random.split(key, num_steps))
        return positions, acceptance

    fn = jax.jit(jax.vmap(one_chain))
    keys = jax.random.split(jax.random.key(1), num_chains)
    starts = jnp.tile(target.initial_position, (num_chains, 1))
    tick = time.perf_counter()
    compiled = fn.lower(keys, starts).compile()
    compile_s = time.perf_counter() - tick

    def call():
        positions, acceptance = compiled(keys, starts)
        positions.block_until_ready()
        return float(acceptance.mean())

    return call, compile_s


def _adaptmc_runner(target, step_size, num_leapfrog, num_chains, num_steps):
    from adaptmc.kernels import HMCParams, hmc
    from adaptmc.run import SuperTransitionLoop

    params = HMCParams(step_size, num_leapfrog)
    loop = SuperTransitionLoop(target, hmc, num_chains)
    keys = jax.random.split(jax.random.key(2), num_chains)[:, None]  # one super-transition
    starts = jnp.tile(target.initial_position, (num_chains, 1))
    states = jax.vmap(lambda x: hmc.init(x, target))(starts)
    loop(keys, states, params, num_steps)  # compiles

    def call():
        _, positions, stats, _, _ = loop(keys, states, params, num_steps)  # NumPy: waited for
        return float(stats["acceptance_rate"].mean())

    return call, loop.compile_s


def _end_to_end(target, step_size, num_leapfrog, num_chains, num_steps):
    """Seconds of ``num_steps`` transitions through `adaptmc.api.run_plan` (the ``manual``
    recipe, fixed ``(eps, L)``, super-transitions of ``num_steps / 4`` transitions from the
    target's initial position): 4 x the median super-transition's wall time over the 8 after
    the first (which compiles); and the compile time."""
    from adaptmc import recipes
    from adaptmc.api import run_plan

    plan = recipes.manual(target, kernel="hmc", step_size=step_size, num_leapfrog=num_leapfrog,
                          tuner="fixed", objective=None, warmup=0, super_transitions=9,
                          budget=num_steps * num_leapfrog // 4)
    starts = np.tile(np.asarray(target.initial_position), (num_chains, 1))
    result = run_plan(target, plan, chains=num_chains, initial_positions=starts,
                      progress=False)
    sampling = float(np.median(result.idata.tuning.wall_s.values[1:]) * 4)
    return sampling, result.compile_s


def measure(case: str, num_chains: int = 4, num_steps: int = 1000, repeats: int = 5) -> dict:
    """Time both samplers on one case; return medians, ratio and compile times."""
    from adaptmc_lab.targets import get_target

    target_name, step_size, num_leapfrog = CASES[case]
    target = get_target(target_name)
    ours, our_compile = _adaptmc_runner(target, step_size, num_leapfrog, num_chains, num_steps)
    theirs, their_compile = _blackjax_runner(target, step_size, num_leapfrog, num_chains,
                                             num_steps)
    raw = _raw_runner(target, num_chains, num_steps * num_leapfrog)
    ours(), theirs(), raw()  # warm caches
    our_times, their_times, raw_times, ratios = [], [], [], []
    for _ in range(repeats):
        tick = time.perf_counter()
        our_acc = ours()
        mid = time.perf_counter()
        their_acc = theirs()
        end = time.perf_counter()
        raw()
        raw_times.append(time.perf_counter() - end)
        our_times.append(mid - tick)
        their_times.append(end - mid)
        ratios.append((mid - tick) / (end - mid))
    grads = num_chains * num_steps * num_leapfrog
    e2e, _ = _end_to_end(target, step_size, num_leapfrog, num_chains, num_steps)
    raw_us = 1e6 * float(np.median(raw_times)) / grads
    return {
        "case": case,
        "dim": target.dim,
        "step_size": step_size,
        "num_leapfrog": num_leapfrog,
        "chains": num_chains,
        "transitions": num_steps,
        "gradients": grads,
        "adaptmc_us_per_grad": 1e6 * float(np.median(our_times)) / grads,
        "blackjax_us_per_grad": 1e6 * float(np.median(their_times)) / grads,
        "ratio_median": float(np.median(ratios)),
        "ratio_min": float(np.min(ratios)),
        "ratio_max": float(np.max(ratios)),
        "adaptmc_run_us_per_grad": 1e6 * e2e / grads,
        "raw_us_per_grad": raw_us,
        "run_over_raw": 1e6 * e2e / grads / raw_us,
        "adaptmc_compile_s": our_compile,
        "blackjax_compile_s": their_compile,
        "acceptance": [our_acc, their_acc],
        "repeats": repeats,
    }


def markdown(rows: list[dict]) -> str:
    lines = [
        "| target | dim | eps | L | chains x transitions | adaptmc us/grad | BlackJAX us/grad "
        "| ratio (median [min, max]) | adaptmc `run` us/grad | raw value_and_grad us/grad "
        "| `run` / raw | compile adaptmc / BlackJAX (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['dim']} | {r['step_size']} | {r['num_leapfrog']} | "
            f"{r['chains']} x {r['transitions']} | {r['adaptmc_us_per_grad']:.3f} | "
            f"{r['blackjax_us_per_grad']:.3f} | {r['ratio_median']:.3f} "
            f"[{r['ratio_min']:.3f}, {r['ratio_max']:.3f}] | "
            f"{r['adaptmc_run_us_per_grad']:.3f} | {r['raw_us_per_grad']:.3f} | "
            f"{r['run_over_raw']:.2f} | "
            f"{r['adaptmc_compile_s']:.2f} / {r['blackjax_compile_s']:.2f} |"
        )
    return "\n".join(lines)


def run_hmc_cost(out: str, quick: bool = False, force: bool = False, seed: int = 0) -> int:
    """``adaptmc-lab reproduce hmc-cost``: write ``hmc_cost.json`` and ``hmc_cost.md``."""
    from adaptmc import io
    from adaptmc.io import create_output_dir, prepare_output_dir

    jax.config.update("jax_enable_x64", True)
    path = prepare_output_dir(out, force=force)
    create_output_dir(path, force=force)
    rows = []
    for case in CASES:
        print(f"timing {case} ...", flush=True)
        rows.append(measure(case, num_steps=200 if quick else 1000, repeats=3 if quick else 7))
    table = markdown(rows)
    io.write_json(Path(path, "hmc_cost.json"), rows)
    Path(path, "hmc_cost.md").write_text(table + "\n")
    print(table)
    return 0
