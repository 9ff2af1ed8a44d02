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


@pytest.mark.parametrize("shards", ["x", "0", "-2", " "])
def test_shards_must_be_a_positive_integer(shards, tmp_path):
    out = run({"SHARDS": shards}, tmp_path)
    assert out.returncode == 2
    assert "SHARDS must be a positive integer" in out.stderr


@pytest.mark.skipif(conftest.TESTED != conftest.CHECKOUT / "gpuprofile",
                    reason="the script runs `python -m pytest` in the checkout: it tests the checkout's "
                           "own build, not an installed copy")
def test_shards_split_the_tests_round_robin(tmp_path):
    fake = tmp_path / "fake-sanitizer"
    # drops the sanitizer's own options, runs the rest (python -m pytest ...)
    fake.write_text('#!/bin/bash\nwhile [ $# -gt 0 ] && [ "$1" != "$PYTHON" ]; do shift; done\n'
                    'exec "$@"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    out = run({"COMPUTE_SANITIZER": str(fake), "SHARDS": "3", "TOOLS": "racecheck"}, tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    logs = ROOT / "build" / "compute-sanitizer"
    every = (logs / "racecheck.ids").read_text().splitlines()
    shards = [(logs / f"racecheck.{k}.ids").read_text().splitlines() for k in range(3)]
    assert len(every) > 100
    assert shards == [every[k::3] for k in range(3)]  # shard k: the k-th, then every 3rd
    assert out.stdout.count("racecheck: no errors") == 3
