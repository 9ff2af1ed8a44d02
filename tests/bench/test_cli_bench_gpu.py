"""`gpuprofile bench` on a device: the GPU clock, the L2 flush, graph mode's `stream`, and a saved
pair measured in rounds compared (a kernel twice as long is 'slower')."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

SETUP = ["-s", "import gpuprofile as gp"]


def gpuprofile(*args):
    return subprocess.run([sys.executable, "-m", "gpuprofile", *args], capture_output=True, text=True)


def test_bench_times_on_the_gpu_and_saves(tmp_path):
    out = gpuprofile("bench", *SETUP, "gp.kernels.spin(50_000)", "--max-time", "1",
                     "--json", str(tmp_path / "r.json"))
    assert out.returncode == 0, out.stderr
    assert "host clock" not in out.stdout and "L2 flushed" in out.stdout and "no CUDA device" not in out.stderr
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["clock"] in ("cupti", "gpu") and r["device"] and r["median_ms"] == pytest.approx(0.05, rel=0.3)


def test_bench_graph_mode_launches_on_stream():
    out = gpuprofile("bench", *SETUP, "gp.kernels.spin(20_000, stream=stream)", "--mode", "graph",
                     "--max-time", "1")
    assert out.returncode == 0, out.stderr
    assert "graph" in out.stdout


def test_compare_sees_a_kernel_twice_as_long(tmp_path):
    for name, ns in (("short.json", 50_000), ("long.json", 100_000)):
        # 3 rounds a side: one run a side cannot tell a change from drift between runs (issue 44)
        out = gpuprofile("bench", *SETUP, f"gp.kernels.spin({ns})", "--mode", "hot", "--max-time", "1",
                         "--rounds", "3", "--json", str(tmp_path / name))
        assert out.returncode == 0, out.stderr
    out = gpuprofile("compare", str(tmp_path / "short.json"), str(tmp_path / "long.json"))
    assert out.returncode == 1 and "slower" in out.stdout and "regression" in out.stderr
    out = gpuprofile("compare", str(tmp_path / "long.json"), str(tmp_path / "short.json"))
    assert out.returncode == 0 and "faster" in out.stdout
