"""`gpuprofile attention` and `gpuprofile profile-kernels` on a device, in fresh interpreters:
the table on stdout, the JSON and plots, the trace, and counters or the reason they are missing."""

import gzip
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu


def gpuprofile(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gpuprofile", *args], capture_output=True, text=True,
                          cwd=cwd)


def test_attention_demo_table_json_and_plots(tmp_path):
    pytest.importorskip("matplotlib")
    out = gpuprofile("attention", "--seq-lengths", "128,256", "--impls", "naive,flash,flash_tc",
                     "--max-time", "0.3", "--output", str(tmp_path / "r.json"), "--plots",
                     str(tmp_path / "plots"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("attention forward, bfloat16") and "flash_tc" in out.stdout
    assert "seq=256" in out.stderr  # each case's status is a diagnostic
    rows = json.loads((tmp_path / "r.json").read_text())["results"]
    assert [r["status"] for r in rows] == ["ok"] * 6
    assert sorted(os.listdir(tmp_path / "plots")) == ["latency.png", "memory.png", "speedup.png", "tflops.png"]


def test_profile_kernels_traces_and_counts(tmp_path):
    trace, summary = tmp_path / "t.json.gz", tmp_path / "p.json"
    out = gpuprofile("profile-kernels", "--seq-len", "512", "--impl", "flash", "--iters", "5",
                     "--trace", str(trace), "--json", str(summary))
    assert out.returncode == 0, out.stderr
    assert "gpuprofile trace:" in out.stdout and "max error" in out.stderr
    with gzip.open(trace, "rt") as f:
        assert json.load(f)["traceEvents"]
    data = json.loads(summary.read_text())
    assert data["trace"]["kernels"] >= 5 and data["config"]["impl"] == "flash"
    if data["metrics"] is None:  # counters not permitted here: the reason was given
        assert "hardware counters not collected" in out.stderr
    else:
        assert data["metrics"]["kernels"] and "gpuprofile metrics:" in out.stdout


def test_profile_kernels_seed_script_trace_only(tmp_path):
    script = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "profile_kernels.py")
    out = subprocess.run([sys.executable, script, "--impl", "naive", "--seq-len", "256", "--no-counters",
                          "--trace", str(tmp_path / "t.json")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "gpuprofile metrics" not in out.stdout and (tmp_path / "t.json").stat().st_size > 100
