"""Device-memory timeline and region peaks on synthetic records; gpuprofile.memory on a machine
without a GPU."""

import sys
import types
import warnings

import numpy as np
import pytest
import synthetic as S

import gpuprofile as gp
from gpuprofile.tracing.activity import MEMORY_RAW
from gpuprofile.tracing.memory import (
    build_timeline,
    peaks_in_windows,
    region_memory,
    torch_memory_stats,
)

MiB = 1 << 20


def _timeline():
    raw = S.memory_events([
        (300, "alloc", 256 * MiB, 0x1000),
        (100, "alloc", 8 * MiB, 0x2000),   # out of order: the timeline sorts
        (500, "free", 0, 0x1000),          # size not reported: taken from the allocation
        (600, "free", 4 * MiB, 0x9000),    # allocated before tracking started
        (700, "alloc", 2 * MiB, 0x3000),
    ])
    raw["memory_kind"][4] = 2  # pinned host memory: in the timeline, not in device bytes
    return build_timeline(raw)


def test_timeline_exact():
    t = _timeline()
    assert t["timestamp_ns"].tolist() == [100, 300, 500, 600, 700]
    assert t["op"].tolist() == ["alloc", "alloc", "free", "free", "alloc"]
    assert t["kind"].tolist() == ["device", "device", "device", "device", "pinned"]
    assert t["bytes"].tolist() == [8 * MiB, 256 * MiB, 256 * MiB, 4 * MiB, 2 * MiB]
    assert t["delta"].tolist() == [8 * MiB, 256 * MiB, -256 * MiB, -4 * MiB, 2 * MiB]
    assert t["bytes_in_use"].tolist() == [8 * MiB, 264 * MiB, 8 * MiB, 4 * MiB, 4 * MiB]
    assert t["region"].tolist() == [""] * 5


def test_timeline_per_device():
    raw = S.memory_events([(1, "alloc", 10, 1), (2, "alloc", 20, 2), (3, "free", 10, 1)])
    raw["device"][1] = 1
    t = build_timeline(raw)
    assert t["bytes_in_use"].tolist() == [10, 20, 0]
    assert len(build_timeline(np.zeros(0, MEMORY_RAW))) == 0


def test_peaks_in_windows():
    t = _timeline()
    got = peaks_in_windows(t, [0, 0, 0, 0], [0, 200, 400, 800], [1000, 350, 450, 900])
    # whole run; a window with the 256 MiB allocation; one with no event; one after everything
    assert got == [(0, 264 * MiB), (8 * MiB, 264 * MiB), (264 * MiB, 264 * MiB), (4 * MiB, 4 * MiB)]


def test_region_memory_rows():
    t = _timeline()
    off = 50  # the timeline's clock minus the host clock
    recs = S.region_records([
        ("fwd", -1, 250 - off, 550 - off, True),
        ("fwd", -1, 650 - off, 750 - off, True),
        ("plain", -1, 0, 1000, False),
    ])
    rows = region_memory(t, recs, off)
    assert rows == [dict(region="fwd", instances=2, peak_bytes=264 * MiB,
                         peak_above_entry_bytes=256 * MiB, allocations=1,
                         allocated_bytes=256 * MiB)]
    assert region_memory(t, recs, off, window=(10_000, 20_000)) == []
    assert region_memory(t, None, off) == []


def test_region_memory_keyword_without_a_gpu_is_harmless():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with gp.region("m", memory=True):
            pass
    r = gp.records()
    assert r["memory"].tolist() == [True]
    assert "memory=True" in repr(gp.region("m", memory=True))
    with pytest.raises(TypeError, match="positional"):
        gp.region("m", None, True, True)


@pytest.mark.skipif(gp.device_count() > 0, reason="checks the no-device behaviour")
def test_memory_calls_without_a_gpu():
    with pytest.raises(gp.NoDeviceError):
        gp.memory.info()
    with pytest.raises((gp.NoDeviceError, gp.CuptiError)), gp.memory.track():
        pass
    assert gp.memory.region_peaks() == []


def test_torch_stats_absent_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert torch_memory_stats() is None
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(
        is_initialized=lambda: True,
        memory_stats=lambda: {"allocated_bytes.all.current": 5, "reserved_bytes.all.peak": 9}))
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert torch_memory_stats() == {"allocated_bytes": 5, "peak_allocated_bytes": 0,
                                    "reserved_bytes": 0, "peak_reserved_bytes": 9,
                                    "alloc_retries": 0}


def test_track_result_presentation():
    t = gp.memory.MemoryTrack(peak_bytes=3 * MiB, allocations=2, timeline=_timeline())
    assert "peak MiB" in repr(t) and "<table>" in t._repr_html_()
    d = t.to_dict()
    assert d["peak_bytes"] == 3 * MiB and len(d["timeline"]) == 5
    assert d["timeline"][0]["op"] == "alloc"


def test_reset_keeps_only_live_allocations_of_the_region_log(monkeypatch):
    """The MEMORY2 log kept for memory=True regions shrinks at reset() to what is still allocated
    (found by a device leak test: it grew with every collection for the life of the process)."""
    from gpuprofile.tracing import activity

    raw = S.memory_events([(30, "alloc", 8, 0xB0), (10, "alloc", 4, 0xA0), (20, "free", 0, 0xA0),
                           (40, "alloc", 2, 0xC0), (50, "free", 0, 0xB0)])
    live = activity.live_allocations(raw)
    assert live["address"].tolist() == [0xC0] and live["bytes"].tolist() == [2]
    again = activity.live_allocations(S.memory_events([(5, "alloc", 4, 0xA0), (6, "free", 0, 0xA0),
                                                       (7, "alloc", 4, 0xA0)]))
    assert again["timestamp"].tolist() == [7]  # an address reused after its free
    log = [raw[:2], raw[2:]]
    monkeypatch.setattr(activity, "_region_log", log)
    gp.reset()
    assert len(log) == 1 and log[0]["address"].tolist() == [0xC0]
    monkeypatch.setattr(activity, "_region_log", [S.memory_events([(1, "alloc", 4, 0xA0),
                                                                  (2, "free", 0, 0xA0)])])
    gp.reset()
    assert activity._region_log == []
