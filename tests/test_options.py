"""Every declared option (`adaptmc.options`) refuses bad values on the command line and in
`adaptmc.sample`, before any folder exists, with a message naming the option. The cases are
generated from the declarations: a new option is covered by the same tests."""

from __future__ import annotations

import math

import jax.numpy as jnp
import pytest

import adaptmc
from adaptmc import options
from adaptmc.cli import main
from adaptmc.declarations import declarations, recipe_declarations
from adaptmc.options import MAX_COUNT, OptionError, flag
from adaptmc.recipes import RECIPES, recipe_options

TARGET = (lambda x: -0.5 * jnp.sum(x**2), jnp.zeros(2))


def recipe_taking(name: str) -> str:
    """A recipe that takes the option ``name`` (manual for the run's options)."""
    if name not in {o.name for o in recipe_declarations()}:
        return "manual"
    return next(r for r in ("manual", *RECIPES) if name in recipe_options(r))


DECLARED = declarations()
CASES = [(o.name, v) for o in DECLARED.values() for v in options.invalid_examples(o)]
assert len(CASES) > 150  # every option, several values each


def cli_text(value) -> str:
    return value if isinstance(value, str) and value != "2" else (
        "abc" if value == "2" else repr(value) if isinstance(value, float) else str(value))


@pytest.mark.parametrize("name, value", CASES, ids=[f"{n}={v!r}" for n, v in CASES])
def test_the_command_line_refuses_a_bad_value_naming_the_flag(tmp_path, capsys, name, value):
    out = tmp_path / "never"
    argv = ["sample", "--recipe", recipe_taking(name), "--target", "gauss-2d-v1",
            "--no-progress", "--out", str(out), f"{flag(name)}={cli_text(value)}"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert flag(name) in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


API_CASES = [(n, v) for n, v in CASES if DECLARED[n].api]


@pytest.mark.parametrize("name, value", API_CASES, ids=[f"{n}={v!r}" for n, v in API_CASES])
def test_sample_refuses_a_bad_keyword_naming_it(tmp_path, name, value):
    out = tmp_path / "never"
    with pytest.raises(OptionError, match=rf"^{name} "):
        adaptmc.sample(TARGET, recipe=recipe_taking(name), progress=False, output_dir=out,
                       **{name: value})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("keywords, message", [
    (dict(init="zeros"), "^init must be a dict of named values or an array"),
    (dict(init={"x": 0.0}), "^init the target's parameters have no names"),
    (dict(init=[0.0, math.nan]), "^init must hold finite"),
    (dict(objective=3, recipe="manual"), "^objective must be a name or a function"),
    (dict(kernel=3, recipe="manual"), "^kernel must be"),
    (dict(recipe="nope"), "^recipe must be one of"),
    (dict(force="yes"), "^force must be True or False"),
    (dict(output_dir=3), "^output_dir must be"),
])
def test_sample_refuses_bad_objects_naming_them(tmp_path, keywords, message):
    with pytest.raises(OptionError, match=message):
        adaptmc.sample(TARGET, progress=False, **keywords)


def test_a_numpyro_model_without_its_data_says_so():
    numpyro = pytest.importorskip("numpyro")
    dist = numpyro.distributions

    def regression(x, y):
        b = numpyro.sample("b", dist.Normal(0, 1))
        numpyro.sample("y", dist.Normal(b * x, 1), obs=y)

    with pytest.raises(ValueError, match=r"regression\(x, y\) was called without its data"):
        adaptmc.sample(regression, progress=False)


def test_sizes_beyond_the_machine_are_refused_up_front(tmp_path, capsys, monkeypatch):
    with pytest.raises(OptionError, match="^warmup_steps is too large: .* of memory"):
        options.check_resources({"warmup_steps": 10**7}, dim=10**5, chains=64)
    monkeypatch.setattr(options, "free_disk", lambda path: 10**6)
    with pytest.raises(OptionError, match="^draws is too large: .* of free disk"):
        options.check_resources({"draws": 10**6}, dim=10, chains=4, output_dir=tmp_path)
    out = tmp_path / "never"
    argv = ["sample", "--recipe", "manual", "--target", "gauss-2d-v1", "--no-progress",
            "--out", str(out), "--super-transitions", "1000", "--budget", "100000"]
    assert main(argv) == 2
    assert "--super-transitions is too large" in capsys.readouterr().err
    monkeypatch.setattr(options, "machine_memory", lambda: 10**8)
    assert main([*argv[:-4], "--budget", str(MAX_COUNT)]) == 2
    assert "--budget is too large" in capsys.readouterr().err
    assert not out.exists()


def test_every_option_of_every_command_has_help():
    import argparse

    from adaptmc.cli import build_parser

    def walk(parser):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from walk(sub)
            else:
                yield action

    missing = [a.option_strings or a.dest for a in walk(build_parser()) if not a.help]
    assert missing == []


def test_sample_help_is_grouped_and_short(capsys):
    assert main(["sample", "--help"]) == 0
    text = capsys.readouterr().out
    assert "run options:" in text and "adaptive-hmc and adaptive-portfolio options:" in text
    assert "manual options" in text and len(text.splitlines()) < 120
