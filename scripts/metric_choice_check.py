"""Which metric the warm-up chooses, and what each candidate measured, on posteriors a user
would precondition by hand (regressions with uncentred or interacting covariates) and on
independent coordinates of different scales (neal-100d):

    python scripts/metric_choice_check.py

kidiq kidscore_interaction and kidiq_with_mom_work kidscore_mom_work are written here in
JAX from their posteriordb Stan programs (``sigma > 0`` through ``log sigma`` with its
Jacobian); the others are built-in targets.
"""

import json
import zipfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from adaptmc.adaptation.early import early_warmup  # noqa: E402
from adaptmc.targets import as_target, get_target  # noqa: E402
from adaptmc_lab.bench.config import initial_positions  # noqa: E402

POSTERIORDB = Path(__file__).resolve().parents[1] / ".." / "shared" / "posteriordb"


def _data(name):
    with zipfile.ZipFile(POSTERIORDB / name / "data.json.zip") as archive:
        return json.loads(archive.read(archive.namelist()[0]))


def _regression(name, columns, cauchy_sigma):
    data = _data(name)
    y = jnp.asarray(data["kid_score"], float)
    design = jnp.stack([jnp.ones_like(y)] + [jnp.asarray(c, float) for c in columns(data)], 1)

    def logdensity(params):
        sigma = jnp.exp(params["log_sigma"])
        mean = design @ params["beta"]
        lp = jnp.sum(-0.5 * ((y - mean) / sigma) ** 2) - y.shape[0] * jnp.log(sigma)
        if cauchy_sigma:
            lp += -jnp.log1p((sigma / 2.5) ** 2)
        return lp + params["log_sigma"]

    init = {"beta": jnp.zeros(design.shape[1]), "log_sigma": jnp.asarray(0.0)}
    return as_target((logdensity, init))


def interaction(data):
    hs, iq = np.asarray(data["mom_hs"], float), np.asarray(data["mom_iq"], float)
    return [hs, iq, hs * iq]


def mom_work(data):
    work = np.asarray(data["mom_work"])
    return [(work == k).astype(float) for k in (2, 3, 4)]


def main():
    targets = {
        "kidiq-kidscore_interaction": _regression("kidiq-kidscore_interaction",
                                                  interaction, True),
        "kidiq_with_mom_work-kidscore_mom_work": _regression(
            "kidiq_with_mom_work-kidscore_mom_work", mom_work, False),
        "pdb-earnings-earn_height": get_target("pdb-earnings-earn_height"),
        "neal-100d": get_target("neal-100d"),
    }
    for name, target in targets.items():
        for seed in (0, 1):
            starts = initial_positions(target, seed, 4, 0.5)
            warm = early_warmup(target, starts, jax.random.key(seed), progress=False)
            measured = {k: round(v["condition"], 1) for k, v in warm.choice.items()
                        if isinstance(v, dict)}
            print(f"| {name} | {seed} | {warm.metric} | {measured} | {warm.num_grads:,} |",
                  flush=True)


if __name__ == "__main__":
    main()
