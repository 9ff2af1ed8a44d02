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

Work on other streams. Libraries launch on streams of their own (a torch side stream, JAX/XLA's
compute stream), which neither the gate nor the L2 flush on the benchmark's stream holds back,
and whose work events on that stream never see (they read about 0). Every take therefore waits
for the whole device before reading records (a record read before its activity ended has no
timestamps: it is refused, never counted as 0), and the streams fn's records name are compared
with the benchmark's own (where its gate and flush kernels ran). fn on other streams is timed by
CUPTI with each iteration between device synchronizations (`GpuSource.sync_each`), as the busy
time of its records (busy_ms: the gaps there are host launch latency, not GPU work), and where
CUPTI cannot time it, the benchmark refuses (TimingRefused) instead of falling back to events
that would time nothing.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from .. import _C
from ..tracing import activity as _activity

_OURS = ("gp_gate_kernel", "gp_l2_flush_kernel", "gp_clock_probe_kernel")
_MASK = _activity.KERNELS | _activity.MEMCPY | _activity.MEMSET
_LEARN_BATCHES = 3  # batches of _LEARN_ITERS calls that must agree on per_call
_LEARN_ITERS = 4
_MAX_MISMATCHED = 4  # discarded batches (more than half of all) before the timing is refused


def _groups(starts, ends, n: int, per_call: int):
    """(starts, ends) as n rows of per_call records in start order, or None when the count is
    not n × per_call."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    if per_call < 1 or n < 1 or starts.size != n * per_call:
        return None
    order = np.argsort(starts, kind="stable")
    return starts[order].reshape(n, per_call), ends[order].reshape(n, per_call)


def spans_ms(starts, ends, n: int, per_call: int):
    """Per-iteration GPU time (ms) of n iterations whose records (start/end ns) are given in any
    order, per_call records each: last end minus first start of each group of per_call records in
    start order. None when the count is not n × per_call. Pure."""
    groups = _groups(starts, ends, n, per_call)
    if groups is None:
        return None
    s, e = groups
    return (e.max(axis=1) - s.min(axis=1)) / 1e6


def busy_ms(starts, ends, n: int, per_call: int):
    """Per-iteration GPU busy time (ms): like spans_ms, less the idle gaps inside each group (the
    union of the records' intervals). For iterations run between device synchronizations, where
    a gap inside fn is the host's launch latency, not GPU work. None on a wrong count. Pure."""
    groups = _groups(starts, ends, n, per_call)
    if groups is None:
        return None
    s, e = groups
    e = np.maximum.accumulate(e, axis=1)
    gaps = np.maximum(0, s[:, 1:] - e[:, :-1]).sum(axis=1)
    return (e[:, -1] - s[:, 0] - gaps) / 1e6


@dataclass
class Records:
    """fn's records of one collection (start/end ns, CUPTI stream id each), and the streams of
    gpuprofile's own kernels among them (gate, L2 flush): the benchmark's stream."""

    starts: np.ndarray
    ends: np.ndarray
    streams: np.ndarray
    own_streams: frozenset

    @property
    def complete(self) -> bool:
        """False when a record has no timestamps (CUPTI hands over an activity it has not seen
        end as zeros): its time is unknown, never 0."""
        return bool(np.all((self.starts > 0) & (self.ends >= self.starts)))


def fn_records(chunk) -> Records:
    """The kernels, copies and sets in a chunk that are not gpuprofile's own, and our own
    kernels' streams."""
    ours = np.array([any(name.startswith(o) for o in _OURS) for name in chunk.names] + [False])
    ids = chunk.kernels["name_id"].astype(np.int64)
    own = ours[np.minimum(ids, len(chunk.names))]
    kernels = chunk.kernels[~own]
    parts = (kernels, chunk.memcpy, chunk.memset)
    return Records(
        starts=np.concatenate([p["start"] for p in parts]).astype(np.int64),
        ends=np.concatenate([p["end"] for p in parts]).astype(np.int64),
        streams=np.concatenate([p["stream"] for p in parts]).astype(np.int64),
        own_streams=frozenset(chunk.kernels["stream"][own].tolist()),
    )


class TimingRefused(ValueError):
    """CUPTI saw fn's work but cannot time it per iteration, and CUDA events on the benchmark's
    stream would not see it either: no number is better than a wrong one."""


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
        self.other_streams: list = []  # CUPTI streams of fn's work that are not the benchmark's
        self.closed = False

    def __del__(self):  # a timer dropped unclosed (an exception between open and use)
        with contextlib.suppress(Exception):  # at exit CUPTI may be gone; nothing to tell
            self.close()

    def take(self) -> Records:
        """fn's records since the last take. Waits for every active device first: work that fn
        put on streams other than the benchmark's is not behind the batch's last event, and a
        record taken before its activity ended has no timestamps."""
        return fn_records(_activity.collect(True))

    def learn(self, source) -> str | None:
        """Runs a few small batches to learn per_call and the streams fn uses; None when
        learned, else why not. Raises TimingRefused where events cannot stand in."""
        self.take()  # drop what the first call and capture produced
        counts, streams, own = [], set(), set()
        for _ in range(_LEARN_BATCHES):
            b = source.run(_LEARN_ITERS)
            r = self.take()
            own |= r.own_streams
            streams |= set(r.streams.tolist())
            if not b.tainted:
                counts.append(r.starts.size)
        self.other_streams = sorted(streams - own) if own else []
        if not counts:  # every learning batch timed out at the gate: nothing was counted
            return "no learning batch ran as measured ones will (the gate timed out)"
        if counts[0] == 0:
            raise TimingRefused(
                "fn launched no kernels, copies or sets that CUPTI saw: there is no GPU work to "
                "time (clock='host' times CPU code; work that a framework launches later, from "
                "its own thread, must be waited for inside fn, e.g. JAX's block_until_ready)")
        if len(set(counts)) != 1 or counts[0] % _LEARN_ITERS:
            why = (f"fn's GPU work differs between calls ({sorted(set(counts))} records per "
                   f"{_LEARN_ITERS} calls)")
            if self.other_streams:
                raise TimingRefused(
                    f"{why}, on streams other than the benchmark's (CUPTI streams "
                    f"{self.other_streams}), where CUDA events cannot see it. If a framework "
                    "launches it asynchronously, wait for it inside fn (JAX: "
                    "block_until_ready), or pass stream= the stream it runs on")
            return why
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


def other_streams_note(streams) -> str:
    return (f"fn ran its GPU work on streams other than the benchmark's (CUPTI streams "
            f"{list(streams)}), which the gate and the L2 flush cannot hold back: each iteration "
            "ran between two device synchronizations instead, timed as the GPU's busy time over "
            "fn's records (idle gaps between them, the host's launch latency there, left out); "
            "pass stream= the stream fn launches on to time it gated")


class CuptiSource:
    """A GpuSource whose batches are timed by CUPTI records; the event samples of the same
    iterations are kept for comparison (event_samples)."""

    def __init__(self, source, timer: CuptiTimer):
        self.source = source
        self.timer = timer
        self.mismatched = 0
        self.batches = 0
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
        r = self.timer.take()
        if b.tainted:
            return b
        split = busy_ms if getattr(self.source, "sync_each", False) else spans_ms
        spans = split(r.starts, r.ends, n, self.timer.per_call) if r.complete else None
        if spans is None:
            self.mismatched += 1
            self.batches += 1
            if self.mismatched >= _MAX_MISMATCHED and self.mismatched * 2 > self.batches:
                raise TimingRefused(
                    f"{self.mismatched} of {self.batches} batches of fn's CUPTI records did not "
                    f"split into iterations of {self.timer.per_call} records (fn's GPU work "
                    "varies between calls, or is launched after fn returns); CUDA events cannot "
                    "stand in" + (f" for work on other streams ({self.timer.other_streams})"
                                  if self.timer.other_streams else "") + "; use clock='gpu' to "
                    "time with events on the benchmark's stream anyway")
            return Batch(np.empty(0), b.wall_s, b.host_s, tainted=True)
        self.batches += 1
        if not self.timer.other_streams:  # events on our stream saw fn's work: worth comparing
            self.event_samples.append(b.samples)
        return Batch(spans, b.wall_s, b.host_s)
