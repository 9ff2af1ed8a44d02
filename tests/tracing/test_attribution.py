"""The attribution rules on synthetic records (gpuprofile.tracing.attribution), short kernel names in
tables, and the guard that keeps gpuprofile from taking CUPTI over from a recording torch.profiler."""

import sys
import types

import numpy as np
import pytest

import gpuprofile as gp
from gpuprofile import _foreign
from gpuprofile._format import Label, html_table, short_name, text_table
from gpuprofile.pytest_plugin import summary_lines
from gpuprofile.tracing import activity as _activity
from gpuprofile.tracing import attribution as _attribution


def _ext(pairs):
    e = np.zeros(len(pairs), _activity.EXTCORR_RAW)
    for k, (corr, rec) in enumerate(pairs):
        e[k]["external_id"], e[k]["correlation_id"] = rec + 1, corr
    return e


def _streams(rows):
    """rows: (record, stream) or (record, stream, before) on device 0."""
    v = np.zeros(len(rows), _activity.REGION_STREAM_RAW)
    for k, row in enumerate(rows):
        v[k]["record"], v[k]["stream"] = row[0], row[1]
        v[k]["before"] = row[2] if len(row) > 2 else 0
    return v


def test_intervals_from_the_first_and_last_call_of_each_region():
    # region 0 records its events with calls 10 and 40 and launches 25 inside; region 1 is nested
    # (calls 20 and 30); extcorr rows come in any order
    ext = _ext([(40, 0), (20, 1), (10, 0), (30, 1), (25, 0)])
    iv = _attribution.region_intervals(_streams([(1, 7), (0, 7)]), ext)
    assert iv["record"].tolist() == [0, 1] and iv["stream"].tolist() == [7, 7]
    assert iv["start"].tolist() == [10, 20] and iv["end"].tolist() == [40, 30]
    assert iv["device"].tolist() == [0, 0]


def test_regions_open_when_tracing_started_or_stopped():
    # region 0 was open before tracing (its start call is not traced); region 1 was still open
    # when tracing stopped (its stop call is not traced)
    ext = _ext([(15, 0), (40, 0), (50, 1), (60, 1)])
    iv = _attribution.region_intervals(_streams([(0, 7, 1), (1, 7)]), ext,
                                       ended_after=lambda r: r == 1)
    assert iv["start"].tolist() == [0, 50] and iv["end"].tolist() == [40, _attribution.END]
    # open across the whole trace and silent in it: everything on its stream
    iv = _attribution.region_intervals(_streams([(2, 7, 1)]), _ext([]), ended_after=lambda r: r >= 0)
    assert iv["start"].tolist() == [0] and iv["end"].tolist() == [_attribution.END]


def test_unnamed_streams_and_regions_without_calls_are_ignored():
    ext = _ext([(10, 0), (20, 0)])
    assert len(_attribution.region_intervals(_streams([(0, _attribution.NO_STREAM)]), ext)["record"]) == 0
    assert len(_attribution.region_intervals(_streams([(3, 7)]), ext)["record"]) == 0
    assert len(_attribution.region_intervals(_streams([]), ext)["record"]) == 0
    # a region noted twice (entered once) keeps one interval
    assert _attribution.region_intervals(_streams([(0, 7), (0, 7)]), ext)["record"].tolist() == [0]


def test_launch_rule_first_then_innermost_region_on_the_same_stream():
    iv = {"record": np.array([0, 1, 2]), "device": np.array([0, 0, 0]),
          "stream": np.array([7, 7, 9]), "start": np.array([100, 200, 100]),
          "end": np.array([1000, 400, 1000])}
    # rows: inside 1 (nested in 0); inside 0 only; after 1's stop (-> 0); on stream 9 (-> 2);
    # stream 8 (none); device 1 (none); already attributed by launch to record 5; the region's
    # own start call (none: strictly between); after 0's stop (none)
    device = np.array([0, 0, 0, 0, 0, 1, 0, 0, 0])
    stream = np.array([7, 7, 7, 9, 8, 7, 7, 7, 7])
    corr = np.array([210, 500, 450, 150, 150, 150, 150, 100, 1001])
    launch = np.array([-1, -1, -1, -1, -1, -1, 5, -1, -1])
    rec, rule = _attribution.combine(launch, device, stream, corr, iv, depth=np.array([0, 1, 0, 0, 0, 0]))
    assert rec.tolist() == [1, 0, 0, 2, -1, -1, 5, -1, -1]
    assert _attribution.RULES[rule].tolist() == ["stream", "stream", "stream", "stream", "", "", "launch", "", ""]


def test_equal_starts_go_to_the_deeper_region():
    iv = {"record": np.array([3, 4]), "device": np.array([0, 0]), "stream": np.array([7, 7]),
          "start": np.array([0, 0]), "end": np.array([500, 500])}
    for depth in (np.array([0, 0, 0, 1, 2]), np.array([0, 0, 0, 2, 1])):
        rec, _ = _attribution.combine([-1], [0], [7], [200], iv, depth)
        assert rec.tolist() == [3 + int(depth[4] > depth[3])]


def _synthetic_profile(stream_attribution=True):
    # a kernel launched on the region's thread (external id 1: call 5) and one another thread
    # enqueued on the region's stream (call 50) between the region's event calls 1 and 90
    k = np.zeros(3, _activity.KERNEL_RAW)
    k["correlation_id"] = [5, 50, 95]
    k["start"], k["end"] = [150, 300, 500], [200, 350, 600]
    k["stream"] = 7
    chunk = _activity.Chunk(kernels=k, extcorr=_ext([(5, 0), (1, 0), (90, 0)]), names=["k"],
                            region_streams=_streams([(0, 7)]))
    w = _activity.Window(t0=0, t1=1000, offset_ns=0, offset_uncertainty_ns=0, chunk=chunk)
    recs = np.zeros(1, [("name", object), ("depth", "<i4"), ("host_start_ns", "<i8"),
                        ("host_end_ns", "<i8"), ("open", "u1")])
    recs["name"], recs["host_start_ns"], recs["host_end_ns"] = "step", 10, 900
    from gpuprofile.tracing.profile import Profile

    return Profile._from_window(w, records=recs, stream_attribution=stream_attribution)


def test_profile_attributes_synthetic_work_of_another_thread():
    p = _synthetic_profile()
    assert p.kernels["region"].tolist() == ["step", "step", ""]
    assert p.kernels["attribution"].tolist() == ["launch", "stream", ""]
    assert len(p.memcpy) == 0 and "attribution" in p.memcpy.dtype.names
    off = _synthetic_profile(stream_attribution=False)
    assert off.kernels["attribution"].tolist() == ["launch", "", ""]


@pytest.mark.parametrize("name, short", [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
     "at::native::vectorized_elementwise_kernel<…>"),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false>(float*, "
     "float const*, int)", "(anonymous namespace)::softmax_warp_forward<…>"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t"
     "<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::"
     "{lambda(float, float)#1}>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float>)",
     "at::native::reduce_kernel<…>"),
    ("gp_spin_kernel(unsigned long)", "gp_spin_kernel"),
    ("triton_poi_fused_add_0", "triton_poi_fused_add_0"),
    ("Foo::operator<(int) const", "Foo::operator<"),
    ("", ""),
])
def test_short_names(name, short):
    assert short_name(name) == short


def test_short_names_are_capped_from_the_left():
    name = "ns::" + "x" * 200
    assert short_name(name, 40) == "…" + name[-39:] and len(short_name(name, 40)) == 40


def test_tables_show_short_names_and_html_keeps_the_full_one():
    full = "void ns::kernel<int, float>(int*, float)"
    assert "ns::kernel<…>" in text_table(["kernel", "n"], [[Label(full), 1]])
    assert full not in text_table(["kernel", "n"], [[Label(full), 1]])
    assert f"title='{full}'" in html_table(["kernel", "n"], [[Label(full), 1]]).replace("&lt;", "<").replace("&gt;", ">")


def test_plugin_summary_marks_event_timed_results():
    r = {"median_ms": 0.02, "rel_noise": 0.01, "iterations": 100, "mode": "hot", "clock": "gpu",
         "clock_note": "CUPTI timing unavailable, CUDA events used: busy"}
    ok = dict(r, clock="cupti", clock_note=None)
    lines = summary_lines([{"group": None, "name": "a", "result": r},
                           {"group": None, "name": "b", "result": ok}])
    assert any("gpu [1]" in line for line in lines)
    assert "[1] CUPTI timing unavailable, CUDA events used: busy" in lines


class _FakeProfile:
    def __init__(self, entered, results):
        self.entered, self.kineto_results = entered, results


def test_takeover_guard_sees_a_recording_or_warming_torch_profiler(monkeypatch):
    prof = types.ModuleType("torch.autograd.profiler")
    prof.profile = _FakeProfile
    prof._is_profiler_enabled = False
    monkeypatch.setitem(sys.modules, "torch.autograd.profiler", prof)
    assert not _foreign.torch_profiler_holds_cupti()
    done = _FakeProfile(True, object())  # stopped: has results
    assert not _foreign.torch_profiler_holds_cupti()
    warming = _FakeProfile(True, None)  # prepared (schedule warm-up), not recording yet
    assert _foreign.torch_profiler_holds_cupti() and not _foreign.torch_profiler_active()
    del warming
    prof._is_profiler_enabled = True
    assert _foreign.torch_profiler_holds_cupti() and _foreign.torch_profiler_active()
    del done


def test_subscriber_state_and_guard_registration():
    state = gp._C._subscriber_state()
    assert set(state) == {"subscribed", "users", "takeovers", "last_holder"}
    with pytest.raises(TypeError):
        gp._C._set_foreign_profiler_check(42)
    gp._C._set_foreign_profiler_check(None)
    gp._C._set_foreign_profiler_check(_foreign.torch_profiler_holds_cupti)


def test_regions_enable_the_api_records_of_the_calls_attribution_reads_only():
    """Every CUDA call's API record cost a training step several %; regions now enable, by
    callback id, the calls whose external ids attribution reads (no GPU needed: CUPTI names them)."""
    from gpuprofile import _C

    try:
        ids = _C._activity_api_cbids()
    except _C.CuptiError as e:  # pragma: no cover - CUPTI missing on this machine
        pytest.skip(f"CUPTI not loadable: {e}")
    runtime = {n.split("_v")[0] for n in ids["regions"]["runtime"]}
    driver = set(ids["regions"]["driver"])
    for call in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaGraphLaunch", "cudaMemcpyAsync",
                 "cudaMemsetAsync", "cudaEventRecord", "cudaEventRecordWithFlags", "cudaMalloc",
                 "cudaFree", "cudaMallocAsync"):
        assert call in runtime, call
    for call in ("cuLaunchKernel", "cuLaunchKernelEx", "cuGraphLaunch", "cuMemcpyDtoDAsync_v2",
                 "cuMemsetD32Async", "cuEventRecord", "cuMemAlloc_v2", "cuMemFree_v2"):
        assert call in driver, call
    for call in ("cudaGetDevice", "cudaStreamGetCaptureInfo", "cudaStreamSynchronize", "cudaSetDevice"):
        assert call not in runtime, call
    assert not any(n.startswith(("cuCtxGetCurrent", "cuStreamQuery", "cuDeviceGet")) for n in driver)
    # Python lines' launches are a subset: the two groups share ids, counted per id
    assert {n for n in ids["api"]["runtime"]} <= set(ids["regions"]["runtime"])
    assert set(ids["api"]["driver"]) <= driver


def test_region_spans_count_work_on_other_streams_and_note_the_region():
    """A kernel launched inside the region on another stream (JAX's, a torch side stream) is the
    region's by the launch rule, and its events do not cover it: region_spans() and the summary
    say so, with the CUPTI span over every stream."""
    k = np.zeros(3, _activity.KERNEL_RAW)
    k["correlation_id"] = [5, 50, 95]
    k["start"], k["end"] = [150, 300, 500], [200, 350, 700]
    k["stream"] = [13, 7, 7]  # the region's stream is 7; call 95 is after its stop event
    chunk = _activity.Chunk(kernels=k, extcorr=_ext([(5, 0), (1, 0), (90, 0)]), names=["k"],
                            region_streams=_streams([(0, 7)]))
    w = _activity.Window(t0=0, t1=1000, offset_ns=0, offset_uncertainty_ns=0, chunk=chunk)
    recs = np.zeros(1, [("name", object), ("depth", "<i4"), ("host_start_ns", "<i8"),
                        ("host_end_ns", "<i8"), ("open", "u1"), ("gpu_ms", "<f8")])
    recs["name"], recs["host_start_ns"], recs["host_end_ns"], recs["gpu_ms"] = "mm", 10, 900, 1e-4
    from gpuprofile.tracing.profile import Profile

    p = Profile._from_window(w, records=recs, kernels=True, memcpy=False, memset=False,
                             memory=False)
    spans = p.region_spans()
    assert spans.tolist() == [(0, "mm", 1e-4, 200e-6, 2, 1, 50e-6)]
    assert [n for n in p._other_stream_notes() if "'mm'" in n and "other than its own" in n]
    assert Profile._from_window(w, records=None, kernels=True, memory=False).region_spans()[
        "name"].tolist() == [""]
