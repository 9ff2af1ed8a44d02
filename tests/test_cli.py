"""The command line as a whole: every subcommand listed with help and an example, usage errors
exit 2 on stderr, and the README's set-up commands (the ones CI runs) include a main job that
exits 0 on this machine."""

import pathlib
import re
import subprocess
import sys

import pytest

import gpuprofile as gp

ROOT = pathlib.Path(__file__).resolve().parents[1]
SUBCOMMANDS = ["info", "run", "bench", "compare", "metrics", "stalls", "attention", "profile-kernels",
               "merge"]


def gpuprofile(*args):
    # in the current folder: tests/conftest.py sees that it holds no gpuprofile/ other than the one
    # under test
    return subprocess.run([sys.executable, "-m", "gpuprofile", *args], capture_output=True, text=True)


def test_top_level_help_lists_every_subcommand_with_examples():
    out = gpuprofile("--help")
    assert out.returncode == 0 and "examples:" in out.stdout
    for name in SUBCOMMANDS:
        assert re.search(rf"^\s+{re.escape(name)}\s+\S", out.stdout, re.M), name


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_subcommand_help_has_an_example(name):
    out = gpuprofile(name, "--help")
    assert out.returncode == 0 and out.stderr == ""
    assert "example" in out.stdout and f"gpuprofile {name}" in out.stdout.split("example", 1)[1]


@pytest.mark.parametrize("argv", [[], ["nonsense"], ["bench", "--no-such-option", "1"]])
def test_usage_errors_exit_2_on_stderr(argv):
    out = gpuprofile(*argv)
    assert out.returncode == 2 and out.stdout == "" and "usage: gpuprofile" in out.stderr


def readme_commands():
    """The commands of every bash block in the README's Set up section, in order."""
    section = (ROOT / "README.md").read_text().split("## Set up", 1)[1].split("\n## ", 1)[0]
    blocks = [part.split("```", 1)[0] for part in section.split("```bash")[1:]]
    return [line.split("#", 1)[0].strip() for block in blocks for line in block.strip().splitlines()]


def test_ci_runs_exactly_the_readme_set_up_commands():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.startswith(("#", "set ", "cd ", "rm ", "python3 -m venv", "source ",
                                                   "python -m pip install -q --upgrade pip",
                                                   "export GPUPROFILE_WERROR=1"))]
    assert ci == readme_commands()


@pytest.mark.skipif(gp.device_count() > 0, reason="with a device the demo's GPU test runs it (smaller)")
def test_the_readme_main_job_exits_0_without_a_gpu(tmp_path):
    (main_job,) = [c for c in readme_commands() if "attention" in c]
    argv = main_job.split()[3:]  # after `python -m gpuprofile`
    out = subprocess.run([sys.executable, "-m", "gpuprofile", *argv], capture_output=True, text=True,
                         cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "no CUDA device here" in out.stderr and out.stdout == ""


def test_exit_statuses_are_one_table_and_1_is_never_an_error():
    """docs/cli.md's table is _cli_common's (0 done, 1 the measurement says no, 2 an error, 3 compare --strict), and
    no subcommand reports an error line with status 1 (a CI step would read it as a regression)."""
    from gpuprofile import _cli_common

    root = pathlib.Path(_cli_common.__file__).parent
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = text.split("\n## Exit status\n", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^\| (\d+) \|", section, re.M) == [
        str(s) for s in (_cli_common.OK, _cli_common.FAILED, _cli_common.ERROR, _cli_common.STRICT)]
    offenders = []
    for path in root.rglob("*cli*.py"):
        source = path.read_text(encoding="utf-8")
        offenders += [f"{path.name}: {m.group(0)}" for m in re.finditer(r"error\([^\n]*, 1\)", source)]
        offenders += [f"{path.name}: {m.group(0)}" for m in re.finditer(r"error: [^\n]*\n[^\n]*return 1\b", source)]
    assert offenders == []
