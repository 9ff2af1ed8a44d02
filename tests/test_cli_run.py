"""`python -m gpuprofile run`: argument parsing, and errors on a machine without a GPU."""

import subprocess
import sys

import pytest

import gpuprofile as gp
from gpuprofile.cli import parse_run_args


def test_options_before_and_after_the_script():
    opts, script, args = parse_run_args(["train.py", "--trace", "t.json.gz", "--epochs", "3",
                                         "--no-memory"])
    assert script == "train.py" and args == ["--epochs", "3"]
    assert opts["trace"] == "t.json.gz" and opts["memory"] is False and opts["regions"] is True
    opts, script, args = parse_run_args(["--json=s.json", "--quiet", "x.py", "--", "--trace", "y"])
    assert (script, args) == ("x.py", ["--trace", "y"])
    assert opts["json"] == "s.json" and opts["summary"] is False and opts["trace"] is None


@pytest.mark.parametrize("argv, message", [
    ([], "no script given"),
    (["--trace"], "--trace needs a value"),
    (["--bogus", "x.py"], "unknown option '--bogus'"),
])
def test_bad_run_arguments(argv, message):
    with pytest.raises(ValueError, match=message):
        parse_run_args(argv)


def _run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gpuprofile", "run", *args], capture_output=True,
                          text=True, cwd=cwd)


def test_missing_script_and_help():
    out = _run("does-not-exist.py")
    assert out.returncode == 2 and "no such script" in out.stderr
    out = _run("--help")
    assert out.returncode == 0 and "--trace PATH" in out.stdout


@pytest.mark.skipif(gp.device_count() > 0, reason="checks the no-device behaviour")
def test_run_without_a_gpu_says_why(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    out = _run(str(script), "--trace", str(tmp_path / "t.json"))
    assert out.returncode == 1 and "cannot trace" in out.stderr and "ran" not in out.stdout
    assert not (tmp_path / "t.json").exists()
