"""tools/compute_sanitizer.sh without a GPU: argument errors, and the split of the tests over
SHARDS processes (a stand-in for compute-sanitizer that just runs the command it is given)."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import conftest
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "compute_sanitizer.sh"


def run(env, tmp_path):
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHON": sys.executable, **env}, cwd=tmp_path)


def fake_sanitizer(tmp_path):
    """A stand-in for compute-sanitizer: drops its own options, runs the rest (python -m pytest)."""
    fake = tmp_path / "fake-sanitizer"
    fake.write_text('#!/bin/bash\nwhile [ $# -gt 0 ] && [ "$1" != "$PYTHON" ]; do shift; done\n'
                    'exec "$@"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return fake


@pytest.mark.parametrize("shards", ["x", "0", "-2", " "])
def test_shards_must_be_a_positive_integer(shards, tmp_path):
    out = run({"SHARDS": shards}, tmp_path)
    assert out.returncode == 2
    assert "SHARDS must be a positive integer" in out.stderr


@pytest.mark.skipif(conftest.TESTED != conftest.CHECKOUT / "gpuprofile",
                    reason="the script runs `python -m pytest` in the checkout: it tests the checkout's "
                           "own build, not an installed copy")
def test_shards_split_the_tests_round_robin(tmp_path):
    out = run({"COMPUTE_SANITIZER": str(fake_sanitizer(tmp_path)), "SHARDS": "3",
               "TOOLS": "racecheck"}, tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    logs = ROOT / "build" / "compute-sanitizer"
    every = (logs / "racecheck.ids").read_text().splitlines()
    shards = [(logs / f"racecheck.{k}.ids").read_text().splitlines() for k in range(3)]
    assert len(every) > 100
    assert shards == [every[k::3] for k in range(3)]  # shard k: the k-th, then every 3rd
    assert out.stdout.count("racecheck: no errors") == 3


@pytest.mark.skipif(conftest.TESTED != conftest.CHECKOUT / "gpuprofile",
                    reason="the script runs `python -m pytest` in the checkout")
@pytest.mark.parametrize("k", [["-k", "many_items or torch"], ["-kmany_items or torch"]])
def test_a_k_of_yours_selects_within_what_the_script_keeps(k, tmp_path):
    """pytest keeps only the last -k: the caller's used to replace the script's, so the tests it
    leaves out (torch interop, CUPTI, timing) ran under the tool. Joined, "torch" selects nothing
    the script left out."""
    out = subprocess.run(["bash", str(SCRIPT), *k], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHON": sys.executable, "SHARDS": "2",
                              "TOOLS": "synccheck",
                              "COMPUTE_SANITIZER": str(fake_sanitizer(tmp_path))}, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    ids = (ROOT / "build" / "compute-sanitizer" / "synccheck.ids").read_text().splitlines()
    assert ids and all("many_items" in i for i in ids), ids
    assert not any("torch" in i for i in ids)


def test_k_without_an_expression_is_refused(tmp_path):
    out = subprocess.run(["bash", str(SCRIPT), "-k"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHON": sys.executable}, cwd=tmp_path)
    assert out.returncode == 2
    assert "-k needs an expression" in out.stderr
