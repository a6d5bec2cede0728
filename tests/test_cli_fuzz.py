"""Issue 13: fuzz the options of ``adaptmc sample`` (hypothesis, slow tier). Whatever the
values, the command exits 0 or 2, never shows a traceback, and a refused command leaves
nothing behind (no run folder, no temporary sibling)."""

from __future__ import annotations

import contextlib
import io as text_io
import shutil
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

from adaptmc.cli import main  # noqa: E402

NUMBERS = st.one_of(
    st.integers(-5, 60).map(str),
    st.floats(allow_nan=True, allow_infinity=True, width=32).map(repr),
    st.sampled_from(["0", "-0.0", "1e400", "2**70", str(2**70), "abc", "", "0.5", "1j"]),
)
OPTIONS = {
    "--step-size": NUMBERS, "--num-leapfrog": NUMBERS, "--budget": NUMBERS,
    "--super-transitions": st.integers(-2, 4).map(str), "--warmup": st.integers(-2, 4).map(str),
    "--adapt-until": NUMBERS, "--chains": st.integers(-1, 2).map(str), "--thin": NUMBERS,
    "--jitter": NUMBERS, "--seed": NUMBERS, "--inverse-mass": NUMBERS,
    "--tuner": st.sampled_from(["fixed", "grid", "gp-ucb", "random", "dual-averaging"]),
    "--box": st.builds(lambda n, lo, hi: f"{n}={lo}:{hi}",
                       st.sampled_from(["step_size", "num_leapfrog", "bogus"]), NUMBERS,
                       NUMBERS),
    "--grid": st.builds(lambda n, a, b: f"{n}={a},{b}",
                        st.sampled_from(["step_size", "num_leapfrog"]), NUMBERS, NUMBERS),
    "--objective": st.sampled_from(["esjd", "min-ess", "nope", "os:getcwd"]),
}


@pytest.mark.slow
@hypothesis.settings(max_examples=40, deadline=None, derandomize=True,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(st.dictionaries(st.sampled_from(sorted(OPTIONS)), st.none(), max_size=5)
                  .flatmap(lambda keys: st.fixed_dictionaries(
                      {k: OPTIONS[k] for k in keys})))
def test_sample_options_exit_0_or_2_and_leave_nothing_partial(options):
    parent = Path(tempfile.mkdtemp(prefix="adaptmc-fuzz-"))
    out = parent / "run"
    argv = ["sample", "--recipe", "manual", "--target", "gauss-2d-v1", "--no-progress",
            "--super-transitions", "3", "--budget", "40", "--chains", "2", "--out", str(out)]
    for flag, value in options.items():
        argv += [flag, value] if not value.startswith("-") else [f"{flag}={value}"]
    err = text_io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(text_io.StringIO()):
            try:
                code = main(argv)
            except SystemExit as exit_:  # argparse refusing a value
                code = exit_.code
        assert code in (0, 2), (argv, code, err.getvalue())
        assert "Traceback" not in err.getvalue(), (argv, err.getvalue())
        if code == 2:
            assert list(parent.iterdir()) == [], (argv, list(parent.iterdir()))
        else:
            assert (out / "draws.nc").is_file()
            assert [p.name for p in parent.iterdir()] == ["run"]
    finally:
        shutil.rmtree(parent, ignore_errors=True)
