"""Which gpuprofile region each kernel, copy and set of a trace belongs to. Pure functions.

Two rules, tried in order (the `attribution` column of Profile.kernels/memcpy/memset says which
one decided each row):

- "launch": the CUDA call that enqueued the work ran on a thread while the region was its
  innermost open region. The call records (csrc/tracing/attribution.c notes each watched call's
  correlation id with the thread's innermost region, as CUPTI's external correlation would) tie
  the call to the region.
- "stream": the work was enqueued on the region's stream between the region's start and stop
  events, so the GPU ran it inside the region, whichever thread enqueued it (autograd runs
  backward on its own threads; a worker thread may launch on the region's stream). A stream
  runs its work in the order it was enqueued, and CUPTI numbers CUDA calls in the order they
  are made (correlation ids), so "between the two events" is a comparison of correlation ids:
  the region's own events are recorded by the first and last calls noted with its record
  (it is innermost from before its start event is recorded until after its stop event). The
  region's stream is named by CUPTI when the region is entered. A region open when tracing
  started has no start call in the trace (it starts at 0); one still open when tracing stopped
  has no stop call (it ends after every call). With several candidates the region whose start
  came last wins (nested regions: the innermost). A region on the CUPTI clock records no events:
  csrc/tracing/attribution.c notes its enter and exit instead, each with the correlation id
  that bounds it (edge rows of the region streams: the last call made before the enter, one
  past the last call made before the exit).

Work matched by neither rule is left out of every region ("" and record -1).
"""

from __future__ import annotations

import numpy as np

RULES = np.array(["", "launch", "stream"], dtype=object)
NONE, LAUNCH, STREAM = 0, 1, 2


def attribute(correlation_ids, extcorr) -> np.ndarray:
    """Region record index (-1: none) of each correlation id, from the external correlation
    records (external id = record index + 1)."""
    corr = np.asarray(correlation_ids, dtype=np.uint32)
    if not len(extcorr) or not corr.size:
        return np.full(corr.size, -1, np.int64)
    order = np.argsort(extcorr["correlation_id"], kind="stable")
    keys = extcorr["correlation_id"][order]
    vals = extcorr["external_id"][order].astype(np.int64) - 1
    first = np.r_[True, keys[1:] != keys[:-1]]
    keys, vals = keys[first], vals[first]
    pos = np.minimum(np.searchsorted(keys, corr), len(keys) - 1)
    return np.where(keys[pos] == corr, vals[pos], -1)


NO_STREAM = 0xFFFFFFFF  # a region stream CUPTI could not name
END = 1 << 32  # after every correlation id (CUPTI's are 32-bit)
# A region stream row's edge (record_kinds.h): bounds from the region's own event records, or the
# enter and exit bounds of a region on the CUPTI clock.
EDGE_EVENTS, EDGE_ENTER, EDGE_EXIT = 0, 1, 2


def _empty_intervals() -> dict:
    z = np.empty(0, np.int64)
    return {"record": z, "device": z, "stream": z, "start": z, "end": z}


def region_intervals(region_streams, extcorr, ended_after=None) -> dict:
    """Each traced region's interval in correlation-id order: arrays record, device, stream
    (CUPTI's), start, end; work on that device and stream whose correlation id lies strictly
    between start and end was enqueued inside the region. `region_streams`: rows of
    gpuprofile.tracing.activity.REGION_STREAM_RAW. `ended_after(records)` says which regions were still
    open when tracing stopped (default: none)."""
    if not len(region_streams):
        return _empty_intervals()
    edge = region_streams["edge"]
    exits = region_streams[edge == EDGE_EXIT]
    rows = region_streams[(edge != EDGE_EXIT) & (region_streams["stream"] != NO_STREAM)]
    if not len(rows):
        return _empty_intervals()
    records, first = np.unique(rows["record"].astype(np.int64), return_index=True)
    rows = rows[first]
    start = np.full(len(records), -1, np.int64)
    end = np.full(len(records), -1, np.int64)
    if len(extcorr):
        ext = extcorr["external_id"].astype(np.int64) - 1
        corr = extcorr["correlation_id"].astype(np.int64)
        pos = np.searchsorted(records, ext)
        pos_ok = np.minimum(pos, len(records) - 1)
        mine = records[pos_ok] == ext
        np.maximum.at(end, pos_ok[mine], corr[mine])
        lowest = np.full(len(records), END, np.int64)
        np.minimum.at(lowest, pos_ok[mine], corr[mine])
        start = np.where(lowest < END, lowest, -1)
    start = np.where(rows["before"] != 0, 0, start)
    bounded = rows["edge"] == EDGE_ENTER
    start = np.where(bounded, rows["bound"].astype(np.int64), start)
    end = np.where(bounded, -1, end)
    if len(exits):
        ex_rec = exits["record"].astype(np.int64)
        pos = np.minimum(np.searchsorted(records, ex_rec), len(records) - 1)
        hit = (records[pos] == ex_rec) & bounded[pos]
        end[pos[hit]] = exits["bound"][hit].astype(np.int64)
    open_at_stop = (np.asarray(ended_after(records), dtype=bool) if ended_after is not None
                    else np.zeros(len(records), dtype=bool))
    end = np.where(open_at_stop, END, end)
    keep = (start >= 0) & (end >= 0)
    return {"record": records[keep], "device": rows["device"][keep].astype(np.int64),
            "stream": rows["stream"][keep].astype(np.int64), "start": start[keep],
            "end": end[keep]}


def by_order(device, stream, correlation, intervals: dict, depth=None) -> np.ndarray:
    """Region record (-1: none) of each row enqueued on a region's device and stream strictly
    between the region's start and stop calls: the region that started last (ties: the deepest,
    `depth` per record)."""
    device = np.asarray(device, dtype=np.int64)
    stream = np.asarray(stream, dtype=np.int64)
    corr = np.asarray(correlation, dtype=np.int64)
    out = np.full(corr.size, -1, np.int64)
    iv = intervals
    if not corr.size or not len(iv["record"]):
        return out
    key = (device << 32) | stream
    rows = np.lexsort((corr, key))
    row_key, row_corr = key[rows], corr[rows]
    tie = (np.asarray(depth, np.int64)[iv["record"]] if depth is not None
           else np.zeros(len(iv["record"]), np.int64))
    for j in np.lexsort((tie, iv["start"])):  # outer first, so inner ones overwrite
        k = (iv["device"][j] << 32) | iv["stream"][j]
        lo, hi = np.searchsorted(row_key, k, "left"), np.searchsorted(row_key, k, "right")
        a = lo + np.searchsorted(row_corr[lo:hi], iv["start"][j], "right")
        b = lo + np.searchsorted(row_corr[lo:hi], iv["end"][j], "left")
        out[rows[a:b]] = iv["record"][j]
    return out


def combine(launch, device, stream, correlation, intervals: dict, depth=None):
    """(record, rule) per row: the launch rule where it matched, else the stream rule. `rule`
    holds NONE, LAUNCH or STREAM (labels: RULES[rule])."""
    launch = np.asarray(launch, dtype=np.int64)
    rule = np.where(launch >= 0, LAUNCH, NONE).astype(np.int8)
    record = launch.copy()
    todo = np.flatnonzero(launch < 0)
    if todo.size and len(intervals["record"]):
        found = by_order(np.asarray(device)[todo], np.asarray(stream)[todo],
                         np.asarray(correlation)[todo], intervals, depth)
        hit = found >= 0
        record[todo[hit]] = found[hit]
        rule[todo[hit]] = STREAM
    return record, rule
