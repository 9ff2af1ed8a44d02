"""benchmarks/attention_story.py without a GPU: the table and figures from a saved story.json,
and its argument errors. (The measuring half runs on the device: docs/benchmarks.md.)"""

import json
import re

import pytest
from scripts import BENCHMARKS, load_benchmark

SCRIPT = BENCHMARKS / "attention_story.py"


def load():
    return load_benchmark("attention_story")


def row(impl, ms, tensor_pct, gmma, stalls):
    flops = 4 * 4 * 16 * 4096**2 * 128
    return {"impl": impl, "status": "ok", "flops_model": flops, "median_ms": ms,
            "tflops": flops / ms / 1e9, "flops_counted": flops * 1.02, "dram_bytes": 80e6,
            "kernel_seconds": ms * 1e-3, "tensor_pipe_pct": tensor_pct, "hmma_pipe_pct": 0.0,
            "inst_hmma": 0.0 if gmma else 2e7, "inst_gmma": 3e6 if gmma else 0.0,
            "fma_pipe_pct": 12.5, "occupancy_pct": 18.0, "issue_active_pct": 40.0,
            "stalls_kernel": impl + "_kernel", "stalls_samples": 1000, "stalls": stalls}


STORY = {
    "config": {"shape": [4, 16, 4096, 128], "dtype": "bfloat16", "causal": False,
               "device": {"name": "NVIDIA H100 80GB HBM3"}},
    "ceilings": {"device_name": "NVIDIA H100 80GB HBM3", "dram_bytes_per_s": 3.0e12,
                 "fp32_flops_per_s": 50e12, "tensor_flops_per_s": 600e12},
    "datasheet_tensor_flops_per_s": 989.4e12,
    "rows": [row("flash_tc", 1.5, 45.0, False, {"long_scoreboard": 0.3, "mio_throttle": 0.2}),
             row("flash_wgmma", 0.88, 70.0, True, {"gmma": 0.5, "barrier": 0.1}),
             {"impl": "sdpa_cudnn", "status": "skipped: torch with CUDA is not installed",
              "flops_model": 1.0}],
}


def test_table_from_a_saved_story(tmp_path, capsys):
    path = tmp_path / "story.json"
    path.write_text(json.dumps(STORY))
    assert load().main(["--plot", str(path)]) == 0
    md = (tmp_path / "story.md").read_text()
    assert md.startswith("NVIDIA H100 80GB HBM3: attention bfloat16, B=4 H=16 N=4096 D=128\n")
    lines = [ln for ln in md.splitlines() if ln.startswith("| flash_wgmma")]
    assert len(lines) == 1
    cells = [c.strip() for c in lines[0].strip("|").split("|")]
    # 4·4·16·4096²·128 FLOPs in 0.88 ms: 625 TFLOP/s, 104 % of the 600 TFLOP/s mma.sync ceiling,
    # 63 % of the datasheet's 989.4
    assert cells[1:6] == ["0.880", "625", f"{STORY['rows'][1]['flops_counted'] / 80e6:.0f}", "104", "63"]
    assert cells[7] == "0 / 3e+06" and cells[-1] == "gmma 50 %, barrier 10 %"
    assert "| sdpa_cudnn | skipped: torch with CUDA is not installed |" in md
    assert md.split("\n\n", 1)[1] in capsys.readouterr().out  # the same table is printed


def test_figures_from_a_saved_story(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "story.json"
    path.write_text(json.dumps(STORY))
    assert load().main(["--plot", str(path)]) == 0
    for name in ("roofline.png", "tensor.png", "stalls.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("argv, message", [
    ([], "exactly one of --output-dir"),
    (["--plot", "a.json", "--output-dir", "d"], "exactly one of --output-dir"),
    (["--plot", "a.json", "--impls", "flash,fast"], "unknown impls \\['fast'\\]"),
])
def test_argument_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        load().main(argv)
    assert e.value.code == 2
    assert re.search(message, capsys.readouterr().err)
