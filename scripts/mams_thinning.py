"""Does the MAMS thinning rule (`adaptmc.recipes.mams_rules.thinning`) pick a good ``k``?

One ``adaptive_hmc(mams="on")`` run of a bench target and seed (the bench row
``adaptmc-mams``'s warm-up and starts) keeps every transition (``thin=1``) for
``16 x 1000`` draws per chain; keeping every ``k``-th of its first ``1000 k`` transitions is
exactly the run that thins by ``k`` (same warm-up, adaptation and chain), at ``W + 1000 k g``
gradients per chain. Each ``k`` in 1..16 is scored as the bench scores a cell (robust min
ESS per 1000 gradients, every gradient counted) against the nutpie low-rank cell of the
same target and seed (``CELLS``), and the rule's ``k`` for a 1000-draw run is marked. The
rule's ``r1`` and ``k`` as a measurement window of the run's first 100 to 4000 transitions
per chain would give them are printed first.

    PYTHONPATH=src python scripts/mams_thinning.py stan-diamonds-diamonds 0 [CELLS]
"""

from __future__ import annotations

import json
import sys

import jax

from adaptmc.api import run_plan
from adaptmc.recipes import build
from adaptmc.recipes.mams_rules import per_transition_ess, thinning
from adaptmc_lab.bench.config import BenchConfig, SamplerOutput, cell_seed
from adaptmc_lab.bench.evaluation import evaluate
from adaptmc_lab.bench.quantities import run_positions
from adaptmc_lab.targets import get_target

KS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16)
WINDOWS = (100, 200, 400, 1000, 4000)


def main(name: str, seed_index: int, cells: str = "runs/mams/cells") -> None:
    jax.config.update("jax_enable_x64", True)  # as the bench's cells
    target, config = get_target(name), BenchConfig()
    seed, draws = cell_seed(name, seed_index), config.num_samples
    plan = build("adaptive-hmc", target, seed=seed, warmup_steps=config.num_warmup,
                 draws=max(KS) * draws, mams="on")
    result = run_plan(target, plan, chains=config.num_chains, seed=seed,
                      init_jitter=config.init_jitter, progress=False, thin=1)
    record = json.loads(result.idata.attrs["sampler"])
    g, chains = record["grads_per_transition"], config.num_chains
    before = result.num_grads - chains * max(KS) * draws * g  # warm-up, adaptation, checks
    overhead = record["overhead_per_draw"] * max(KS)  # per draw of a 1000-draw run
    rule = thinning(record["r1"], g, overhead)
    nutpie = json.load(open(f"{cells}/{name}__nutpie-low-rank__s{seed_index}.json"))
    positions = run_positions(result, target)
    print(json.dumps({"target": name, "seed": seed_index, "r1": record["r1"], "g": g,
                      "overhead_per_draw": overhead, "k_star": rule[0], "k": rule[1],
                      "nutpie": nutpie["min_ess_per_1k_grads"]}), flush=True)
    for window in WINDOWS:  # r1 and the rule's k from the first transitions of the run
        r1 = per_transition_ess(positions[:, :window])
        print(json.dumps({"window": window, "r1": r1, "k_star": thinning(r1, g, overhead)[0],
                          "k": thinning(r1, g, overhead)[1]}), flush=True)
    for k in KS:
        kept = positions[:, k - 1:k * draws:k]
        out = SamplerOutput(kept, before, chains * draws * k * g, 0.0, 0.0, 0, {})
        e = evaluate(target, out)
        print(json.dumps({"k": k, "rule": k == rule[1],
                          "ess1k": e["min_ess_per_1k_grads"], "min_ess": e["min_ess"],
                          "ratio": e["min_ess_per_1k_grads"] / nutpie["min_ess_per_1k_grads"],
                          "rhat": e["max_rhat"], "err_sd": e["max_err_sd"]}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), *sys.argv[3:])
