"""The attention benchmark scripts' pure parts, on any machine: arguments, default shapes, table
rows, and the plots (drawn from a results file written here, not from measurements)."""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "benchmarks"))

import benchmark_attention as ba  # noqa: E402
import visualize_results as vr  # noqa: E402


def test_arguments_and_default_shapes():
    args = ba.parse_args(["--seq-lengths", "128,4096", "--impls", "naive,flash_tc,sdpa_cudnn",
                          "--dtype", "fp16", "--head-dim", "128", "--causal"])
    assert args.seq_lengths == [128, 4096] and args.dtype == "float16" and args.causal
    assert args.impls == ["naive", "flash_tc", "sdpa_cudnn"]
    assert ba.shape_for(4096, 64) == (4, 32, 4096, 64)  # 16k tokens, heads·head_dim = 2048
    assert ba.shape_for(128, 128) == (128, 16, 128, 128)
    assert ba.shape_for(32768, 128, heads=4) == (1, 4, 32768, 128)
    with pytest.raises(SystemExit):
        ba.parse_args(["--impls", "cutlass"])


def test_peak_choice():
    assert ba.peak_for("flash", "bfloat16") == "fp32"
    assert ba.peak_for("flash_tc", "bfloat16") == "fp16_tensor"
    assert ba.peak_for("naive", "float32") == "fp32"


def fake_row(impl, seq, ms, extra=0, status="ok"):
    return {"impl": impl, "seq": seq, "head_dim": 64, "causal": False, "dtype": "bfloat16",
            "status": status, "median_ms": ms, "tflops": 1.0 / ms, "gbps": 2.0 / ms,
            "pct_peak_flops": 10.0, "pct_peak_bw": 20.0, "rel_noise": 0.004, "max_error": 0.01,
            "tolerance": 0.02, "extra_memory_bytes": extra}


def test_table_rows():
    assert ba.table_row(fake_row("flash_tc", 1024, 0.5)) == \
        ["flash_tc", 64, False, 1024, 0.5, 2.0, 4.0, 10.0, 20.0, 0.4, 0.5]
    failed = ba.table_row({"impl": "sdpa_cudnn", "seq": 8, "status": "failed: RuntimeError: no"})
    assert failed[:5] == ["sdpa_cudnn", None, None, 8, "failed: RuntimeError: no"]


def test_speedups_pair_rows_with_naive():
    rows = [fake_row("naive", 128, 2.0), fake_row("flash_tc", 128, 0.5), fake_row("flash", 256, 1.0)]
    (s,) = vr.speedups(rows)
    assert s["impl"] == "flash_tc" and s["speedup"] == 4.0


def test_plots_are_written(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [fake_row(impl, seq, ms * seq / 128, extra=seq * seq * 4 if impl == "naive" else 0)
            for impl, ms in (("naive", 1.0), ("flash_tc", 0.2)) for seq in (128, 256, 512)]
    rows.append(fake_row("sdpa", 128, 1.0, status="failed: x"))
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"config": {"device": {"name": "test", "peak_fp16_tensor_tflops": 9}},
                                "results": rows}))
    assert vr.main(["--input", str(path), "--output-dir", str(tmp_path / "plots")]) == 0
    names = sorted(os.listdir(tmp_path / "plots"))
    assert names == ["latency.png", "memory.png", "speedup.png", "tflops.png"]
    assert all((tmp_path / "plots" / n).stat().st_size > 1000 for n in names)
