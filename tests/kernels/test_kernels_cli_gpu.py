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


def test_main_job_on_hopper_runs_flash_wgmma_to_16k(tmp_path):
    """The README's main job, as a user runs it, on Hopper: flash_wgmma (what impl="auto" picks)
    at every length up to 16384, the pick and its reason printed, against SDPA's backends when
    torch is installed, about a minute."""
    pytest.importorskip("matplotlib")
    import time

    import gpuprofile as gp

    if gp.device_info().compute_capability[0] != 9:
        pytest.skip("the Hopper story: needs a compute capability 9.x device")
    start = time.perf_counter()
    out = gpuprofile("attention", "--plots", str(tmp_path / "plots"), "--output", str(tmp_path / "r.json"))
    wall = time.perf_counter() - start
    assert out.returncode == 0, out.stderr
    assert 'impl="auto" picks, for bfloat16:' in out.stderr
    assert "  flash_wgmma for B=32 H=32 N=512 D=64, " in out.stderr and "B=1 H=32 N=16384 D=64" in out.stderr
    assert "flash_wgmma is the first of flash_wgmma, flash_tc, flash, naive that takes these " \
           "arguments on this device" in out.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    rows = data["results"]
    wgmma = [r for r in rows if r["impl"] == "flash_wgmma"]
    assert [r["seq"] for r in wgmma] == [512, 1024, 2048, 4096, 8192, 16384]
    assert all(r["status"] == "ok" and r["auto"] and r["validated"] for r in wgmma)
    assert all(r["tflops"] > 200 for r in wgmma if r["seq"] >= 2048)  # tensor cores at work
    assert "flash_wgmma (auto)" in out.stdout
    naive_16k = next(r for r in rows if r["impl"] == "naive" and r["seq"] == 16384)
    if gp.device_info().total_memory_bytes / 4 < 34.4e9:  # its scores: over a quarter of an H100
        assert naive_16k["status"].startswith("skipped: it needs 34.4 GB beyond the inputs")
    plots = sorted(os.listdir(tmp_path / "plots"))
    if data["config"]["torch"]:
        assert "gp/cuDNN" in out.stdout and "versus_sdpa.png" in plots
        assert {r["impl"] for r in rows} >= {"sdpa_cudnn", "sdpa_flash", "sdpa_math"}
    assert {"latency.png", "tflops.png", "speedup.png", "memory.png"} <= set(plots)
    assert wall < 150, f"the main job took {wall:.0f} s; it should take about a minute"
