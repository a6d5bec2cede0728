"""The import contracts of pyproject.toml ([tool.importlinter]): the library's layers catch a
wrong-way import, none is optional, the library never imports the lab, and both hold for
adaptmc itself."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parents[1]
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
LAYERS = next(c for c in CONTRACTS["contracts"] if c["name"] == "adaptmc layers")["layers"]
LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def lint_imports(config: Path, path: Path) -> subprocess.CompletedProcess:
    """``lint-imports --config config`` with ``path`` first on the import path."""
    env = {**os.environ, "PYTHONPATH": str(path)}
    return subprocess.run(
        [sys.executable, "-c", LINT, "--config", str(config), "--no-cache"],
        cwd=path, env=env, capture_output=True, text=True, timeout=120,
    )


def fake_package(tmp_path: Path, imports: dict[str, list[str]]) -> Path:
    """A package ``fakemc`` with one module per layer of the library's contract and
    ``imports[module]`` imported by ``module``, and the contract's config with ``adaptmc``
    renamed ``fakemc``; returns the config's path."""
    package = tmp_path / "fakemc"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for layer in LAYERS:
        for name in (part.strip() for part in layer.split("|")):
            lines = [f"import fakemc.{other}\n" for other in imports.get(name, [])]
            (package / f"{name}.py").write_text("".join(lines))
    (package / "spec.py").write_text("".join(f"import fakemc.{m}\n" for m in
                                             imports.get("spec", [])))
    layers = ",\n".join(f'  "{layer}"' for layer in LAYERS)
    config = tmp_path / "pyproject.toml"
    config.write_text(
        '[tool.importlinter]\nroot_package = "fakemc"\n\n[[tool.importlinter.contracts]]\n'
        'name = "layers"\ntype = "layers"\ncontainers = ["fakemc"]\n'
        f"layers = [\n{layers}\n]\n"
    )
    return config


def test_contract_passes_a_package_importing_downwards(tmp_path):
    config = fake_package(tmp_path, {"cli": ["api", "run"], "recipes": ["run", "kernels"],
                                     "kernels": ["targets"], "tuners": ["targets", "spec"],
                                     "targets": ["datasets", "spec"]})
    result = lint_imports(config, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


@pytest.mark.parametrize("importer, imported", [
    ("kernels", "tuners"),  # siblings: independent
    ("run", "recipes"),
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


def test_no_layer_is_optional():
    for contract in CONTRACTS["contracts"]:
        for layer in contract.get("layers", []):
            assert "(" not in layer, (contract["name"], layer)


def test_the_forbidden_contract_fails_a_library_importing_the_lab(tmp_path):
    for name, body in (("fakemc", "import fakelab\n"), ("fakelab", "")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(body)
    config = tmp_path / "pyproject.toml"
    config.write_text(
        '[tool.importlinter]\nroot_packages = ["fakemc", "fakelab"]\n\n'
        '[[tool.importlinter.contracts]]\nname = "no lab"\ntype = "forbidden"\n'
        'source_modules = ["fakemc"]\nforbidden_modules = ["fakelab"]\n')
    result = lint_imports(config, tmp_path)
    assert result.returncode == 1 and "1 broken" in result.stdout, result.stdout


def test_import_adaptmc_imports_nothing_of_the_lab():
    """Nor ArviZ (3 s of a 6 s import; the run imports it where it builds InferenceData)."""
    code = ("import sys, adaptmc, adaptmc.cli, adaptmc.recipes; "
            "print(sorted(m for m in sys.modules if m.startswith(('adaptmc_lab', 'arviz'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert out.stdout.strip() == "[]"


def test_the_library_holds_no_module_function_strings():
    """Registries are plain dicts of callables: no ``"adaptmc.x:function"`` string anywhere in
    the library or the lab, which an import contract could not see."""
    import re

    pattern = re.compile(r"[\"']adaptmc(_lab)?(\.\w+)+:\w+[\"']")
    for path in (ROOT / "src").rglob("*.py"):
        assert not pattern.search(path.read_text()), path
