"""The attribution rules on synthetic records (gpuprofile._attribution), short kernel names in
tables, and the guard that keeps gpuprofile from taking CUPTI over from a recording torch.profiler."""

import sys
import types

import numpy as np
import pytest

import gpuprofile as gp
from gpuprofile import _activity, _attribution, _foreign
from gpuprofile._format import Label, html_table, short_name, text_table
from gpuprofile.pytest_plugin import summary_lines


def _ext(pairs):
    e = np.zeros(len(pairs), _activity.EXTCORR_RAW)
    for k, (corr, rec) in enumerate(pairs):
        e[k] = (rec + 1, corr, 0)
    return e


def _events(rows):
    """rows: (correlation id, timestamp, stream)."""
    v = np.zeros(len(rows), _activity.EVENT_RAW)
    for k, (corr, ts, stream) in enumerate(rows):
        v[k]["correlation_id"], v[k]["timestamp"], v[k]["stream"] = corr, ts, stream
    return v


def test_intervals_from_the_first_and_last_event_of_each_region():
    # region 0: events 10 (t=100) and 40 (t=900); region 1 nested: 20 (t=200), 30 (t=300);
    # a torch event inside region 0 (corr 25) on another stream does not move its bounds
    ext = _ext([(10, 0), (40, 0), (25, 0), (20, 1), (30, 1)])
    ev = _events([(40, 900, 7), (20, 200, 7), (10, 100, 7), (30, 300, 7), (25, 950, 9)])
    iv = _attribution.region_intervals(ev, ext, 0, 10_000)
    assert iv["record"].tolist() == [0, 1]
    assert iv["start"].tolist() == [100, 200] and iv["end"].tolist() == [900, 300]
    # the first and last by correlation id are the region's own: corr 25 < 40
    ev2 = _events([(10, 100, 7), (25, 950, 9), (40, 900, 7)])
    iv2 = _attribution.region_intervals(ev2, _ext([(10, 0), (25, 0), (40, 0)]), 0, 10_000)
    assert iv2["start"].tolist() == [100] and iv2["end"].tolist() == [900]
    assert iv2["stream"].tolist() == [7]


def test_a_single_event_is_a_start_or_a_stop():
    ext = _ext([(10, 0), (20, 1)])
    ev = _events([(10, 500, 7), (20, 600, 7)])
    iv = _attribution.region_intervals(ev, ext, 50, 5000, began_before=lambda r: r == 0)
    assert iv["start"].tolist() == [50, 600] and iv["end"].tolist() == [500, 5000]


def test_events_without_timestamps_or_region_are_ignored():
    ext = _ext([(10, 0)])
    ev = _events([(10, 0, 7), (11, 500, 7)])
    iv = _attribution.region_intervals(ev, ext, 0, 1000)
    assert len(iv["record"]) == 0
    assert len(_attribution.region_intervals(_events([]), ext, 0, 1)["record"]) == 0


def test_launch_rule_first_then_innermost_interval_on_the_same_stream():
    iv = {"record": np.array([0, 1, 2]), "device": np.array([0, 0, 0]),
          "stream": np.array([7, 7, 9]), "start": np.array([100, 200, 100]),
          "end": np.array([1000, 400, 1000])}
    # rows: in 1 (nested in 0); in 0 only; straddling 1's end (-> 0); on stream 9 (-> 2);
    # stream 8 (none); device 1 (none); already attributed by launch to record 5
    device = np.array([0, 0, 0, 0, 0, 1, 0])
    stream = np.array([7, 7, 7, 9, 8, 7, 7])
    start = np.array([210, 500, 350, 150, 150, 150, 150])
    end = np.array([390, 600, 450, 160, 160, 160, 160])
    launch = np.array([-1, -1, -1, -1, -1, -1, 5])
    rec, rule = _attribution.combine(launch, device, stream, start, end, iv, depth=np.array([0, 1, 0, 0, 0, 0]))
    assert rec.tolist() == [1, 0, 0, 2, -1, -1, 5]
    assert _attribution.RULES[rule].tolist() == ["stream", "stream", "stream", "stream", "", "", "launch"]


def test_equal_starts_go_to_the_deeper_region():
    iv = {"record": np.array([3, 4]), "device": np.array([0, 0]), "stream": np.array([7, 7]),
          "start": np.array([100, 100]), "end": np.array([500, 500])}
    for depth in (np.array([0, 0, 0, 1, 2]), np.array([0, 0, 0, 2, 1])):
        rec, _ = _attribution.combine([-1], [0], [7], [200], [300], iv, depth)
        assert rec.tolist() == [3 + int(depth[4] > depth[3])]


def test_profile_attributes_synthetic_work_of_another_thread():
    # a kernel launched on the region's thread (external id) and one launched elsewhere that ran
    # inside the region's interval on its stream
    k = np.zeros(2, _activity.KERNEL_RAW)
    k["correlation_id"] = [5, 50]
    k["start"], k["end"] = [150, 300], [200, 350]
    k["stream"] = 7
    chunk = _activity.Chunk(k, np.empty(0, _activity.MEMCPY_RAW), np.empty(0, _activity.MEMSET_RAW),
                            np.empty(0, _activity.MEMORY_RAW), _ext([(5, 0), (1, 0), (9, 0)]),
                            names=["k"], events=_events([(1, 100, 7), (9, 400, 7)]))
    w = _activity.Window(t0=0, t1=1000, offset_ns=0, offset_uncertainty_ns=0, chunk=chunk)
    recs = np.zeros(1, [("name", object), ("depth", "<i4"), ("host_start_ns", "<i8")])
    recs["name"] = "step"
    from gpuprofile.profiling import Profile

    p = Profile._from_window(w, records=recs)
    assert p.kernels["region"].tolist() == ["step", "step"]
    assert p.kernels["attribution"].tolist() == ["launch", "stream"]
    assert len(p.memcpy) == 0 and p.memcpy.dtype.names[-2] == "attribution"


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
    assert lines[-1] == "[1] CUPTI timing unavailable, CUDA events used: busy"


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
