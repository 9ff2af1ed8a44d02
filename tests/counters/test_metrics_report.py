"""Result objects on fabricated data: aggregation into totals, rendering (text, HTML with SOL
bars, JSON), FLOPs and roofline, stall breakdown, PM samples."""

import json

import numpy as np
import pytest

from gpuprofile.counters import catalog as _catalog
from gpuprofile.counters.metric_sets import (
    DRAM_READ,
    DRAM_WRITE,
    DURATION,
    FLOP_COUNTERS,
    MEMORY_SOL,
    SETS,
    SM_SOL,
    TENSOR_OPS,
)
from gpuprofile.counters.result import TERMINAL_WIDTH, build
from gpuprofile.counters.roofline import Ceilings
from gpuprofile.counters.sample import SampleResult, field_name
from gpuprofile.counters.stalls import StallReport, breakdown, parse_reason

SOL = list(SETS["sol"].metrics)
INFOS = _catalog.validate(SOL, "GH100")


def sol_values(duration, sm, mem, dram, clock=1.98e9):
    return (duration, sm, mem, dram, clock)


def per_kernel_result(names=("_Z4copyv", "_Z3fmav")):
    ranges = [("0", sol_values(750_000.0, 4.8, 85.3, 85.3)), ("1", sol_values(250_000.0, 99.3, 0.1, 0.0))]
    names = None if names is None else list(names)
    return build("step", "kernel", SOL, INFOS, ranges, names, passes=9, replay="user",
                 range_mode="auto", calls=10, cost_s=0.5, setup_s=0.3, chip="GH100", sets=["sol"],
                 notes=[], counter_data_bytes=123)


def test_per_kernel_totals_and_aggregation():
    r = per_kernel_result()
    assert [k.name for k in r.kernels] == ["_Z4copyv", "_Z3fmav"]
    assert r[DURATION] == 1_000_000.0
    assert r.aggregation[DURATION] == "sum" and r.aggregation[SM_SOL] == "weighted"
    assert r[SM_SOL] == pytest.approx((4.8 * 750 + 99.3 * 250) / 1000)
    assert r.value(SM_SOL, kernel=1) == 99.3
    assert r.value(SM_SOL, kernel="_Z4copyv") == 4.8
    assert r.unit(SM_SOL) == "percent" and r.unit(DURATION) == "nanosecond"
    assert r.bound(kernel=0).bound == "memory-bound"
    assert r.bound(kernel=1).bound == "compute-bound"
    with pytest.raises(KeyError, match="no kernel"):
        r.value(SM_SOL, kernel="nope")


def test_kernel_names_that_do_not_match_the_ranges_are_not_guessed():
    r = per_kernel_result(names=("only_one",))
    assert [k.name for k in r.kernels] == ["kernel #0", "kernel #1"]
    assert any("1 launches logged for 2 profiled kernels" in n for n in r.notes)
    r = per_kernel_result(names=None)
    assert r.kernels[0].name == "kernel #0"


def test_per_call_result_is_exact():
    r = build("fn", "call", SOL, INFOS, [("fn", sol_values(1e6, 50.0, 20.0, 10.0))], None,
              passes=9, replay="user", range_mode="user", calls=10, cost_s=1.0, setup_s=0.0,
              chip="GH100", sets=["sol"], notes=[], counter_data_bytes=1)
    assert r.aggregation == {m: "exact" for m in SOL}
    assert r[MEMORY_SOL] == 20.0 and len(r.kernels) == 1
    assert r.bound().bound == "mixed"


def test_rendering():
    r = per_kernel_result()
    text = str(r)
    assert "9 passes (user replay), 2 kernels" in text
    assert "bound: memory-bound" in text
    assert SM_SOL in text and "_Z4copyv" in text
    html = r._repr_html_()
    assert html.count("width:200px") == 3  # a SOL bar per pct_of_peak metric
    assert "<table>" in html
    d = json.loads(json.dumps(r.to_dict()))
    assert d["passes"] == 9 and d["units"][DURATION] == "nanosecond"
    assert d["kernels"][1]["values"][SM_SOL] == 99.3
    assert d["bound"]["bound"] == "memory-bound"


def _many(n):
    ranges = [(str(i), sol_values(1.0, 1.0, 1.0, 1.0)) for i in range(n)]  # kernels "#0", "#1", ...
    return build("x", "kernel", SOL, INFOS, ranges, None, passes=9, replay="user", range_mode="auto",
                 calls=10, cost_s=0.1, setup_s=0.0, chip="GH100", sets=[], notes=[],
                 counter_data_bytes=0)


def test_many_kernels_are_printed_as_sections_a_terminal_can_show():
    """13 kernels (a small torch script's): every one in a section of its own (as ncu's default
    page), every line within 120 characters, not one table 13 columns wide (issue 47)."""
    r = _many(13)
    text = str(r)
    sections = text.split("\n\n")
    assert len(sections) == 1 + 1 + 13  # header, total, one per kernel
    assert sections[1].startswith("total over 13 kernels (sum, weighted)\nmetric")
    assert [s.splitlines()[0] for s in sections[2:]] == [f"[{i}] #{i}" for i in range(13)]
    assert all(len(line) <= TERMINAL_WIDTH for line in text.splitlines())
    assert all(s.count("\n") == 2 + len(SOL) for s in sections[1:])
    assert "more kernels" not in text
    assert r._repr_html_().count("<table>") == 14


def test_more_kernels_than_the_sections_hold_are_named():
    text = str(_many(40))
    assert "[39] #39" not in text and "[29] #29" in text
    assert text.endswith("\n\n(+10 more kernels: to_csv(), to_pandas())")
    assert len(_many(40).table_rows()[0]) == 4 + 40  # the CSV has them all


LONG = ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, "
        "int>, cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarp"
        "Specialized<4>, cutlass::bfloat16_t>, void>>(cutlass::gemm::kernel::GemmUniversal<cute::"
        "tuple<int, int, int, int>, void>::Params)")


def test_no_line_is_wider_than_a_terminal_whatever_the_names_and_notes():
    ranges = [(str(i), sol_values(1.0, 1.0, 1.0, 1.0)) for i in range(3)]
    names = [LONG, "a_very_long_triton_kernel_name_" * 8, "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT"]
    note = "kernel names unavailable: " + "x" * 300
    for cache_control in ("all", "none"):
        r = build("a/very/long/script/path/" * 6, "kernel", SOL, INFOS, ranges, names, passes=9,
                  replay="user", range_mode="auto", calls=10, cost_s=0.1, setup_s=0.0,
                  chip="GH100", sets=[], notes=[note, "short"], counter_data_bytes=0,
                  cache_control=cache_control)
        lines = str(r).splitlines()
        assert max(len(line) for line in lines) <= TERMINAL_WIDTH, max(lines, key=len)
        assert "[0] cutlass::device_kernel<…>" in lines and "note: short" in lines
        assert any(line.startswith("[2] nvjet_tst_128x256") for line in lines)
        assert r.to_dict()["cache_control"] == cache_control
        assert r.to_dict()["clock_control"] == "none"
    # the wide form keeps the full names: a column per kernel
    assert f"0: {LONG}" in r.table_rows()[0]


def test_the_state_line_says_which_cache_and_clock_state_the_numbers_describe():
    per_kernel = build("x", "kernel", SOL, INFOS, [("0", sol_values(1.0, 1.0, 1.0, 1.0))], ["k"],
                       passes=9, replay="user", range_mode="auto", calls=10, cost_s=0.1,
                       setup_s=0.0, chip="GH100", sets=[], notes=[], counter_data_bytes=0)
    assert per_kernel.state() == (
        "caches: L2 flushed before each kernel (cache_control='all', as ncu --cache-control all); "
        "clocks: not locked (as ncu --clock-control none)")
    call = build("fn", "call", SOL, INFOS, [("fn", sol_values(1e6, 50.0, 20.0, 10.0))], None,
                 passes=9, replay="user", range_mode="user", calls=10, cost_s=1.0, setup_s=0.0,
                 chip="GH100", sets=["sol"], notes=[], counter_data_bytes=1, cache_control="none")
    assert call.state().startswith("caches: not flushed (cache_control='none', as ncu "
                                   "--cache-control none); clocks: not locked")
    assert "the one range (exact)" in str(call)
    assert "caches: L2 flushed before each kernel" in per_kernel._repr_html_()


def roofline_result(ffma=1.0e9, tensor_ops=0.0, dram=1.0e6, duration_ns=1.0e6):
    names = [DURATION, DRAM_READ, DRAM_WRITE] + [m for g in FLOP_COUNTERS.values() for m in g] + list(TENSOR_OPS)
    values = {m: 0.0 for m in names}
    values.update({DURATION: duration_ns, DRAM_READ: dram / 2, DRAM_WRITE: dram / 2,
                   "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": ffma,
                   "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 10.0,
                   "sm__ops_path_tensor_src_fp16.sum": tensor_ops})
    infos = _catalog.validate(names, "GH100")
    return build("k", "call", names, infos, [("k", tuple(values[m] for m in names))], None, passes=7,
                 replay="user", range_mode="user", calls=8, cost_s=0.1, setup_s=0.0, chip="GH100",
                 sets=["roofline"], notes=[], counter_data_bytes=0)


CEIL = Ceilings("uuid", "H100", dram_bytes_per_s=3e12, fp32_flops_per_s=60e12,
                tensor_flops_per_s=600e12, measured_at="now", method="test")


def test_flops_and_roofline():
    r = roofline_result()
    f = r.flops()
    assert f["fp32"] == 2.0e9 + 10.0 and f["tensor"] == 0.0 and f["total"] == f["fp32"]
    p = r.roofline(CEIL)
    assert p.peak_flops_per_s == 60e12 and p.region == "compute"
    assert p.seconds == pytest.approx(1e-3)
    t = roofline_result(ffma=0.0, tensor_ops=1e12).roofline(CEIL)
    assert t.peak_flops_per_s == 600e12


def test_flops_need_the_roofline_set():
    with pytest.raises(KeyError, match="roofline"):
        per_kernel_result().flops()


def test_ceilings_render():
    assert "DRAM bandwidth" in repr(CEIL) and "<table>" in CEIL._repr_html_()
    assert CEIL.to_dict()["fp32_flops_per_s"] == 60e12


def test_plot_roofline(tmp_path):
    pytest.importorskip("matplotlib")
    from gpuprofile.counters.roofline import plot_roofline

    path = tmp_path / "roofline.png"
    fig = plot_roofline([roofline_result(), roofline_result(ffma=1e6, dram=1e9)], ceilings=CEIL,
                        path=str(path))
    assert path.stat().st_size > 1000
    assert len(fig.axes[0].lines) == 2


REASONS = ["smsp__pcsamp_sample_count", "smsp__pcsamp_warps_issue_stalled_long_scoreboard",
           "smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued",
           "smsp__pcsamp_warps_issue_stalled_selected", "smsp__pcsamp_warps_issue_stalled_wait"]


def test_parse_reason():
    assert parse_reason(REASONS[1]) == ("long_scoreboard", False)
    assert parse_reason(REASONS[2]) == ("long_scoreboard", True)
    assert parse_reason(REASONS[0]) is None


def test_stall_breakdown_normalises_by_reason_samples():
    pcs = {
        (7, 0, 0x10): ["_Z5chasev", [500, 90, 90, 5, 5]],
        (7, 0, 0x20): ["_Z5chasev", [100, 8, 8, 2, 0]],
        (7, 1, 0x00): ["_Z3fmav", [40, 0, 0, 30, 10]],
    }
    lines = {(7, "_Z5chasev", 0x10): ("chase.cu", "/src", 12), (7, "_Z5chasev", 0x20): ("chase.cu", "/src", 12)}
    kernels = breakdown(REASONS, pcs, lambda crc, fn, off: lines.get((crc, fn, off)))
    chase, fma = kernels
    assert chase.name == "chase()" and chase.samples == 110  # 98 + 7 + 5, sample_count ignored
    assert chase.counts == {"long_scoreboard": 98, "selected": 7, "wait": 5}
    assert chase.not_issued == {"long_scoreboard": 98}
    assert chase.shares["long_scoreboard"] == pytest.approx(98 / 110)
    assert chase.top(1)[0][0] == "long_scoreboard"
    assert [(ln.file, ln.line, ln.samples) for ln in chase.lines] == [("chase.cu", 12, 110)]
    assert fma.name == "fma()" and fma.lines == [] and fma.shares == {"selected": 0.75, "wait": 0.25}
    report = StallReport(kernels, {"total_samples": 1}, None, ["a note"])
    assert report["chase"].samples == 110
    assert "long_scoreboard 89.1 %" in str(report) and "note: a note" in str(report)
    assert json.loads(json.dumps(report.to_dict()))["kernels"][0]["counts"]["wait"] == 5
    with pytest.raises(KeyError):
        report["nope"]


def test_sample_result():
    metrics = ["sm__cycles_active.avg.pct_of_peak_sustained_elapsed", "x__y.sum"]
    fields = {m: field_name(m) for m in metrics}
    assert fields == {metrics[0]: "sm_active_pct", "x__y.sum": "x__y_sum"}
    arr = np.zeros(3, dtype=[("start_ns", "<u8"), ("end_ns", "<u8"), ("sm_active_pct", "<f8"), ("x__y_sum", "<f8")])
    arr["start_ns"] = [1000, 21000, 41000]
    arr["end_ns"] = [21000, 41000, 61000]
    arr["sm_active_pct"] = [10.0, 20.0, 90.0]
    r = SampleResult(arr, metrics, fields, 20000, {"overflow": False})
    assert len(r) == 3 and r.arrays()["sm_active_pct"][2] == 90.0
    assert "3 x 20 µs over 0.06 ms" in str(r)
    assert json.loads(json.dumps(r.to_dict()))["samples"]["start_ns"] == [1000, 21000, 41000]
    assert "<table>" in r._repr_html_()
