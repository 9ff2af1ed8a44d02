"""CUPTI kernel timing for gpuprofile.benchmark.

A pair of CUDA events around fn measures more than fn's GPU work: the GPU's own processing of the
start event, of the launch of fn's first kernel and of the stop event. On an H200 that adds a
near-constant 2.7 µs (measured: a 5 µs spin kernel read 8.3 µs by events, 5.6 µs by CUPTI), a
50 % error on short kernels that every event-based tool shares. So where CUPTI is usable,
benchmark() takes each iteration's time from CUPTI's activity records instead: from the start
of the first kernel, copy or set that fn enqueued to the end of its last one. Iterations are
still enqueued behind the gate, with the L2 flush between them, exactly as with events; the
records of gpuprofile's own kernels (gate, flush, clock probe) are left out.

Iterations are told apart by count: one call of fn is first watched to learn how many records it
produces (`per_call`); each batch must then produce exactly n × per_call, which are split in
start-time order. A batch that does not (fn's work varies between calls) is discarded and
counted; fn whose work varies every time falls back to events before the measurement starts.
"""

from __future__ import annotations

import contextlib

import numpy as np

from .. import _C
from ..tracing import activity as _activity

_OURS = ("gp_gate_kernel", "gp_l2_flush_kernel", "gp_clock_probe_kernel")
_MASK = _activity.KERNELS | _activity.MEMCPY | _activity.MEMSET
_LEARN_BATCHES = 3  # batches of _LEARN_ITERS calls that must agree on per_call
_LEARN_ITERS = 4


def spans_ms(starts, ends, n: int, per_call: int):
    """Per-iteration GPU time (ms) of n iterations whose records (start/end ns) are given in any
    order, per_call records each: last end minus first start of each group of per_call records in
    start order. None when the count is not n × per_call. Pure."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    if per_call < 1 or n < 1 or starts.size != n * per_call:
        return None
    order = np.argsort(starts, kind="stable")
    s = starts[order].reshape(n, per_call)
    e = ends[order].reshape(n, per_call)
    return (e.max(axis=1) - s.min(axis=1)) / 1e6


def fn_records(chunk) -> tuple:
    """(starts, ends) of the kernels, copies and sets in a chunk that are not gpuprofile's own."""
    ours = np.array([any(name.startswith(o) for o in _OURS) for name in chunk.names] + [False])
    ids = chunk.kernels["name_id"].astype(np.int64)
    keep = ~ours[np.minimum(ids, len(chunk.names))]
    kernels = chunk.kernels[keep]
    starts = np.concatenate([kernels["start"], chunk.memcpy["start"], chunk.memset["start"]])
    ends = np.concatenate([kernels["end"], chunk.memcpy["end"], chunk.memset["end"]])
    return starts.astype(np.int64), ends.astype(np.int64)


class CuptiTimer:
    """Holds the CUPTI kinds it needs for its lifetime; collect() hands every chunk to any other
    active consumer too (a gpuprofile.profile() around the benchmark keeps its records)."""

    def __init__(self):
        self.closed = True
        _activity.check_no_other_profiler("benchmark's CUPTI timing")
        held: list = []
        try:
            _C._activity_acquire(_MASK, held)
        except BaseException:  # a Ctrl-C raised just after the acquire returned: held says so
            if held:
                _C._activity_release(_MASK)
            raise
        self.per_call = 0
        self.closed = False

    def __del__(self):  # a timer dropped unclosed (an exception between open and use)
        with contextlib.suppress(Exception):  # at exit CUPTI may be gone; nothing to tell
            self.close()

    def take(self) -> tuple:
        """The fn records since the last take (the GPU work is already finished)."""
        return fn_records(_activity.collect(False))

    def learn(self, source) -> str | None:
        """Runs a few small batches to learn per_call; None when learned, else why not."""
        self.take()  # drop what the first call and capture produced
        counts = []
        for _ in range(_LEARN_BATCHES):
            b = source.run(_LEARN_ITERS)
            starts, _ = self.take()
            if not b.tainted:
                counts.append(starts.size)
        if not counts or counts[0] == 0:
            return "fn launched no kernels, copies or sets that CUPTI saw"
        if len(set(counts)) != 1 or counts[0] % _LEARN_ITERS:
            return (f"fn's GPU work differs between calls ({sorted(set(counts))} records per "
                    f"{_LEARN_ITERS} calls)")
        self.per_call = counts[0] // _LEARN_ITERS
        return None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            _C._activity_release(_MASK)


def open_timer(clock: str):
    """(CuptiTimer or None, note): clock='cupti' raises when CUPTI cannot be used; 'auto' falls
    back to events and says why."""
    try:
        return CuptiTimer(), None
    except _C.GpuProfileError as e:  # CUPTI missing or held by another tool; no device to trace
        if clock == "cupti":
            raise
        return None, f"CUPTI timing unavailable, CUDA events used: {str(e).splitlines()[0]}"


class CuptiSource:
    """A GpuSource whose batches are timed by CUPTI records; the event samples of the same
    iterations are kept for comparison (event_samples)."""

    def __init__(self, source, timer: CuptiTimer):
        self.source = source
        self.timer = timer
        self.mismatched = 0
        self.event_samples: list = []

    @property
    def max_batch(self) -> int:
        return self.source.max_batch

    @property
    def gated(self) -> bool:
        return self.source.gated

    @property
    def tainted(self) -> int:
        return self.source.tainted + self.mismatched

    def run(self, n: int):
        from .result import Batch

        b = self.source.run(n)
        starts, ends = self.timer.take()
        if b.tainted:
            return b
        spans = spans_ms(starts, ends, n, self.timer.per_call)
        if spans is None:
            self.mismatched += 1
            return Batch(np.empty(0), b.wall_s, b.host_s, tainted=True)
        self.event_samples.append(b.samples)
        return Batch(spans, b.wall_s, b.host_s)
