"""Which gpuprofile region each kernel, copy and set of a trace belongs to. Pure functions.

Two rules, tried in order (the `attribution` column of Profile.kernels/memcpy/memset says which
one decided each row):

- "launch": the CUDA call that enqueued the work ran on a thread while the region was its
  innermost open region. CUPTI's external correlation records tie the call to the region.
- "stream": the work ran on the GPU inside the region's interval, on the region's stream: after
  the region's start event and before its stop event. This catches what other threads enqueue
  for the region (autograd runs backward on its own threads; a worker thread may launch on the
  region's stream). CUPTI's CUDA_EVENT records with device timestamps put the two events on the
  trace's clock; the region's own events are the first and last event records carrying its
  external id (it is pushed before the start event is recorded and popped after the stop event).
  With several candidates the region that started last wins (nested regions: the innermost).

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


def _empty_intervals() -> dict:
    z = np.empty(0, np.int64)
    return {"record": z, "device": z, "stream": z, "start": z, "end": z}


def region_intervals(events, extcorr, t0: int, t1: int, began_before=None) -> dict:
    """Each traced region's interval on the GPU: arrays record, device, stream, start, end (CUPTI
    clock). `events`: CUDA_EVENT records (gpuprofile._activity.EVENT_RAW). A region with a
    single event was open when tracing started (the event is its stop; it starts at t0) or when
    it stopped (the event is its start; it ends at t1): `began_before(records)` says which
    (default: still open at the end)."""
    if not len(events):
        return _empty_intervals()
    rec = attribute(events["correlation_id"], extcorr)
    keep = (rec >= 0) & (events["timestamp"] > 0)
    ev, rec = events[keep], rec[keep]
    if not len(ev):
        return _empty_intervals()
    order = np.lexsort((ev["correlation_id"], rec))
    ev, rec = ev[order], rec[order]
    cut = rec[1:] != rec[:-1]
    first = np.flatnonzero(np.r_[True, cut])
    last = np.flatnonzero(np.r_[cut, True])
    records = rec[first]
    start = ev["timestamp"][first].astype(np.int64)
    end = ev["timestamp"][last].astype(np.int64)
    single = first == last
    before = (np.asarray(began_before(records), dtype=bool) if began_before is not None
              else np.zeros(len(records), dtype=bool))
    start = np.where(single & before, t0, start)
    end = np.where(single & ~before, t1, end)
    return {"record": records, "device": ev["device"][first].astype(np.int64),
            "stream": ev["stream"][first].astype(np.int64), "start": start, "end": end}


def by_interval(device, stream, start, end, intervals: dict, depth=None) -> np.ndarray:
    """Region record (-1: none) of each row whose [start, end] lies inside a region interval on the
    same device and stream: the interval that starts last (ties: the deepest, `depth` per
    record)."""
    device = np.asarray(device, dtype=np.int64)
    stream = np.asarray(stream, dtype=np.int64)
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    out = np.full(start.size, -1, np.int64)
    iv = intervals
    if not start.size or not len(iv["record"]):
        return out
    key = (device << 32) | stream
    rows = np.lexsort((start, key))
    row_key, row_start = key[rows], start[rows]
    tie = (np.asarray(depth, np.int64)[iv["record"]] if depth is not None
           else np.zeros(len(iv["record"]), np.int64))
    for j in np.lexsort((tie, iv["start"])):  # outer first, so inner ones overwrite
        k = (iv["device"][j] << 32) | iv["stream"][j]
        lo, hi = np.searchsorted(row_key, k, "left"), np.searchsorted(row_key, k, "right")
        a = lo + np.searchsorted(row_start[lo:hi], iv["start"][j], "left")
        b = lo + np.searchsorted(row_start[lo:hi], iv["end"][j], "right")
        idx = rows[a:b]
        out[idx[end[idx] <= iv["end"][j]]] = iv["record"][j]
    return out


def combine(launch, device, stream, start, end, intervals: dict, depth=None):
    """(record, rule) per row: the launch rule where it matched, else the stream rule. `rule`
    holds NONE, LAUNCH or STREAM (labels: RULES[rule])."""
    launch = np.asarray(launch, dtype=np.int64)
    rule = np.where(launch >= 0, LAUNCH, NONE).astype(np.int8)
    record = launch.copy()
    todo = np.flatnonzero(launch < 0)
    if todo.size and len(intervals["record"]):
        found = by_interval(np.asarray(device)[todo], np.asarray(stream)[todo],
                            np.asarray(start)[todo], np.asarray(end)[todo], intervals, depth)
        hit = found >= 0
        record[todo[hit]] = found[hit]
        rule[todo[hit]] = STREAM
    return record, rule
