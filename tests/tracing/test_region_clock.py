"""The CUPTI region clock on synthetic records (gpuprofile.tracing.region_clock): a region's GPU
time as the span of the traced work attributed to it and to the regions inside it, the bounds
that replace its event records in the stream rule, and what a stopping profile fills in."""

import numpy as np
import pytest
import synthetic as S

import gpuprofile as gp
from gpuprofile.tracing import activity as _activity
from gpuprofile.tracing import attribution as _attribution
from gpuprofile.tracing import region_clock as _clock
from gpuprofile.tracing.profile import Profile


def _records(spec):
    """spec: (name, parent, gpu_clock, open, host_end) per record; host_start 10 ns before."""
    r = S.region_records([(n, p, (e or 20) - 10, e, False) for n, p, _, _, e in spec])
    for j, (_, _, clock, is_open, _) in enumerate(spec):
        r[j]["gpu_clock"] = clock
        r[j]["open"] = is_open
        r[j]["gpu_ms"] = 1.0 if clock == "events" else np.nan
    return r


def test_subtree_span_takes_nested_regions_work_up_through_regions_without_their_own():
    # 0 > 1 > 2 (work only in 2), 0 > 3 (work), 4 alone without work
    recs = _records([("a", -1, "cupti", False, 0), ("b", 0, "cupti", False, 0),
                     ("c", 1, "cupti", False, 0), ("d", 0, "cupti", False, 0),
                     ("e", -1, "cupti", False, 0)])
    lo, hi = _clock.subtree_spans(recs, [2, 3, 2, -1, 9], [500, 100, 700, 1, 1],
                                  [600, 200, 900, 5_000, 5_000])
    assert lo[:4].tolist() == [100, 500, 500, 100] and hi[:4].tolist() == [900, 900, 900, 200]
    assert lo[4] == _clock.NO_START and hi[4] == _clock.NO_END  # -1 and 9 belong to no record


def test_times_to_fill_span_the_work_leave_out_idle_regions_and_fail_cut_ones():
    t1 = 10_000
    recs = _records([("step", -1, "cupti", False, 100), ("fwd", 0, "cupti", False, 90),
                     ("idle", 0, "cupti", False, 95), ("ev", -1, "events", False, 100),
                     ("open", -1, "cupti", True, 0), ("late", -1, "cupti", False, t1 + 1),
                     ("host", -1, "", False, 100)])
    recs[6]["clock"] = "host"
    rec = np.array([1, 1, 0, 3, 4, 1])
    start = np.array([2_000, 1_000, 4_000, 1_000, 5_000, 0])  # the last one is untimed
    end = np.array([2_500, 1_800, 4_100, 9_000, 5_100, 99_000])
    target, ms = _clock.cupti_region_times(recs, rec, start, end, offset_ns=0, trace_end_ns=t1)
    # fwd spans 1000..2500; step takes fwd's work up: 1000..4100; idle has no work (left out:
    # the fill says so); the open and the late one are cut (NaN: failed); events and host
    # records are not the fill's
    assert target.tolist() == [0, 1, 4, 5]
    np.testing.assert_array_equal(ms[:2], [3100 / 1e6, 1500 / 1e6])
    assert np.isnan(ms[2:]).all()
    assert target.dtype == np.int64 and ms.dtype == np.float64


def test_pending_ignores_filled_failed_idle_and_older_records():
    recs = _records([("a", -1, "cupti", False, 10), ("b", -1, "cupti", False, 10),
                     ("c", -1, "cupti", False, 10), ("d", -1, "cupti", False, 10),
                     ("e", -1, "events", False, 10)])
    recs[1]["gpu_ms"] = 0.5
    recs[2]["failed"] = True
    recs[3]["no_gpu_work"] = True
    assert _clock.pending_cupti(recs).tolist() == [True, False, False, False, False]
    old = np.zeros(2, [("gpu_ms", "<f8"), ("failed", "?")])  # records without gpu_clock
    assert _clock.pending_cupti(old).tolist() == [False, False]


def _bounds(rows):
    """rows: (record, stream, edge, bound) on device 0."""
    v = np.zeros(len(rows), _activity.REGION_STREAM_RAW)
    for k, (rec, stream, edge, bound) in enumerate(rows):
        v[k]["record"], v[k]["stream"], v[k]["edge"], v[k]["bound"] = rec, stream, edge, bound
    return v


def test_intervals_of_cupti_regions_come_from_their_enter_and_exit_bounds():
    E, X = _attribution.EDGE_ENTER, _attribution.EDGE_EXIT
    # region 0: enter bound 10, exit 40, its own launches 20 and 30 noted (inside the bounds);
    # region 1: entered (bound 50), still open when tracing stopped; region 2: entered, its exit
    # came after the trace (neither an exit row nor open): no interval; region 3: a stream CUPTI
    # could not name; region 4: an events region beside them
    ext = np.zeros(4, _activity.EXTCORR_RAW)
    ext["correlation_id"], ext["external_id"] = [20, 30, 60, 61], [1, 1, 5, 5]
    rows = _bounds([(0, 7, E, 10), (1, 7, E, 50), (2, 7, E, 55), (3, _attribution.NO_STREAM, E, 1),
                    (4, 8, 0, 0), (0, _attribution.NO_STREAM, X, 41), (3, _attribution.NO_STREAM, X, 9)])
    iv = _attribution.region_intervals(rows, ext, ended_after=lambda r: r == 1)
    assert iv["record"].tolist() == [0, 1, 4]
    assert iv["start"].tolist() == [10, 50, 60] and iv["end"].tolist() == [41, _attribution.END, 61]
    assert iv["stream"].tolist() == [7, 7, 8]


def test_stream_rule_inside_cupti_bounds():
    """Another thread's kernels on the region's stream between its bounds are the region's, as
    between its event records before (autograd's backward inside region('backward'))."""
    k, _ = S.kernels(6, streams=1)
    iv = _attribution.region_intervals(
        _bounds([(0, 7, _attribution.EDGE_ENTER, 2), (0, 0, _attribution.EDGE_EXIT, 5)]),
        np.zeros(0, _activity.EXTCORR_RAW))
    rec, rule = _attribution.combine(np.full(6, -1), k["device"], k["stream"],
                                     k["correlation_id"], iv)
    assert rec.tolist() == [-1, -1, 0, 0, -1, -1]  # correlation ids 3 and 4
    assert _attribution.RULES[rule].tolist() == ["", "", "stream", "stream", "", ""]


def _cupti_profile(monkeypatch, recs, k, ext, streams=None, generation=7):
    """A stopped profile over synthetic records whose CUPTI-clock regions wait for their time;
    the C fill is replaced by one that records its arguments."""
    w = S.window(k, ext)
    if streams is not None:
        w.chunk.region_streams = streams
    p = Profile._from_window(w, records=recs, kernels=True, memcpy=False, memset=False,
                             memory=False)
    p._clock_generation = generation
    calls = []
    monkeypatch.setattr(gp._C, "_regions_fill_cupti", lambda *a: calls.append(a) or 0)
    monkeypatch.setattr(gp.regions, "records", lambda: recs)
    return p, calls


def test_a_stopping_profile_fills_in_the_span_of_each_region(monkeypatch):
    # step > fwd (launches 1, 2), step > bwd (kernels 3, 4 from another thread on its stream),
    # step launches 5 itself; the open region launched 6
    recs = _records([("step", -1, "cupti", False, 100), ("fwd", 0, "cupti", False, 90),
                     ("bwd", 0, "cupti", False, 95), ("idle", -1, "cupti", False, 100),
                     ("open", -1, "cupti", True, 0)])
    k, ext = S.kernels(6, streams=1, regions=[1, 1, -1, -1, 0, 4])
    streams = _bounds([(2, 7, _attribution.EDGE_ENTER, 2), (2, 0, _attribution.EDGE_EXIT, 5)])
    p, calls = _cupti_profile(monkeypatch, recs, k, ext, streams)
    p._fill_region_clock()
    (generation, target, ms, rest_failed), = calls
    assert generation == 7 and p._clock_generation is None and p.errors == [] and not rest_failed
    assert target.tolist() == [0, 1, 2, 4]
    # back to back, 1000 ns kernels 500 ns apart: fwd 0..2500, bwd 3000..5500, step 0..7000
    np.testing.assert_allclose(ms[:3], [7000 / 1e6, 2500 / 1e6, 2500 / 1e6], rtol=0, atol=1e-12)
    assert np.isnan(ms[3])
    p._fill_region_clock()  # once only
    assert len(calls) == 1


def test_a_fill_that_cannot_compute_fails_the_regions_instead(monkeypatch):
    recs = _records([("a", -1, "cupti", False, 100), ("b", -1, "events", False, 100)])
    k, ext = S.kernels(2, regions=[0, 1])
    p, calls = _cupti_profile(monkeypatch, recs, k, ext)
    p._window = None  # e.g. the activity stop failed: no trace to read
    p._fill_region_clock()
    (_, target, ms, rest_failed), = calls
    assert target.size == ms.size == 0 and rest_failed  # every waiting region: failed
    assert any("no GPU time" in e for e in p.errors), p.errors


def test_records_that_cannot_be_read_fail_the_regions(monkeypatch):
    k, ext = S.kernels(1, regions=[0])
    p, calls = _cupti_profile(monkeypatch, None, k, ext)
    p._snapshot_regions = lambda: None
    p._fill_region_clock()
    (_, target, _, rest_failed), = calls
    assert target.size == 0 and rest_failed
    assert any("could not be read" in e for e in p.errors), p.errors


def test_profile_without_the_cupti_clock_fills_nothing(monkeypatch):
    recs = _records([("a", -1, "events", False, 100)])
    k, ext = S.kernels(1, regions=[0])
    p, calls = _cupti_profile(monkeypatch, recs, k, ext, generation=None)
    p._fill_region_clock()
    assert calls == []


def test_region_spans_leave_events_ms_to_events_regions():
    recs = _records([("ev", -1, "events", False, 100), ("cu", -1, "cupti", False, 100)])
    recs[1]["gpu_ms"] = 0.0025
    k, ext = S.kernels(4, streams=1, regions=[0, 0, 1, 1])
    p = Profile._from_window(S.window(k, ext), records=recs, kernels=True, memory=False)
    spans = p.region_spans()
    assert spans["name"].tolist() == ["ev", "cu"]
    assert spans["events_ms"][0] == 1.0 and np.isnan(spans["events_ms"][1])
    assert spans["span_ms"].tolist() == pytest.approx([0.0025, 0.0025])


def test_ctrl_c_while_computing_fails_the_regions_and_is_raised(monkeypatch):
    from gpuprofile.tracing import session as _session

    recs = _records([("a", -1, "cupti", False, 100)])
    k, ext = S.kernels(1, regions=[0])
    p, calls = _cupti_profile(monkeypatch, recs, k, ext)

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(_session, "cupti_region_times", interrupted)
    with pytest.raises(KeyboardInterrupt):
        p._fill_region_clock()
    (_, target, _, rest_failed), = calls
    assert target.size == 0 and rest_failed


def _iv(rows):
    """rows: (record, stream, start, end) on device 0, as region_intervals gives them."""
    cols = list(zip(*rows, strict=True))
    return {"record": np.array(cols[0], np.int64), "device": np.zeros(len(rows), np.int64),
            "stream": np.array(cols[1], np.int64), "start": np.array(cols[2], np.int64),
            "end": np.array(cols[3], np.int64)}


def test_stream_spans_take_everything_enqueued_on_the_stream_between_the_bounds():
    # a (10..20) and b (12..30) interleave on stream 7, as two asyncio tasks on one thread do;
    # c is still open at the stop (END); d's stream has no rows; e's interval holds none
    iv = _iv([(0, 7, 10, 20), (1, 7, 12, 30), (2, 7, 26, _attribution.END), (3, 9, 0, 99),
              (4, 7, 40, 50)])
    order = [15, 25, 16, 27, 9]
    stream = [7, 7, 8, 7, 7]
    start = [100, 300, 50, 600, 1]
    end = [200, 500, 900, 700, 2]
    lo, hi = _clock.stream_spans(6, iv, np.zeros(5), stream, order, start, end)
    assert lo[:3].tolist() == [100, 100, 600] and hi[:3].tolist() == [200, 700, 700]
    assert (lo[3:] == _clock.NO_START).all() and (hi[3:] == _clock.NO_END).all()
    empty = _clock.stream_spans(2, iv, [], [], [], [], [])
    assert (empty[0] == _clock.NO_START).all()


def test_interleaved_tasks_regions_read_what_their_events_would(monkeypatch):
    """Task a's kernel is attributed to b (b was pushed last on the shared thread), yet a's
    events would have bracketed it: a's time comes from its stream interval, not 'no work'."""
    E, X = _attribution.EDGE_ENTER, _attribution.EDGE_EXIT
    recs = _records([("a", -1, "cupti", False, 100), ("b", -1, "cupti", False, 100)])
    k, ext = S.kernels(3, streams=1, regions=[-1, 1, 1])  # ids 1 (outside), 2 and 3
    streams = _bounds([(0, 7, E, 1), (1, 7, E, 1), (0, 0, X, 3), (1, 0, X, 4)])
    p, calls = _cupti_profile(monkeypatch, recs, k, ext, streams)
    p._fill_region_clock()
    (_, target, ms, _), = calls
    assert target.tolist() == [0, 1]
    # kernels of 1000 ns, 500 ns apart: #2 is 1500..2500, #3 is 3000..4000 (from T0 + 1000)
    np.testing.assert_allclose(ms, [1000 / 1e6, 2500 / 1e6], rtol=0, atol=1e-12)


@pytest.mark.parametrize("partial, dropped", [(True, 0), (False, 3)])
def test_an_incomplete_trace_fails_the_regions(monkeypatch, partial, dropped):
    """Records missing from the trace could make a span short: no time rather than a wrong one."""
    recs = _records([("a", -1, "cupti", False, 100)])
    k, ext = S.kernels(2, regions=[0, 0])
    p, calls = _cupti_profile(monkeypatch, recs, k, ext)
    p._window.partial = partial
    p._window.chunk.dropped = dropped
    p._fill_region_clock()
    (_, target, _, rest_failed), = calls
    assert target.size == 0 and rest_failed
    assert any("incomplete" in e for e in p.errors), p.errors
