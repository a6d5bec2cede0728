"""A kernel with a parameter of its own and a tuner are each one file plus one dict entry
(tests/toy_kernel.py, tests/toy_tuner.py): once registered in `adaptmc.kernels.KERNELS` and
`adaptmc.tuners.TUNERS`, the kernel's parameter is a flag of ``adaptmc sample`` and a keyword
of `adaptmc.sample` and `adaptmc.recipes.manual`, the tuner a ``--tuner`` choice, with their
help, checks and runs, and nothing else is edited."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import adaptmc
import toy_kernel
import toy_tuner
from adaptmc.cli import build_parser, main
from adaptmc.kernels import KERNELS
from adaptmc.options import OptionError
from adaptmc.recipes import manual
from adaptmc.targets import get_target
from adaptmc.tuners import TUNERS

TARGET = (lambda x: -0.5 * jnp.sum(x**2), jnp.zeros(2))
RUN = ["--super-transitions", "6", "--warmup", "3", "--budget", "100", "--chains", "2"]


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(KERNELS, "toy", toy_kernel.toy)
    monkeypatch.setitem(TUNERS, "corners", toy_tuner.ENTRY)


def sample_help() -> str:
    parser = build_parser()
    return parser._subparsers._group_actions[0].choices["sample"].format_help()


def test_flags_come_from_the_registered_kernel_and_tuner(registered):
    text = " ".join(sample_help().split())
    assert "--spread X half-width of the uniform proposal (toy)" in text
    assert "corners: the box's lower corner, centre and upper corner, then the best" in text


def test_without_the_entries_there_is_no_flag(capsys):
    assert "--spread" not in sample_help()
    assert main(["sample", "--target", "gauss-2d-v1", "--out", "never", "--spread", "1"]) == 2
    assert "unrecognized arguments: --spread" in capsys.readouterr().err


def test_the_command_line_runs_them(registered, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["sample", "--recipe", "manual", "--target", "gauss-2d-v1", "--kernel", "toy",
            "--spread", "0.7", "--tuner", "corners", *RUN, "--no-progress", "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    import arviz as az

    idata = az.from_netcdf(out / "draws.nc")
    assert idata.posterior.sizes["chain"] == 2
    tried = idata.tuning["spread"].values
    assert tried[:3].tolist() == [0.2, 1.6, 3.0]  # the toy tuner over the toy kernel's box
    best = int(np.argmax(idata.tuning["reward"].values[:3]))
    assert set(tried[3:]) == {tried[best]}


def test_the_command_line_refuses_a_bad_value_of_the_new_flag(registered, tmp_path, capsys):
    argv = ["sample", "--recipe", "manual", "--target", "gauss-2d-v1", "--kernel", "toy",
            "--spread", "-1", "--out", str(tmp_path / "never")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--spread" in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_the_api_runs_them(registered):
    idata = adaptmc.sample(TARGET, recipe="manual", kernel="toy", spread=0.7,
                           tuner="corners", super_transitions=6, warmup=3, budget=100,
                           chains=2, progress=False)
    assert idata.posterior["x"].shape[:2] == (2, 300)
    assert idata.attrs["kernel"] == "toy" and idata.tuning.attrs["tuner"] == "corners"


def test_the_api_refuses_a_bad_value_naming_it(registered):
    with pytest.raises(OptionError, match="^spread must be a number in"):
        adaptmc.sample(TARGET, recipe="manual", kernel="toy", spread=-1.0, progress=False)


def test_manual_takes_the_kernel_parameter_and_refuses_it_elsewhere(registered):
    target = get_target("gauss-2d-v1")
    plan = manual(target, kernel="toy", spread=0.3, tuner="corners", super_transitions=8)
    assert plan.params == toy_kernel.ToyParams(0.3)
    assert plan.box.names == ("spread",)
    with pytest.raises(ValueError, match="spread does not apply to kernel 'hmc'"):
        manual(target, kernel="hmc", spread=0.3)


def test_kernels_declare_a_shared_parameter_alike_and_never_an_option_name(monkeypatch):
    from dataclasses import replace

    from adaptmc.declarations import kernel_declarations, recipe_declarations
    from adaptmc.kernels.base import STEP_SIZE

    assert {o.name for o in kernel_declarations(KERNELS)} >= {"step_size", "num_leapfrog"}
    wider = toy_kernel.toy._replace(parameters=(replace(STEP_SIZE, high=1e9),))
    with pytest.raises(TypeError, match="declares step_size unlike kernel 'hmc'"):
        kernel_declarations({**KERNELS, "wide": wider})
    clashing = toy_kernel.toy._replace(parameters=(replace(STEP_SIZE, name="budget"),))
    monkeypatch.setitem(KERNELS, "clash", clashing)
    with pytest.raises(TypeError, match=r"kernel parameters \['budget'\]"):
        recipe_declarations()
