"""`gpuprofile merge` from the command line: results on stdout, errors on stderr, exit codes."""

import json
import subprocess
import sys

import ranks_synthetic as R
from test_merge import BASES, RANK0, RANK1, WALL_ERROR


def gpuprofile(*args, cwd):
    return subprocess.run([sys.executable, "-m", "gpuprofile", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd)


def test_merge_command(tmp_path, monkeypatch):
    paths = R.export_ranks(tmp_path, monkeypatch, [RANK0, RANK1], BASES, WALL_ERROR)
    out = gpuprofile("merge", *paths, "-o", tmp_path / "m.json.gz", "--json", tmp_path / "m.json",
                     cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert "merged 2 ranks" in out.stdout and "collective ends agree within 0 us" in out.stdout
    assert "the wall clocks disagreed by 40 us" in out.stdout
    assert "stragglers per 'step' step (3 steps, 2 ranks)" in out.stdout
    summary = json.loads((tmp_path / "m.json").read_text())
    assert summary["straggler"]["last_rank"] == [1, 1, 0]
    assert (tmp_path / "m.json.gz").stat().st_size > 0
    # a --json path that cannot be written: the merge is printed, then exit 1 with the reason
    out = gpuprofile("merge", *paths, "-o", tmp_path / "m2.json.gz", "--json", tmp_path,
                     cwd=tmp_path)
    assert out.returncode == 1 and "merged 2 ranks" in out.stdout
    assert f"gpuprofile merge: error: cannot write {tmp_path}: " in out.stderr


def test_merge_usage_and_file_errors(tmp_path):
    out = gpuprofile("merge", tmp_path / "a.json", cwd=tmp_path)  # no -o
    assert out.returncode == 2 and out.stdout == "" and "-o/--output" in out.stderr
    out = gpuprofile("merge", tmp_path / "missing.json", "-o", tmp_path / "m.json", cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == "" and "missing.json" in out.stderr
    assert not (tmp_path / "m.json").exists()
