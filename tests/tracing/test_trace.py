"""The Chrome-trace writer on synthetic records: valid JSON, the required fields, times moved
into one clock, gzip, errors, and speed."""

import gzip
import json
import os
import time

import numpy as np
import pytest
import synthetic as S

from gpuprofile.tracing.chrome_trace import GPU_PID_BASE, _int_digits, gpu_region_spans, x_events
from gpuprofile.tracing.profile import Profile


def _trace(tmp_path, p, name="t.json", **kw):
    path = str(tmp_path / name)
    assert p.export_chrome_trace(path, **kw) == path
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def _sample(memory=True):
    recs = S.region_records([
        ("step", -1, S.T0 - S.OFFSET + 100, S.T0 - S.OFFSET + 9000, False),
        ("attn", 0, S.T0 - S.OFFSET + 200, S.T0 - S.OFFSET + 3000, True),
        ("before", -1, S.T0 - S.OFFSET - 10**6, S.T0 - S.OFFSET - 10**5, False),  # not in window
    ])
    k, ext = S.kernels(6, regions=[1, 1, 0, 0, -1, -1])
    mem = S.memory_events([(S.T0 + 1500, "alloc", 1 << 20, 0xA0), (S.T0 + 4000, "free", 0, 0xA0)])
    w = S.window(k, ext, memory=mem if memory else None)
    return Profile._from_window(w, recs, S.LIMITS)


def _by_ph(trace, ph):
    return [e for e in trace["traceEvents"] if e["ph"] == ph]


def test_trace_is_valid_json_with_required_fields(tmp_path):
    trace = _trace(tmp_path, _sample())
    events = trace["traceEvents"]
    assert trace["displayTimeUnit"] == "ns"
    for e in events:
        assert {"ph", "name", "pid"} <= e.keys()
        if e["ph"] == "X":
            assert {"ts", "dur", "tid"} <= e.keys() and e["ts"] >= 0 and e["dur"] >= 0
    kernels = [e for e in _by_ph(trace, "X") if e["cat"] == "kernel"]
    assert len(kernels) == 6
    k0 = next(e for e in kernels if e["ts"] == 1.0)  # first kernel: CUPTI T0 + 1000 ns
    assert k0["name"] == "kernel_0(float*)" and k0["pid"] == GPU_PID_BASE and k0["tid"] == 7
    assert k0["dur"] == 1.0
    assert k0["args"] == {"grid": [128, 1, 1], "block": [256, 1, 1], "regs": 32,
                          "smem": [4096, 0], "occ": 100.0, "region": "attn"}
    assert trace["otherData"]["clock_offset_ns"] == S.OFFSET


def test_tracks_are_named(tmp_path):
    trace = _trace(tmp_path, _sample())
    meta = {(e["name"], e["pid"], e.get("tid")): e["args"] for e in _by_ph(trace, "M")}
    pid = os.getpid()
    assert meta[("process_name", pid, None)]["name"] == f"Host (pid {pid})"
    assert meta[("process_name", GPU_PID_BASE, None)]["name"] == "GPU 0"
    assert meta[("thread_name", GPU_PID_BASE, 7)]["name"] == "stream 7"
    assert meta[("thread_name", GPU_PID_BASE, 8)]["name"] == "stream 8"
    assert "(4242)" in meta[("thread_name", pid, 4242)]["name"]


def test_host_regions_move_to_the_gpu_clock(tmp_path):
    trace = _trace(tmp_path, _sample())
    host = {e["name"]: e for e in _by_ph(trace, "X") if e["cat"] == "region"}
    assert set(host) == {"step", "attn"}  # 'before' ended before the profile started
    # time zero is the profile's start (CUPTI T0): 'step' starts 100 ns later on the host
    assert host["step"]["ts"] == 0.1 and host["step"]["dur"] == 8.9
    assert host["attn"]["ts"] == 0.2 and host["attn"]["dur"] == 2.8
    assert host["step"]["tid"] == 4242 and host["step"]["pid"] == os.getpid()


def test_timestamps_per_track_do_not_overlap_and_stay_in_the_trace(tmp_path):
    trace = _trace(tmp_path, _sample())
    tracks = {}
    for e in _by_ph(trace, "X"):
        if e["cat"] == "kernel":
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in tracks.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))  # a stream runs one at a time


def test_gpu_region_spans_include_children(tmp_path):
    trace = _trace(tmp_path, _sample())
    spans = {}
    for e in trace["traceEvents"]:
        if e["ph"] in "be":
            spans.setdefault(e["name"], {})[e["ph"]] = e["ts"]
    # attn (record 1): kernels 0 and 1 at [T0+1000, T0+2000); step adds kernels 2, 3 at
    # [T0+2500, T0+3500); time zero is T0
    assert spans["attn"] == {"b": 1.0, "e": 2.0}
    assert spans["step"] == {"b": 1.0, "e": 3.5}


def test_gpu_region_spans_function():
    p = _sample()
    rec, dev, start, end = gpu_region_spans(p.kernels, p._records)
    assert rec.tolist() == [0, 1] and dev.tolist() == [0, 0]
    assert (start - S.T0).tolist() == [1000, 1000] and (end - S.T0).tolist() == [3500, 2000]


def test_memory_counter_track(tmp_path):
    trace = _trace(tmp_path, _sample())
    counters = _by_ph(trace, "C")
    assert [c["args"]["bytes"] for c in counters] == [1 << 20, 0]
    assert counters[0]["ts"] == 1.5 and counters[0]["pid"] == GPU_PID_BASE


def test_gzip_and_details_off(tmp_path):
    p = _sample()
    plain = _trace(tmp_path, p)
    packed = _trace(tmp_path, p, name="t.json.gz")
    assert plain == packed
    with open(tmp_path / "t.json.gz", "rb") as f:
        assert f.read(2) == b"\x1f\x8b"
    brief = _trace(tmp_path, p, name="brief.json", details=False)
    k = next(e for e in _by_ph(brief, "X") if e["cat"] == "kernel" and e["ts"] == 1.0)
    assert k["args"] == {"region": "attn"}
    assert os.path.getsize(tmp_path / "brief.json") < os.path.getsize(tmp_path / "t.json")


def test_unwritable_path_is_a_clear_error_and_leaves_nothing(tmp_path):
    p = _sample()
    with pytest.raises(OSError, match="cannot write the Chrome trace"):
        p.export_chrome_trace(str(tmp_path / "missing-dir" / "t.json"))
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as root: directory permissions are not enforced")
        with pytest.raises(PermissionError, match="cannot write the Chrome trace"):
            p.export_chrome_trace(str(locked / "t.json"))
    finally:
        locked.chmod(0o700)
    assert os.listdir(locked) == []


def test_fixed_width_numbers():
    assert _int_digits(np.array([0, 7, 123, 40])).tobytes() == b"  0  7123 40"
    out = x_events('"name":"k",', [1234567, 0], [5, 1000])
    assert out == (b'{"ph":"X","name":"k","ts":1234.567,"dur":0.005},\n'
                   b'{"ph":"X","name":"k","ts":   0.000,"dur":1.000},\n')
    assert x_events('"name":"k",', [], []) == b""


def test_special_characters_in_names_are_escaped(tmp_path):
    recs = S.region_records([('say "hi"\n\\', -1, S.T0 - S.OFFSET, S.T0 - S.OFFSET + 10**6, False)])
    k, ext = S.kernels(2, regions=[0, 0])
    p = Profile._from_window(S.window(k, ext, names=['op<"x">\t', "b", "c"]), recs, S.LIMITS)
    trace = _trace(tmp_path, p)
    names = {e["name"] for e in _by_ph(trace, "X")}
    assert 'op<"x">\t' in names and 'say "hi"\n\\' in names


def test_export_of_200k_kernels_is_fast(tmp_path):
    n = 200_000
    k, ext = S.kernels(n, names=50, streams=4, regions=np.arange(n) % 3 - 1)
    recs = S.region_records([("a", -1, 0, 2 * 10**9, False), ("b", 0, 0, 2 * 10**9, False)])
    p = Profile._from_window(S.window(k, ext, names=[f"k{j}" for j in range(50)]), recs, S.LIMITS)
    t = time.perf_counter()
    p.export_chrome_trace(str(tmp_path / "big.json"))
    elapsed = time.perf_counter() - t
    # ~0.2 s on a shared 2-core VM; the 1M-kernel figure comes from benchmarks/bench_tracing.py
    assert elapsed < 10
    with open(tmp_path / "big.json") as f:
        assert sum(1 for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel") == n


def test_pm_samples_become_counter_tracks_of_their_gpu(tmp_path):
    from gpuprofile.counters.sample import SampleResult

    rows = np.zeros(3, [("start_ns", "<u8"), ("end_ns", "<u8"), ("sm_active", "<f8"), ("dram", "<f8")])
    rows["start_ns"] = [S.T0 + 1000, S.T0 + 21000, S.T0 + 41000]
    rows["end_ns"] = rows["start_ns"] + 20000
    rows["sm_active"], rows["dram"] = [10.0, 95.5, 0.0], [1.5, 80.0, 0.25]
    metric = {"sm__cycles_active.avg.pct_of_peak_sustained_elapsed": "sm_active",
              "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram"}
    s = SampleResult(rows, list(metric), metric, 20000, {"device": 1})
    trace = _trace(tmp_path, _sample(), samples=[s])
    counters = [e for e in _by_ph(trace, "C") if e["name"] == "PM sampling"]
    assert [e["args"] for e in counters] == [{"sm_active": 10.0, "dram": 1.5},
                                              {"sm_active": 95.5, "dram": 80.0},
                                              {"sm_active": 0.0, "dram": 0.25}]
    assert {e["pid"] for e in counters} == {GPU_PID_BASE + 1}
    ts = [e["ts"] for e in counters]
    assert ts == sorted(ts) and ts[1] - ts[0] == pytest.approx(20.0)  # µs, 20 µs apart
