"""The import-layers contract of pyproject.toml ([tool.importlinter]): it catches a wrong-way
import, allows the layers that do not exist yet, and holds for adaptmc itself."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def lint_imports(config: Path, path: Path) -> subprocess.CompletedProcess:
    """``lint-imports --config config`` with ``path`` first on the import path."""
    env = {**os.environ, "PYTHONPATH": str(path)}
    return subprocess.run(
        [sys.executable, "-c", LINT, "--config", str(config), "--no-cache"],
        cwd=path, env=env, capture_output=True, text=True, timeout=120,
    )


def fake_package(tmp_path: Path, imports: dict[str, list[str]]) -> Path:
    """A package ``fakemc`` with one module per required layer of the contract (the optional
    ones, in parentheses, left out) and ``imports[module]`` imported by ``module``, and the
    contract's config with ``adaptmc`` renamed ``fakemc``; returns the config's path."""
    package = tmp_path / "fakemc"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for layer in CONTRACT["contracts"][0]["layers"]:
        for name in (part.strip() for part in layer.split("|")):
            if not name.startswith("("):
                lines = [f"import fakemc.{other}\n" for other in imports.get(name, [])]
                (package / f"{name}.py").write_text("".join(lines))
    (package / "spec.py").write_text("".join(f"import fakemc.{m}\n" for m in
                                             imports.get("spec", [])))
    layers = ",\n".join(f'  "{layer}"' for layer in CONTRACT["contracts"][0]["layers"])
    config = tmp_path / "pyproject.toml"
    config.write_text(
        '[tool.importlinter]\nroot_package = "fakemc"\n\n[[tool.importlinter.contracts]]\n'
        'name = "layers"\ntype = "layers"\ncontainers = ["fakemc"]\n'
        f"layers = [\n{layers}\n]\n"
    )
    return config


def test_contract_passes_a_package_importing_downwards(tmp_path):
    config = fake_package(tmp_path, {"cli": ["bench", "run"], "bench": ["run", "kernels"],
                                     "kernels": ["targets"], "tuners": ["targets", "spec"],
                                     "targets": ["datasets", "spec"]})
    result = lint_imports(config, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


@pytest.mark.parametrize("importer, imported", [
    ("kernels", "tuners"),  # siblings: independent
    ("bench", "experiments"),
    ("targets", "run"),  # upwards
    ("spec", "kernels"),  # through a utility: targets -> spec -> kernels
])
def test_contract_fails_a_wrong_way_import(tmp_path, importer, imported):
    imports = {"targets": ["spec"]}
    imports[importer] = imports.get(importer, []) + [imported]
    config = fake_package(tmp_path, imports)
    result = lint_imports(config, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 broken" in result.stdout
    assert f"fakemc.{imported}" in result.stdout


def test_adaptmc_keeps_its_layers():
    result = lint_imports(ROOT / "pyproject.toml", ROOT / "src")
    assert result.returncode == 0, result.stdout + result.stderr
