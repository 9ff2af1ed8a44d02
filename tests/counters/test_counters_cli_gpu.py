"""`gpuprofile metrics` and `gpuprofile stalls` on a device, in fresh interpreters (CUPTI is
process-global): a script launching the bundled attention kernels, its tables on stdout, the
script's output on stderr, --kernel and --json. Needs hardware-counter permission."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

SCRIPT = """
import sys
import numpy as np
import gpuprofile as gp

q = gp.kernels.to_device(np.ones((4, 16, 1024, 64), np.float32), "float16")  # ~1 ms for flash
for impl in sys.argv[1:]:
    gp.kernels.attention(q, q, q, impl=impl)
print("script done")
"""


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "attn.py"
    path.write_text(SCRIPT)
    return str(path)


def gpuprofile(*args):
    return subprocess.run([sys.executable, "-m", "gpuprofile", *args], capture_output=True, text=True)


def test_metrics_of_a_script_with_kernel_selection(script, tmp_path):
    out_json = tmp_path / "m.json"
    out = gpuprofile("metrics", "--kernel", "flash", "--json", str(out_json), script, "naive", "flash_tc")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("gpuprofile metrics: attn.py") and "script done" not in out.stdout
    assert "script done" in out.stderr and "kernels matching 'flash'" in out.stdout
    data = json.loads(out_json.read_text())
    assert data["kernels"] and all("flash" in k["name"] for k in data["kernels"])
    assert data["passes"] >= 1 and data["calls"] == data["passes"] + 1


def test_metrics_named_metrics_and_a_failing_script(script, tmp_path):
    out = gpuprofile("metrics", "--metrics", "dram__bytes_read.sum", "--per", "call", script, "flash")
    assert out.returncode == 0, out.stderr
    assert "dram__bytes_read.sum" in out.stdout
    bad = tmp_path / "bad.py"
    bad.write_text("raise SystemExit(4)\n")
    out = gpuprofile("metrics", str(bad))
    assert out.returncode == 4 and "exited with status 4" in out.stderr


def test_unknown_metric_is_a_usage_error(script):
    out = gpuprofile("metrics", "--metrics", "dram__bytes_red.sum", script, "flash")
    assert out.returncode == 2 and "dram__bytes_red.sum" in out.stderr


def test_stalls_of_a_script(script, tmp_path):
    out_json = tmp_path / "s.json"
    out = gpuprofile("stalls", "--kernel", "flash", "--json", str(out_json), script, "flash", "naive")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("gpuprofile stalls (PC sampling)")
    kernels = json.loads(out_json.read_text())["kernels"]
    assert kernels and all("flash" in k["name"] for k in kernels)
