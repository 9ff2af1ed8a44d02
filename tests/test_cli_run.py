"""`python -m gpuprofile run`: argument parsing, and errors on a machine without a GPU."""

import subprocess
import sys

import pytest

import gpuprofile as gp
from gpuprofile.cli import parse_run_args


def test_everything_after_the_script_is_the_scripts():
    # python -m cProfile, nsys and ncu: options before the script, the rest to it unread
    opts, script, args = parse_run_args(["--trace", "t.json.gz", "--no-memory", "train.py",
                                         "--epochs", "3", "--json", "x", "--quiet", "--", "-h"])
    assert script == "train.py" and args == ["--epochs", "3", "--json", "x", "--quiet", "--", "-h"]
    assert opts["trace"] == "t.json.gz" and opts["memory"] is False and opts["regions"] is True
    assert opts["json"] is None and opts["summary"] is True
    opts, script, args = parse_run_args(["--json=s.json", "--quiet", "x.py"])
    assert (script, args) == ("x.py", []) and opts["json"] == "s.json" and opts["summary"] is False
    opts, script, args = parse_run_args(["--quiet", "--", "-odd.py", "--trace", "y"])
    assert (script, args, opts["trace"]) == ("-odd.py", ["--trace", "y"], None)


def test_the_script_sees_its_own_arguments(tmp_path, capsys):
    from gpuprofile._script import run_script

    script = tmp_path / "echo_args.py"
    script.write_text("import sys\nprint(sys.argv[1:])\n")
    _, path, args = parse_run_args(["--quiet", str(script), "--json", "x", "--epochs", "3"])
    assert run_script(path, args) == 0
    assert capsys.readouterr().out.strip() == str(["--json", "x", "--epochs", "3"])


def test_python_stacks_options():
    opts, _, _ = parse_run_args(["--python-stacks", "line", "x.py"])
    assert opts["python-stacks"] == "line" and opts["folded"] is None
    opts, _, _ = parse_run_args(["--folded=gpu.folded", "x.py"])  # a flame graph needs stacks
    assert opts["python-stacks"] == "stack" and opts["folded"] == "gpu.folded"
    opts, _, _ = parse_run_args(["--folded", "f", "--python-stacks", "line", "x.py"])
    assert opts["python-stacks"] == "line"  # the launching line alone, as asked


def test_the_lines_printed_after_the_summary(capsys):
    from gpuprofile.cli import _print_lines
    from gpuprofile.tracing.pylines import LineTable

    rows = [{"line": f"/u/train.py:{k}", "source": "x()", "rows": 1, "kernels": 1,
             "gpu_ms": 1.0, "share": 1 / 25, "mean_us": 1000.0} for k in range(25)]

    class Fake:
        def by_line(self):
            return LineTable(rows, "line", 25.0)

    _print_lines(Fake())
    err = capsys.readouterr().err
    assert "GPU time per Python line (25.000 ms in all)" in err
    assert "/u/train.py:19" in err and "/u/train.py:20 " not in err
    assert "(5 more lines: Profile.by_line() has them all)" in err


@pytest.mark.parametrize("argv, message", [
    ([], "no script given"),
    (["--trace"], "--trace needs a value"),
    (["--bogus", "x.py"], "unknown option '--bogus'"),
    (["--quiet", "--"], "no script given after '--'"),
    (["--python-stacks", "lines", "x.py"], "--python-stacks takes 'line' or 'stack', not 'lines'"),
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
    assert out.returncode == 2 and "cannot trace" in out.stderr and "ran" not in out.stdout
    assert not (tmp_path / "t.json").exists()
