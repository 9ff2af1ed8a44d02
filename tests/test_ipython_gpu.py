"""The IPython magics on a device: %gpu_timeit times on the GPU clock, and %%gpuprofile shows the
kernel summary, the cell's regions and the device-memory peak, and writes the trace."""

import json

import pytest

pytest.importorskip("IPython")

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def shell():
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "gpuprofile")
    sh.run_cell("import gpuprofile as gp")
    return sh


def test_gpu_timeit_uses_the_gpu_clock(shell):
    with capture_output():
        r = shell.run_line_magic("gpu_timeit", "-o --max-time 1 gp.kernels.spin(20000)")
    assert r.clock in ("cupti", "gpu") and r.device and r.median_ms > 0.005


def test_gpu_timeit_graph_mode_gets_a_stream(shell):
    with capture_output():
        r = shell.run_line_magic("gpu_timeit", "-o -m graph --max-time 1 gp.kernels.spin(20000, stream=stream)")
    assert r.mode == "graph" and r.graph_nodes >= 1


def test_gpuprofile_cell_shows_kernels_regions_and_memory(shell, tmp_path):
    trace = tmp_path / "cell.json"
    cell = ("import numpy as np\n"
            "with gp.region('attn'):\n"
            "    q = np.ones((1, 2, 128, 64), np.float32)\n"
            "    gp.kernels.attention(q, q, q, impl='flash')\n")
    with capture_output() as cap:
        shell.run_cell_magic("gpuprofile", f"--trace {trace}", cell)
    (shown,) = cap.outputs
    text = shown.data["text/plain"]
    assert "gpuprofile trace:" in text and "attn" in text and "device memory peak" in text
    assert "<table>" in shown.data["text/html"]
    assert json.loads(trace.read_text())["traceEvents"]
