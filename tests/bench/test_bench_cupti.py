"""CUPTI timing for benchmark(): splitting records into iterations, and the source wrapper
(with a fake timer; the real one is tested on the GPU in test_bench_gpu.py)."""

import numpy as np
import pytest

from gpuprofile.bench import cupti as _bench_cupti
from gpuprofile.bench.result import Batch


def test_spans_of_single_kernel_iterations():
    starts = [300, 100, 200]
    ends = [350, 130, 260]
    assert _bench_cupti.spans_ms(starts, ends, 3, 1).tolist() == [30e-6, 60e-6, 50e-6]


def test_spans_cover_first_start_to_last_end_of_each_iteration():
    # two iterations of two records each; the second record of an iteration ends last
    starts = [0, 10, 1000, 1010]
    ends = [5, 40, 1020, 1100]
    spans = _bench_cupti.spans_ms(starts, ends, 2, 2)
    assert spans.tolist() == [40e-6, 100e-6]


def test_busy_time_leaves_out_idle_gaps_and_counts_overlap_once():
    # call 1: [0,10] gap [20,30] -> 20; call 2: [100,150] and [120,130] inside it -> 50
    busy = _bench_cupti.busy_ms([0, 20, 100, 120], [10, 30, 150, 130], 2, 2)
    assert busy.tolist() == [20e-6, 50e-6]
    assert _bench_cupti.busy_ms([1, 2, 3], [2, 3, 4], 2, 2) is None


@pytest.mark.parametrize("n, per_call", [(2, 2), (4, 1), (1, 0), (0, 1)])
def test_spans_refuse_a_wrong_count(n, per_call):
    assert _bench_cupti.spans_ms([1, 2, 3], [2, 3, 4], n, per_call) is None


_REC = [("name_id", "<u4"), ("start", "<u8"), ("end", "<u8"), ("stream", "<u4")]


class _Chunk:
    def __init__(self, names, kernel_names, starts, ends, streams=None):
        self.names = names
        self.kernels = np.zeros(len(starts), _REC)
        self.kernels["name_id"] = kernel_names
        self.kernels["start"], self.kernels["end"] = starts, ends
        self.kernels["stream"] = 7 if streams is None else streams
        self.memcpy = np.zeros(0, _REC[1:])
        self.memset = np.zeros(1, _REC[1:])
        self.memset["start"], self.memset["end"], self.memset["stream"] = 50, 60, 7


def test_fn_records_leave_out_gpuprofile_kernels():
    chunk = _Chunk(["gp_gate_kernel(gp_gate_params)", "user_kernel()", "gp_l2_flush_kernel(uint4 const*)"],
                   [0, 1, 2, 1, 7], [1, 10, 20, 30, 40], [2, 11, 21, 31, 41])
    r = _bench_cupti.fn_records(chunk)
    # the user kernel twice, an id beyond the table (kept), and the memset
    assert sorted(r.starts.tolist()) == [10, 30, 40, 50]
    assert sorted(r.ends.tolist()) == [11, 31, 41, 60]
    assert r.own_streams == {7} and r.complete


def test_fn_records_name_the_streams_of_fn_and_of_the_benchmark():
    chunk = _Chunk(["gp_gate_kernel(gp_gate_params)", "gemm()"], [0, 1, 1], [1, 10, 30], [2, 20, 40],
                   streams=[7, 13, 13])
    r = _bench_cupti.fn_records(chunk)
    assert r.own_streams == {7} and sorted(r.streams.tolist()) == [7, 13, 13]


@pytest.mark.parametrize("start, end", [(0, 0), (0, 50), (60, 50)])
def test_a_record_without_timestamps_is_incomplete(start, end):
    """CUPTI hands over an activity it has not seen end with zeros: never a 0 µs sample."""
    chunk = _Chunk(["k()"], [0, 0], [10, start], [20, end])
    assert not _bench_cupti.fn_records(chunk).complete


def _records(starts, ends, streams=None, own=(7,)):
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    streams = np.full(starts.size, 7) if streams is None else np.asarray(streams)
    return _bench_cupti.Records(starts, ends, streams, frozenset(own))


class _FakeTimer:
    other_streams: list = []

    def __init__(self, per_call, records):
        self.per_call = per_call
        self.records = [_records(*r) for r in records]

    def take(self):
        return self.records.pop(0)


class _FakeSource:
    max_batch, gated, tainted = 64, True, 0

    def __init__(self, tainted=False):
        self.is_tainted = tainted

    def run(self, n):
        return Batch(np.full(n, 9.0), 0.01, 0.001, tainted=self.is_tainted)


def test_cupti_source_replaces_event_samples_and_keeps_them():
    timer = _FakeTimer(1, [(np.array([5, 100]), np.array([15, 120]))])
    src = _bench_cupti.CuptiSource(_FakeSource(), timer)
    b = src.run(2)
    assert b.samples.tolist() == [10e-6, 20e-6] and not b.tainted
    assert src.event_samples[0].tolist() == [9.0, 9.0]
    assert src.max_batch == 64 and src.gated and src.tainted == 0


def test_cupti_source_discards_a_batch_with_the_wrong_count():
    timer = _FakeTimer(2, [(np.array([0, 100, 200]), np.array([10, 120, 230]))])
    src = _bench_cupti.CuptiSource(_FakeSource(), timer)
    b = src.run(2)
    assert b.tainted and b.samples.size == 0 and src.tainted == 1 and src.event_samples == []


def test_cupti_source_discards_a_batch_with_an_unfinished_record():
    timer = _FakeTimer(1, [(np.array([10, 0]), np.array([20, 0]))])
    src = _bench_cupti.CuptiSource(_FakeSource(), timer)
    b = src.run(2)
    assert b.tainted and b.samples.size == 0 and src.mismatched == 1


def test_cupti_source_refuses_when_most_batches_do_not_split():
    bad = (np.array([0, 100, 200]), np.array([10, 120, 230]))
    timer = _FakeTimer(2, [bad] * _bench_cupti._MAX_MISMATCHED)
    src = _bench_cupti.CuptiSource(_FakeSource(), timer)
    for _ in range(_bench_cupti._MAX_MISMATCHED - 1):
        assert src.run(2).tainted
    with pytest.raises(_bench_cupti.TimingRefused, match="did not split into iterations"):
        src.run(2)


def test_cupti_source_keeps_no_event_samples_for_work_on_other_streams():
    timer = _FakeTimer(1, [(np.array([5, 100]), np.array([15, 120]))])
    timer.other_streams = [13]
    src = _bench_cupti.CuptiSource(_FakeSource(), timer)
    assert src.run(2).samples.tolist() == [10e-6, 20e-6] and src.event_samples == []


class _LearnTimer(_bench_cupti.CuptiTimer):
    """A CuptiTimer without CUPTI: take() hands out prepared Records."""

    def __init__(self, batches):
        self.closed, self.per_call, self.other_streams = True, 0, []
        self.batches = [_records([], [])] + list(batches)

    def take(self):
        return self.batches.pop(0)


class _LearnSource:
    def run(self, n):
        return Batch(np.full(n, 1.0), 0.01, 0.001)


def _per_call(k, stream=7, own=(7,)):
    n = k * _bench_cupti._LEARN_ITERS
    return _records(np.arange(1, n + 1) * 100, np.arange(1, n + 1) * 100 + 50, np.full(n, stream), own)


def test_learn_finds_per_call_and_other_streams():
    timer = _LearnTimer([_per_call(2, stream=13)] * _bench_cupti._LEARN_BATCHES)
    assert timer.learn(_LearnSource()) is None
    assert timer.per_call == 2 and timer.other_streams == [13]
    timer = _LearnTimer([_per_call(1)] * _bench_cupti._LEARN_BATCHES)
    assert timer.learn(_LearnSource()) is None and timer.other_streams == []


def test_learn_refuses_fn_without_gpu_work():
    timer = _LearnTimer([_records([], [], own=(7,))] * _bench_cupti._LEARN_BATCHES)
    with pytest.raises(_bench_cupti.TimingRefused, match="no kernels, copies or sets"):
        timer.learn(_LearnSource())


def test_learn_says_why_when_every_learning_batch_was_tainted():
    class Tainted:
        def run(self, n):
            return Batch(np.empty(0), 0.01, 0.001, tainted=True)

    timer = _LearnTimer([_per_call(1)] * _bench_cupti._LEARN_BATCHES)
    assert "timed out" in timer.learn(Tainted()) and timer.per_call == 0


def test_learn_refuses_varying_work_on_other_streams_but_not_on_its_own():
    varying = [_per_call(1, stream=13), _per_call(2, stream=13), _per_call(1, stream=13)]
    with pytest.raises(_bench_cupti.TimingRefused, match="other than the benchmark's"):
        _LearnTimer(varying).learn(_LearnSource())
    varying = [_per_call(1), _per_call(2), _per_call(1)]
    assert "differs between calls" in _LearnTimer(varying).learn(_LearnSource())


def test_cupti_source_passes_a_tainted_batch_through():
    timer = _FakeTimer(1, [(np.array([]), np.array([]))])
    src = _bench_cupti.CuptiSource(_FakeSource(tainted=True), timer)
    assert src.run(3).tainted and src.mismatched == 0


@pytest.mark.parametrize("error", [RuntimeError("fn failed"), KeyboardInterrupt()])
def test_timer_closed_when_learning_raises(monkeypatch, error):
    """fn raising (or Ctrl-C) while the CUPTI timer learns: the timer's kinds are released."""
    from gpuprofile.bench import benchmark as bench

    class Timer:
        closed = False

        def learn(self, source):
            raise error

        def close(self):
            self.closed = True

    timer = Timer()
    monkeypatch.setattr(_bench_cupti, "open_timer", lambda clock: (timer, None))
    opts = type("Opts", (), {"clock": "auto"})()
    with pytest.raises(type(error)):
        bench._cupti_source(object(), opts)
    assert timer.closed


def test_timer_dropped_unclosed_releases_its_kinds(monkeypatch):
    from gpuprofile import _C

    calls = []
    monkeypatch.setattr(_C, "_activity_acquire", lambda mask, held=None: held.append(mask))
    monkeypatch.setattr(_C, "_activity_release", lambda mask: calls.append(mask))
    monkeypatch.setattr(_bench_cupti._activity, "check_no_other_profiler", lambda what: None)
    _bench_cupti.CuptiTimer()  # dropped at once
    assert calls == [_bench_cupti._MASK]
