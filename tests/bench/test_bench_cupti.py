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


@pytest.mark.parametrize("n, per_call", [(2, 2), (4, 1), (1, 0), (0, 1)])
def test_spans_refuse_a_wrong_count(n, per_call):
    assert _bench_cupti.spans_ms([1, 2, 3], [2, 3, 4], n, per_call) is None


class _Chunk:
    def __init__(self, names, kernel_names, starts, ends):
        self.names = names
        self.kernels = np.zeros(len(starts), [("name_id", "<u4"), ("start", "<u8"), ("end", "<u8")])
        self.kernels["name_id"] = kernel_names
        self.kernels["start"], self.kernels["end"] = starts, ends
        self.memcpy = np.zeros(0, [("start", "<u8"), ("end", "<u8")])
        self.memset = np.zeros(1, [("start", "<u8"), ("end", "<u8")])
        self.memset["start"], self.memset["end"] = 50, 60


def test_fn_records_leave_out_gpuprofile_kernels():
    chunk = _Chunk(["gp_gate_kernel(gp_gate_params)", "user_kernel()", "gp_l2_flush_kernel(uint4 const*)"],
                   [0, 1, 2, 1, 7], [1, 10, 20, 30, 40], [2, 11, 21, 31, 41])
    starts, ends = _bench_cupti.fn_records(chunk)
    # the user kernel twice, an id beyond the table (kept), and the memset
    assert sorted(starts.tolist()) == [10, 30, 40, 50]
    assert sorted(ends.tolist()) == [11, 31, 41, 60]


class _FakeTimer:
    def __init__(self, per_call, records):
        self.per_call = per_call
        self.records = list(records)

    def take(self):
        return self.records.pop(0)


class _FakeSource:
    max_batch, gated, tainted = 64, True, 0

    def __init__(self, tainted=False):
        self.is_tainted = tainted

    def run(self, n):
        return Batch(np.full(n, 9.0), 0.01, 0.001, tainted=self.is_tainted)


def test_cupti_source_replaces_event_samples_and_keeps_them():
    timer = _FakeTimer(1, [(np.array([0, 100]), np.array([10, 120]))])
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
