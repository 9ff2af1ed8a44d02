"""The CUPTI region clock: a region's GPU time taken from a trace instead of two CUDA events.
Pure functions over NumPy arrays.

While gpuprofile.profile() traces with regions (region_clock="cupti", the default), a region
records no events: csrc/regions/stacks.c marks its record as on the CUPTI clock, and the profile
fills its time in when it stops (Profile._fill_region_clock, through _C._regions_fill_cupti).

The time is the span of the region's traced work: from the first start to the last end of
- the kernels, copies and sets enqueued on the region's stream while it was open, whoever
  enqueued them (strictly between its enter and exit bounds in call order: what its two events
  would have bracketed, asyncio tasks interleaving on its thread included), and
- those attributed to it or to any region nested in it (the attribution rules of
  tracing/attribution.py), on any stream.
Two events on the region's stream measure the same span when the stream runs the region's work
back to back; they also count the time the stream waits for the host to launch the first kernel,
and they miss work on other streams. A region whose trace holds no work has no GPU time (not
0 ms); one the profile's stop cut (open at the stop, or exited after the trace ended) is failed:
its trace is incomplete.
"""

from __future__ import annotations

import numpy as np

NO_START = np.iinfo(np.int64).max
NO_END = np.iinfo(np.int64).min


def pending_cupti(records: np.ndarray) -> np.ndarray:
    """Which records are on the CUPTI clock and wait for a profile to fill their time in (none
    in records from before the CUPTI clock, which have no gpu_clock field)."""
    if "gpu_clock" not in (records.dtype.names or ()):
        return np.zeros(len(records), dtype=bool)
    return ((records["gpu_clock"] == "cupti") & np.isnan(records["gpu_ms"]) & ~records["failed"]
            & ~records["no_gpu_work"])


def subtree_spans(records: np.ndarray, record, start_ns, end_ns) -> tuple:
    """(first start, last end) per record over the rows attributed to it or to a region nested in
    it; NO_START / NO_END where none. `record`, `start_ns`, `end_ns`: one entry per kernel, copy
    or set (record -1 or out of range: attributed to no region)."""
    n = len(records)
    lo = np.full(n, NO_START, np.int64)
    hi = np.full(n, NO_END, np.int64)
    record = np.asarray(record, np.int64)
    mine = (record >= 0) & (record < n)
    np.minimum.at(lo, record[mine], np.asarray(start_ns, np.int64)[mine])
    np.maximum.at(hi, record[mine], np.asarray(end_ns, np.int64)[mine])
    if n:
        parent = records["parent"].astype(np.int64)
        depth = records["depth"].astype(np.int64)
        # deepest first: a region's span is final once every region inside it has passed its own
        # up (a parent was entered before its children, one level up)
        for d in range(int(depth.max()), 0, -1):
            kids = np.flatnonzero((depth == d) & (parent >= 0) & (parent < n))
            np.minimum.at(lo, parent[kids], lo[kids])
            np.maximum.at(hi, parent[kids], hi[kids])
    return lo, hi


def stream_spans(n: int, intervals: dict, device, stream, order, start_ns, end_ns) -> tuple:
    """(first start, last end) per record (n of them) over the rows enqueued on its device and
    stream strictly between its interval's bounds (tracing/attribution.region_intervals: arrays
    record, device, stream, start, end in call order), whichever region they were attributed
    to; NO_START / NO_END where none. `order`: each row's place in call order (its correlation
    id, or the copy's enqueueing call)."""
    lo = np.full(n, NO_START, np.int64)
    hi = np.full(n, NO_END, np.int64)
    iv = intervals
    order = np.asarray(order, np.int64)
    if not len(iv["record"]) or not order.size:
        return lo, hi
    key = (np.asarray(device, np.int64) << 32) | np.asarray(stream, np.int64)
    keys = np.unique(key)
    # one sortable number per row: its stream's rank, then its place in call order
    width = max(int(order.max()), int(iv["end"].max())) + 1  # END included
    pos = np.searchsorted(keys, key) * width + order
    sort = np.argsort(pos, kind="stable")
    pos = pos[sort]
    first = np.append(np.asarray(start_ns, np.int64)[sort], 0)  # + a sentinel for reduceat
    last = np.append(np.asarray(end_ns, np.int64)[sort], 0)
    ikey = (iv["device"].astype(np.int64) << 32) | iv["stream"].astype(np.int64)
    rank = np.minimum(np.searchsorted(keys, ikey), len(keys) - 1)
    known = keys[rank] == ikey
    a = np.searchsorted(pos, rank * width + iv["start"], "right")
    b = np.searchsorted(pos, rank * width + iv["end"], "left")
    has = known & (b > a) & (iv["record"] >= 0) & (iv["record"] < n)
    if has.any():
        bounds = np.ravel(np.column_stack([a[has], b[has]]))
        rec = iv["record"][has]
        np.minimum.at(lo, rec, np.minimum.reduceat(first, bounds)[::2])
        np.maximum.at(hi, rec, np.maximum.reduceat(last, bounds)[::2])
    return lo, hi


def cupti_region_times(records: np.ndarray, record, start_ns, end_ns, offset_ns: int,
                       trace_end_ns: int, stream_rows=None) -> tuple:
    """(records, ms) to fill in: each pending CUPTI-clock record with traced work gets its span
    in ms; one the trace's end cut gets NaN (failed); one with no traced work is left out (the
    fill marks it as having no GPU work). `records`: gpuprofile.records() at the profile's stop;
    `record`, `start_ns`, `end_ns`: each row's region and times; `offset_ns`: CUPTI clock minus
    host clock; `trace_end_ns`: the trace's end (CUPTI clock); `stream_rows`: (intervals,
    device, stream, order) for stream_spans, None without the stream rule."""
    start_ns, end_ns = np.asarray(start_ns, np.int64), np.asarray(end_ns, np.int64)
    timed = (start_ns > 0) & (end_ns >= start_ns)  # a record CUPTI could not time is no span
    lo, hi = subtree_spans(records, np.asarray(record, np.int64)[timed], start_ns[timed],
                           end_ns[timed])
    if stream_rows is not None:
        intervals, device, stream, order = stream_rows
        s_lo, s_hi = stream_spans(len(records), intervals, np.asarray(device)[timed],
                                  np.asarray(stream)[timed], np.asarray(order)[timed],
                                  start_ns[timed], end_ns[timed])
        lo, hi = np.minimum(lo, s_lo), np.maximum(hi, s_hi)
    pending = pending_cupti(records)
    host_end = records["host_end_ns"].astype(np.int64)
    cut = records["open"] | ((host_end > 0) & (host_end + int(offset_ns) > int(trace_end_ns)))
    has_work = hi != NO_END
    target = np.flatnonzero(pending & (cut | has_work))
    ms = np.where(cut[target], np.nan, (hi[target] - lo[target]) / 1e6)
    return target.astype(np.int64), ms.astype(np.float64)
