"""The lab's 26 posteriordb posteriors without published draws and the references the lab made
for them (`adaptmc_lab.datasets.posteriordb_extra`, `adaptmc_lab.bench.extra_references`):
shipped files, reference records, the agreement rule and the lookups. No Stan build."""

from __future__ import annotations

import hashlib
import json
import types

import numpy as np
import pytest

from adaptmc_lab.bench import extra_references as refs
from adaptmc_lab.bench.references import reference
from adaptmc_lab.datasets import posteriordb_extra as extra
from adaptmc_lab.targets import stan_posterior_files

RECORDS = sorted(extra.REFERENCES_DIR.glob("*.json")) if extra.REFERENCES_DIR.is_dir() else []


def test_shipped_files_match_their_checksums():
    """Every shipped file is posteriordb's (SHA256SUMS, made when they were copied), and each
    of the 26 posteriors has its program, data, metadata and info."""
    lines = (extra.EXTRA_DIR / "SHA256SUMS").read_text().split("\n")
    sums = dict(reversed(line.split("  ")) for line in lines if line)
    for relative, digest in sums.items():
        assert hashlib.sha256((extra.EXTRA_DIR / relative).read_bytes()).hexdigest() == digest
    folders = {relative.split("/")[0] for relative in sums}
    assert folders == set(extra.extra_posteriors()) and len(folders) == 26
    for folder in folders:
        for name in ("model.stan", "data.json.zip", "posterior.json", "info.json"):
            assert f"{folder}/{name}" in sums
    assert (extra.EXTRA_DIR / "LICENCE.md").is_file()


def test_posteriors_cheapest_first_and_found_as_stan_targets():
    names = extra.extra_posteriors()
    dims = [extra.info(n)["dimension"] for n in names]
    assert dims == sorted(dims) and dims[0] == 2 and dims[-1] == 438
    model, data = stan_posterior_files(f"stan-{names[0]}")
    assert model.endswith(f"{names[0]}/model.stan") and data.endswith("data.json.zip")
    assert stan_posterior_files("stan-no-such-posterior") is None


def test_every_posterior_has_a_record():
    assert {r.stem for r in RECORDS} == set(extra.extra_posteriors())


@pytest.mark.parametrize("path", RECORDS, ids=[r.stem for r in RECORDS])
def test_reference_record_parses_and_carries_its_agreement(path):
    """A kept reference passed the rule it records; a refused one says what disagreed; a
    skipped one says why."""
    record = json.loads(path.read_text())
    assert record["posterior"] == path.stem and record["target"] == f"stan-{path.stem}"
    assert record["status"] in ("reference", "no reference", "skipped")
    if record["status"] == "skipped":
        assert record["reason"]
        return
    check = record["agreement"]
    if record["status"] == "no reference":
        assert not check["agree"] and check["disagreements"]
        return
    k = len(record["names"])
    for key in ("mean", "sd", "mcse"):
        values = np.asarray(record[key], dtype=float)
        assert values.shape == (k,) and np.all(np.isfinite(values))
    assert np.all(np.asarray(record["sd"]) > 0) and check["agree"]
    if record["posterior"] in refs.BORROWED:
        assert check["source"]
        return
    assert check["max_pooled_rhat"] < check["rule"]["max_rhat"]
    assert check["max_z"] <= check["rule"]["max_z"]
    for sampler in record["samplers"]:
        run = record["runs"][sampler]
        assert run["version"] and run["gradients"] > 0
        assert min(run["ess"]) >= check["rule"]["min_ess"]
    assert record["command"] and record["settings"]["seed"] == refs.REFERENCE_RUN["seed"]


@pytest.mark.parametrize("path", RECORDS, ids=[r.stem for r in RECORDS])
def test_reference_finds_the_record(path):
    """`reference` of a ``stan-<posterior>`` target returns the record's reference, or None
    where the record refuses one."""
    record = json.loads(path.read_text())
    target = types.SimpleNamespace(name=f"stan-{path.stem}", reference=None, info={})
    found = reference(target)
    if record["status"] != "reference":
        assert found is None
        return
    assert list(found.names) == record["names"]
    np.testing.assert_allclose(found.mean, record["mean"])


def _summary(mean, mcse, ess=5000.0):
    k = len(mean)
    return {"mean": np.asarray(mean, float), "mcse": np.full(k, mcse), "ess": np.full(k, ess)}


def test_agreement_rule_can_fail():
    """Means 3 combined MCSEs apart agree; 6 apart, a pooled R-hat of 1.02 or an ESS of 100
    do not, and the record names the quantity."""
    names = ["a", "b"]
    ok = refs.agreement(_summary([0, 0], 0.01), _summary([0, 0.03 * np.sqrt(2)], 0.01),
                        np.array([1.001, 1.002]), names)
    assert ok["agree"] and not ok["disagreements"]
    far = refs.agreement(_summary([0, 0], 0.01), _summary([0, 0.06 * np.sqrt(2)], 0.01),
                         np.array([1.001, 1.002]), names)
    assert not far["agree"] and far["worst_z"] == "b"
    mixed = refs.agreement(_summary([0, 0], 0.01), _summary([0, 0], 0.01),
                           np.array([1.02, 1.0]), names)
    assert not mixed["agree"] and "R-hat 1.020 on a" in mixed["disagreements"][0]
    short = refs.agreement(_summary([0, 0], 0.01), _summary([0, 0], 0.01, ess=100.0),
                           np.array([1.0, 1.0]), names)
    assert not short["agree"] and "ESS 100" in short["disagreements"][0]


def test_borrowed_reference_is_the_noncentred_one():
    """The centred eight schools takes the non-centred posterior's published reference."""
    record = refs.borrowed_reference("eight_schools-eight_schools_centered")
    assert set(record["names"]) == {f"theta[{i}]" for i in range(1, 9)} | {"mu", "tau"}
    assert 3 < record["mean"][record["names"].index("tau")] < 4.5


def test_get_target_gives_an_extra_posterior_its_reference(monkeypatch):
    """``stan-<posterior>`` of a lab-shipped posterior is built from the lab's files and
    compared on its constrained parameters (``info["posterior"]``) against the lab's
    reference (the Stan build replaced by a stand-in)."""
    from adaptmc_lab import targets

    made = []

    def stand_in(spec, data=None):
        made.append((spec, data))
        return types.SimpleNamespace(reference=None, info={})

    monkeypatch.setattr(targets, "library_target", stand_in)
    monkeypatch.setattr(targets.dataclasses, "replace",
                        lambda obj, **kw: types.SimpleNamespace(**{**vars(obj), **kw}))
    name = "Rate_2_data-Rate_2_model"
    target = targets.get_target(f"stan-{name}")
    assert made[0][0] == str(extra.EXTRA_DIR / name / "model.stan")
    assert target.info["posterior"] == name
    expected = extra.load_reference(name)
    assert expected is not None and target.reference.names == expected.names


def test_the_broad_target_set_names_all_48_stan_programs():
    from adaptmc_lab.bench import expand_targets
    from adaptmc_lab.targets import stan_posterior_files

    targets = expand_targets(["broad"])
    assert len(targets) == len(set(targets)) == 48
    assert all(t.startswith("stan-") and stan_posterior_files(t) is not None for t in targets)
    assert "stan-dogs-dogs" in targets and "stan-arK-arK" in targets
    assert expand_targets(["pdb-arK-arK", "broad"])[:2] == ["pdb-arK-arK", targets[0]]
