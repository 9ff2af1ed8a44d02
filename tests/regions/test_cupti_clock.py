"""The CUPTI region clock's C half (csrc/regions/cupti_clock.c) and how records(), stats() and
report() show a region's GPU clock. The GPU half is in tests/tracing/test_region_clock_gpu.py."""

import math

import numpy as np
import pytest

import gpuprofile as gp
from gpuprofile import regions as _regions

C = gp._C


@pytest.fixture
def clock_off():
    yield
    C._regions_set_cupti_clock(False)


def _fill(generation, records=(), ms=()):
    return C._regions_fill_cupti(generation, np.asarray(records, np.int64),
                                 np.asarray(ms, np.float64))


def test_switch_returns_the_store_generation(clock_off):
    g = C._regions_set_cupti_clock(False)
    gp.reset()
    assert C._regions_set_cupti_clock(True) == g + 1
    assert C._regions_set_cupti_clock(False) == g + 1


def test_switch_takes_truth_like_any_flag_and_passes_its_error_on(clock_off):
    class Bad:
        def __bool__(self):
            raise RuntimeError("no truth")

    with pytest.raises(RuntimeError, match="no truth"):
        C._regions_set_cupti_clock(Bad())
    C._regions_set_cupti_clock([1])  # truthy
    with pytest.raises(gp.GpuProfileError, match="still on"):
        _fill(C._regions_set_cupti_clock(True))


@pytest.mark.parametrize("records, ms, error, match", [
    ([0], [1.0, 2.0], ValueError, "1 records but 2 times"),
    ([0], [-1.0], ValueError, "not a finite, non-negative time"),
    ([0], [math.inf], ValueError, "is inf ms"),
    ([5], [1.0], ValueError, r"record 5 out of range \(1 records\)"),
    ([-1], [1.0], ValueError, "record -1 out of range"),
])
def test_fill_refuses_bad_input_naming_it(records, ms, error, match, clock_off):
    gp.reset()
    with gp.region("r"):
        pass
    g = C._regions_set_cupti_clock(False)
    with pytest.raises(error, match=match):
        _fill(g, records, ms)


def test_fill_refuses_columns_of_the_wrong_type():
    g = C._regions_set_cupti_clock(False)
    with pytest.raises(TypeError, match="records must be a 1-D array of int64, got format 'i'"):
        C._regions_fill_cupti(g, np.zeros(1, np.int32), np.zeros(1))
    with pytest.raises(TypeError, match="ms must be a 1-D array of float64"):
        C._regions_fill_cupti(g, np.zeros(1, np.int64), np.zeros(1, np.float32))
    with pytest.raises(TypeError, match="ms must be a 1-D array"):
        C._regions_fill_cupti(g, np.zeros(1, np.int64), np.zeros((1, 1)))
    with pytest.raises(TypeError):
        C._regions_fill_cupti(g, [0], [1.0])  # no buffer
    with pytest.raises(TypeError, match=r"_regions_fill_cupti\(generation, records, ms, rest_"):
        C._regions_fill_cupti(g, np.zeros(1, np.int64))

    class Bad:
        def __bool__(self):
            raise RuntimeError("no truth")

    with pytest.raises(RuntimeError, match="no truth"):
        C._regions_fill_cupti(g, np.zeros(0, np.int64), np.zeros(0), Bad())
    with pytest.raises(OverflowError):
        C._regions_fill_cupti(-1, np.zeros(0, np.int64), np.zeros(0))


def test_fill_touches_only_cupti_records_of_its_generation(clock_off):
    """Records timed otherwise (here: the host clock, no device) are not the fill's, and after a
    reset() the records it was computed for are gone: nothing happens."""
    gp.reset()
    with gp.region("r"):
        pass
    before = gp.records()
    g = C._regions_set_cupti_clock(False)
    assert _fill(g, [0], [3.0]) == 0
    assert _fill(g + 1, [99], [-5.0]) == 0  # another generation: not even checked
    after = gp.records()
    assert after["host_ms"].tolist() == before["host_ms"].tolist()
    assert np.isnan(after["gpu_ms"]).all() and not after["failed"].any()


@pytest.mark.skipif(gp.device_count() > 0, reason="the host clock is used only without a device")
def test_without_a_device_regions_keep_the_host_clock_with_the_switch_on(clock_off):
    gp.reset()
    C._regions_set_cupti_clock(True)
    with gp.region("r"):
        pass
    C._regions_set_cupti_clock(False)
    rec = gp.records()
    assert rec["clock"].tolist() == ["host"] and rec["gpu_clock"].tolist() == [""]
    s = gp.stats("r")
    assert s.clock == "host" and s.gpu_clock == "" and s.count == 1


def _recs(rows):
    """rows: (gpu_clock, gpu_ms, failed, no_gpu_work) of region 'r' on device 0."""
    r = np.zeros(len(rows), _regions.RECORD_DTYPE)
    r["name"] = "r"
    r["clock"] = "gpu"
    r["host_ms"] = 2.0
    for j, (clock, ms, failed, idle) in enumerate(rows):
        r[j]["gpu_clock"], r[j]["gpu_ms"], r[j]["failed"], r[j]["no_gpu_work"] = (clock, ms,
                                                                                  failed, idle)
    return r


def test_stats_name_the_gpu_clock_and_count_regions_without_gpu_work():
    s = _regions._stats_from("r", _recs([("events", 1.0, False, False),
                                         ("cupti", 3.0, False, False),
                                         ("cupti", np.nan, False, True),
                                         ("cupti", np.nan, True, False)]))
    assert (s.clock, s.gpu_clock, s.count, s.total_ms) == ("gpu", "events+cupti", 2, 4.0)
    assert (s.no_gpu_work, s.failed) == (1, 1)
    assert s.samples_ms.tolist() == [1.0, 3.0]
    assert s.to_dict()["gpu_clock"] == "events+cupti" and s.table_rows()[0]["no_gpu_work"] == 1


def test_a_region_without_gpu_work_has_no_time_not_zero():
    s = _regions._stats_from("r", _recs([("cupti", np.nan, False, True)] * 3))
    assert (s.clock, s.gpu_clock, s.count, s.no_gpu_work) == ("gpu", "cupti", 0, 3)
    assert math.isnan(s.total_ms) and math.isnan(s.mean_ms)
    text = str(s)
    assert "gpu clock" in text and "no GPU work" in text and "cupti" in text


def test_a_region_waiting_for_its_profile_is_no_sample_yet():
    s = _regions._stats_from("r", _recs([("cupti", np.nan, False, False),
                                         ("cupti", 2.5, False, False)]))
    assert (s.clock, s.gpu_clock, s.count, s.total_ms) == ("gpu", "cupti", 1, 2.5)


def test_events_regions_read_as_before():
    s = _regions._stats_from("r", _recs([("events", 1.0, False, False),
                                         ("events", 2.0, False, False)]))
    assert (s.clock, s.gpu_clock, s.count, s.total_ms, s.no_gpu_work) == ("gpu", "events", 2,
                                                                          3.0, 0)
    failed = _regions._stats_from("r", _recs([("events", np.nan, True, False)]))
    assert (failed.clock, failed.count, failed.total_ms) == ("host", 0, 0.0)  # as before
