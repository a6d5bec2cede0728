"""posteriordb: the loader, and each JAX translation against an independent NumPy/SciPy
log density (constrained space plus the log-Jacobian of Stan's transform), compared on
differences between reference draws so that dropped constants do not matter."""

from __future__ import annotations

import json
import shutil
import zipfile

import jax
import numpy as np
import pytest
from scipy import linalg, stats

from adaptmc.datasets.posteriordb import (
    POSTERIORS,
    default_posteriordb_dir,
    load_posterior,
)
from adaptmc.targets import get_target
from adaptmc.targets.base import compiled_logdensity_and_grad
from adaptmc.targets.named_draws import constrained_draws, group_named
from adaptmc.targets.posteriordb import (
    posteriordb_model,
    posteriordb_target,
    reference_position,
)

# (chain, draw) of the reference draws at which the log densities are compared
POINTS = ((0, 0), (1, 17), (3, 25), (6, 51), (9, 99))


# --- independent log densities: constrained parameters c, data d ---------------------------


def lp_eight_schools(c, d):
    theta_trans = (c["theta"] - c["mu"]) / c["tau"]
    return (
        stats.norm.logpdf(theta_trans).sum()
        + stats.norm.logpdf(d["y"], c["theta"], d["sigma"]).sum()
        + stats.norm.logpdf(c["mu"], 0, 5)
        + stats.cauchy.logpdf(c["tau"], 0, 5)
        + np.log(c["tau"])
    )


def lp_ark(c, d):
    y, order = np.asarray(d["y"], float), int(d["K"])
    lp = stats.norm.logpdf(c["alpha"], 0, 10) + stats.norm.logpdf(c["beta"], 0, 10).sum()
    lp += stats.cauchy.logpdf(c["sigma"], 0, 2.5) + np.log(c["sigma"])
    for t in range(order, len(y)):
        mu = c["alpha"] + sum(c["beta"][k] * y[t - k - 1] for k in range(order))
        lp += stats.norm.logpdf(y[t], mu, c["sigma"])
    return lp


def lp_diamonds(c, d):
    x = np.asarray(d["X"], float)
    xc = x[:, 1:] - x[:, 1:].mean(axis=0)
    return (
        stats.norm.logpdf(c["b"]).sum()
        + stats.t.logpdf(c["Intercept"], 3, 8, 10)
        + stats.t.logpdf(c["sigma"], 3, 0, 10)
        + np.log(c["sigma"])
        + stats.norm.logpdf(d["Y"], c["Intercept"] + xc @ c["b"], c["sigma"]).sum()
    )


def lp_gp_pois(c, d):
    x = np.asarray(d["x"], float)
    cov = c["alpha"] ** 2 * np.exp(-((x[:, None] - x[None, :]) ** 2) / (2 * c["rho"] ** 2))
    chol = linalg.cholesky(cov + 1e-10 * np.eye(len(x)), lower=True)
    f_tilde = linalg.solve_triangular(chol, c["f"], lower=True)
    return (
        stats.gamma.logpdf(c["rho"], 25, scale=1 / 4)
        + stats.norm.logpdf(c["alpha"], 0, 2)
        + stats.norm.logpdf(f_tilde).sum()
        + stats.poisson.logpmf(d["k"], np.exp(c["f"])).sum()
        + np.log(c["rho"])
        + np.log(c["alpha"])
    )


def lp_gauss_mix(c, d):
    mu, sigma, theta = c["mu"], c["sigma"], float(c["theta"])
    mix = np.logaddexp(
        np.log(theta) + stats.norm.logpdf(d["y"], mu[0], sigma[0]),
        np.log1p(-theta) + stats.norm.logpdf(d["y"], mu[1], sigma[1]),
    )
    return (
        stats.norm.logpdf(sigma, 0, 2).sum()
        + stats.norm.logpdf(mu, 0, 2).sum()
        + stats.beta.logpdf(theta, 5, 5)
        + mix.sum()
        + np.log(mu[1] - mu[0])  # ordered
        + np.log(sigma).sum()
        + np.log(theta) + np.log1p(-theta)
    )


def lp_garch(c, d):
    y = np.asarray(d["y"], float)
    mu, a0, a1, b1 = (float(c[k]) for k in ("mu", "alpha0", "alpha1", "beta1"))
    sigma = np.empty_like(y)
    sigma[0] = d["sigma1"]
    for t in range(1, len(y)):
        sigma[t] = np.sqrt(a0 + a1 * (y[t - 1] - mu) ** 2 + b1 * sigma[t - 1] ** 2)
    upper = 1 - a1
    return (
        stats.norm.logpdf(y, mu, sigma).sum()
        + np.log(a0)
        + np.log(a1) + np.log1p(-a1)
        + np.log(b1) + np.log(upper - b1) - np.log(upper)
    )


def lp_kidiq(c, d):
    mean = c["beta"][0] + c["beta"][1] * np.asarray(d["mom_iq"], float)
    return (
        stats.norm.logpdf(d["kid_score"], mean, c["sigma"]).sum()
        + stats.cauchy.logpdf(c["sigma"], 0, 2.5)
        + np.log(c["sigma"])
    )


def lp_nes(c, d):
    age = np.asarray(d["age_discrete"])
    b = c["beta"]
    mean = (
        b[0] + b[1] * d["real_ideo"] + b[2] * d["race_adj"] + b[3] * (age == 2)
        + b[4] * (age == 3) + b[5] * (age == 4) + b[6] * d["educ1"] + b[7] * d["gender"]
        + b[8] * d["income"]
    )
    return stats.norm.logpdf(d["partyid7"], mean, c["sigma"]).sum() + np.log(c["sigma"])


INDEPENDENT = {
    "eight_schools-eight_schools_noncentered": lp_eight_schools,
    "arK-arK": lp_ark,
    "diamonds-diamonds": lp_diamonds,
    "gp_pois_regr-gp_pois_regr": lp_gp_pois,
    "low_dim_gauss_mix-low_dim_gauss_mix": lp_gauss_mix,
    "garch-garch11": lp_garch,
    "kidiq-kidscore_momiq": lp_kidiq,
    "nes1972-nes": lp_nes,
}


def test_every_posterior_has_an_independent_check():
    """The three added posteriors are checked in tests/test_stan_translations.py."""
    from adaptmc.targets.stan_translations import NEW_MODELS

    assert set(INDEPENDENT) | set(NEW_MODELS) == set(POSTERIORS)


@pytest.mark.parametrize("name", sorted(INDEPENDENT))
def test_log_density_differences_match_independent(name):
    posterior = load_posterior(name)
    model = posteriordb_model(posterior)
    target = posteriordb_target(posterior.path)
    lp = jax.jit(target.logdensity)
    ours, theirs = [], []
    for chain, draw in POINTS:
        flat = {k: v[chain, draw] for k, v in posterior.reference_draws.items()}
        ours.append(float(lp(reference_position(posterior, model, chain, draw))))
        theirs.append(float(INDEPENDENT[name](group_named(flat), posterior.data)))
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert np.all(np.isfinite(ours))
    # the reference draws differ in log density by O(dim); compare to 1e-8 relative
    np.testing.assert_allclose(ours[1:] - ours[0], theirs[1:] - theirs[0], rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("name", POSTERIORS)
def test_constrain_inverts_unconstrain_and_names_match(name):
    posterior = load_posterior(name)
    model = posteriordb_model(posterior)
    target = get_target(f"pdb-{name}")
    positions = np.stack(
        [reference_position(posterior, model, c, d) for c, d in POINTS]
    )[None]  # (1 chain, draws, dim)
    draws = constrained_draws(target, positions)
    assert list(draws) == list(posterior.reference_draws)
    for key, values in draws.items():
        expected = [posterior.reference_draws[key][c, d] for c, d in POINTS]
        np.testing.assert_allclose(values[0], expected, rtol=1e-9, atol=1e-9)
    names = tuple(posterior.reference_draws)
    assert target.reference.names == names
    np.testing.assert_array_equal(target.reference.mean,
                                  [posterior.reference_mean[n] for n in names])
    np.testing.assert_array_equal(target.reference.mcse,
                                  [posterior.reference_mcse[n] for n in names])


@pytest.mark.parametrize("name", POSTERIORS)
def test_draws_are_stored_constrained_and_read_back(name):
    """A run's posterior group holds the Stan program's quantities as ``constrain`` names
    them (``theta``, ``mu``, ``tau``; labelled 1-based), and ``info["unconstrain"]`` maps
    them back to the position (what the bench and ``init`` read)."""
    from adaptmc.run.idata import posterior_variables

    posterior = load_posterior(name)
    model = posteriordb_model(posterior)
    target = get_target(f"pdb-{name}")
    positions = np.stack([reference_position(posterior, model, c, d) for c, d in POINTS])
    stored = posterior_variables(target, positions[None])
    assert set(stored) == set(group_named(dict.fromkeys(posterior.reference_draws, 0.0)))
    assert target.info["index_origin"] == 1
    back = [target.info["unconstrain"]({k: v[0, i] for k, v in stored.items()})
            for i in range(len(POINTS))]
    np.testing.assert_allclose(back, positions, rtol=1e-8, atol=1e-8)


def test_init_names_the_programs_quantities():
    """``init`` on a posteriordb target takes the names the posterior group shows."""
    from adaptmc.targets.initial import unconstrained_point

    target = get_target("pdb-eight_schools-eight_schools_noncentered")
    point = unconstrained_point(target, {"tau": 2.0, "mu": 1.0})
    values = target.constrain(point)
    assert float(values["tau"]) == pytest.approx(2.0) and float(values["mu"]) == 1.0
    np.testing.assert_allclose(values["theta"], 0.0)  # not named: where the target starts
    with pytest.raises(ValueError, match="log_tau"):
        unconstrained_point(target, {"log_tau": 0.5})


def test_gradient_finite_at_reference_draws():
    for name in POSTERIORS:
        posterior = load_posterior(name)
        model = posteriordb_model(posterior)
        target = posteriordb_target(name)
        # the target's compiled program (made for its start check), not op by op
        _, grad = compiled_logdensity_and_grad(target)(
            reference_position(posterior, model, 2, 3))
        assert np.all(np.isfinite(grad)), name


def test_loader_shapes_and_means():
    posterior = load_posterior("eight_schools-eight_schools_noncentered")
    # the shipped copy keeps every tenth of the 10 x 1000 published reference draws
    assert posterior.reference_draws["theta[1]"].shape == (10, 100)
    assert posterior.data["J"] == 8 and posterior.data["y"].shape == (8,)
    for key, mean in posterior.reference_mean.items():
        draws = posterior.reference_draws[key]
        sd = posterior.reference_sd[key]
        # 1000 nearly independent draws of the 10000 that mean_value.json averages
        assert abs(draws.mean() - mean) < 4 * sd / np.sqrt(draws.size), key
        assert abs(np.std(draws, ddof=1) / sd - 1) < 0.15, key
    assert "theta_trans" in posterior.model_code


def test_shipped_files_match_their_checksums():
    """Every file of the shipped posteriordb copy is the one `scripts/vendor_posteriordb.py`
    wrote (SHA256SUMS), and every posterior has its data, model and reference moments."""
    import hashlib

    root = default_posteriordb_dir()
    lines = (root / "SHA256SUMS").read_text().split("\n")
    sums = dict(reversed(line.split("  ")) for line in lines if line)
    for relative, digest in sums.items():
        assert hashlib.sha256((root / relative).read_bytes()).hexdigest() == digest, relative
    folders = {relative.split("/")[0] for relative in sums}
    assert set(POSTERIORS) <= folders and len(folders) == 22
    for folder in folders:
        for name in ("model.stan", "data.json.zip", "mean_value.json"):
            assert f"{folder}/{name}" in sums


def test_moments_only_posterior_has_reference_sd():
    """mcycle_gp is published with moments only: sds from mean_squared_value.json."""
    posterior = load_posterior("mcycle_gp-accel_gp")
    assert posterior.reference_draws == {}
    assert set(posterior.reference_sd) == set(posterior.reference_mean)
    assert all(np.isfinite(v) and v >= 0 for v in posterior.reference_sd.values())


def test_loader_missing_folder_and_file(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="posteriordb folder"):
        load_posterior(tmp_path / "nothing-here")
    monkeypatch.setenv("ADAPTMC_POSTERIORDB", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="ADAPTMC_POSTERIORDB"):
        load_posterior("arK-arK")
    folder = tmp_path / "arK-arK"
    folder.mkdir()
    with pytest.raises(FileNotFoundError, match="data.json.zip"):
        load_posterior(folder)


def test_loader_rejects_mismatched_names(tmp_path):
    source = load_posterior("kidiq-kidscore_momiq").path
    folder = tmp_path / "kidiq-kidscore_momiq"
    shutil.copytree(source, folder)
    means = json.loads((folder / "mean_value.json").read_text())
    means["names"][0] = "gamma"
    (folder / "mean_value.json").write_text(json.dumps(means))
    with pytest.raises(ValueError, match="differ"):
        load_posterior(folder)
    with zipfile.ZipFile(folder / "data.json.zip", "w") as archive:
        archive.writestr("a.json", "{}")
        archive.writestr("b.json", "{}")
    with pytest.raises(ValueError, match="exactly one"):
        load_posterior(folder)


def _program_parameters(code: str) -> set[str]:
    """The names declared in a Stan program's ``parameters`` block."""
    import re

    code = re.sub(r"//[^\n]*|/\*.*?\*/", "", code, flags=re.S)
    block = re.search(r"(?<!transformed )parameters\s*\{([^}]*)\}", code)
    return {re.findall(r"\w+", s)[-1] for s in block.group(1).split(";") if s.strip()}


def test_coordinates_named_as_the_program_names_its_parameters():
    """``parameter_names`` of every posteriordb target name the unconstrained coordinates by
    the Stan program's parameters, 1-based, as Stan names them (``tau`` for log tau)."""
    target = get_target("pdb-eight_schools-eight_schools_noncentered")
    assert target.parameter_names == ("tau", "mu", *(f"theta_trans[{i}]" for i in range(1, 9)))
    for name in POSTERIORS:
        target = posteriordb_target(name)
        names = target.parameter_names
        assert len(names) == target.dim == len(set(names)), name
        bases = {n.partition("[")[0] for n in names}
        assert bases == _program_parameters(load_posterior(name).model_code), name
        for base in bases:  # Stan's labels: 1..n
            labels = [n[len(base) + 1:-1] for n in names if n.startswith(base + "[")]
            assert labels == [str(i) for i in range(1, len(labels) + 1)], (name, base)
