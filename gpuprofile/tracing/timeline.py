"""The device-memory timeline, pure functions over MEMORY2 records
(gpuprofile.tracing.activity.MEMORY_RAW): time order, sizes of frees, bytes in use per device,
and peaks inside windows (memory.track(), memory=True regions, profile().memory_timeline).
No device, no CUPTI: tested on synthetic records."""

from __future__ import annotations

KIND_NAMES = ("unknown", "pageable", "pinned", "device", "array", "managed", "device_static",
              "managed_static")
# Memory kinds that occupy device memory and count toward bytes in use.
DEVICE_KINDS = (3, 4, 6)


def is_device_kind(kinds):
    """Which timeline rows (by their 'kind' names) occupy device memory."""
    import numpy as np

    return np.isin(np.asarray(kinds).astype(str), [KIND_NAMES[k] for k in DEVICE_KINDS])


def timeline_dtype():
    import numpy as np

    return np.dtype([
        ("timestamp_ns", "<i8"), ("op", object), ("kind", object), ("device", "<i4"),
        ("address", "<u8"), ("bytes", "<u8"), ("delta", "<i8"), ("bytes_in_use", "<i8"),
        ("stream", "<u4"), ("is_async", "?"), ("correlation_id", "<u4"), ("region", object),
        ("region_record", "<i8"),
    ])


def build_timeline(raw, region_record=None, region_names=None):
    """The timeline of MEMORY2 records `raw` (gpuprofile.tracing.activity.MEMORY_RAW), in time order.

    delta is +bytes for an allocation and -bytes for a free (a free reported with 0 bytes takes
    the size of the allocation at the same address); bytes_in_use is the running sum of the
    deltas of device kinds, per device. Pure: no device needed."""
    import numpy as np

    order = np.argsort(raw["timestamp"], kind="stable")
    r = raw[order]
    out = np.zeros(len(r), dtype=timeline_dtype())
    out["timestamp_ns"] = r["timestamp"].astype(np.int64)
    is_alloc = r["operation"] == 1
    out["op"] = np.where(is_alloc, "alloc", "free").astype(object)
    kinds = np.asarray(KIND_NAMES + ("unknown",), dtype=object)
    out["kind"] = kinds[np.minimum(r["memory_kind"], len(KIND_NAMES))]
    out["device"] = r["device"].astype(np.int32)
    out["address"] = r["address"]
    size = r["bytes"].astype(np.int64)
    _fill_free_sizes(size, is_alloc, r["address"])
    out["bytes"] = size
    out["delta"] = np.where(is_alloc, size, -size)
    out["stream"] = r["stream"]
    out["is_async"] = r["is_async"].astype(bool)
    out["correlation_id"] = r["correlation_id"]
    counted = np.isin(r["memory_kind"], DEVICE_KINDS)
    step = np.where(counted, out["delta"], 0)
    for dev in np.unique(out["device"]):
        m = out["device"] == dev
        out["bytes_in_use"][m] = np.cumsum(step[m])
    recs = np.full(len(r), -1, np.int64) if region_record is None else np.asarray(region_record)[order]
    out["region_record"] = recs
    out["region"] = label_regions(recs, region_names)
    return out


def _fill_free_sizes(size, is_alloc, address) -> None:
    """Frees reported without a size get the size of the allocation at their address."""
    live = {}
    for k in range(len(size)):
        a = int(address[k])
        if is_alloc[k]:
            live[a] = int(size[k])
        else:
            if size[k] == 0:
                size[k] = live.get(a, 0)
            live.pop(a, None)


def label_regions(records, names):
    """Region names for record indices (-1 or unknown index -> '')."""
    import numpy as np

    records = np.asarray(records, dtype=np.int64)
    table = np.asarray(list(names if names is not None else []) + [""], dtype=object)
    idx = np.where((records >= 0) & (records < len(table) - 1), records, len(table) - 1)
    return table[idx]


def peaks_in_windows(timeline, devices, starts, ends) -> list:
    """For each window [start, end] on `device`: (bytes in use at entry, peak bytes in use inside
    the window). Pure; `timeline` is build_timeline's output (time-ordered)."""
    import numpy as np

    out = []
    for dev, start, end in zip(devices, starts, ends, strict=True):
        m = timeline["device"] == dev
        ts, used = timeline["timestamp_ns"][m], timeline["bytes_in_use"][m]
        a = int(np.searchsorted(ts, start, side="left"))
        b = int(np.searchsorted(ts, end, side="right"))
        entry = int(used[a - 1]) if a > 0 else 0
        peak = max(entry, int(used[a:b].max())) if b > a else entry
        out.append((entry, peak))
    return out


def region_memory(timeline, records, offset_ns: int, window=None) -> list:
    """Per-name memory peaks of the memory=True regions in `records` (gpuprofile.records()),
    whose host times are moved into the timeline's clock by adding `offset_ns`. Regions on a
    host clock (no device) are left out; so are regions outside `window` (t0, t1) if given.
    Rows: region, instances, peak_bytes, peak_above_entry_bytes (largest over instances),
    allocations and allocated_bytes (device allocations inside the instances)."""
    import numpy as np

    if records is None or not len(records) or "memory" not in records.dtype.names:
        return []
    mine = records[records["memory"] & (records["device"] >= 0)]
    if not len(mine):
        return []
    starts = mine["host_start_ns"] + offset_ns
    ends = np.where(mine["open"], np.iinfo(np.int64).max, mine["host_end_ns"] + offset_ns)
    if window is not None:
        keep = (ends >= window[0]) & (starts <= window[1])
        mine, starts, ends = mine[keep], starts[keep], ends[keep]
    peaks = peaks_in_windows(timeline, mine["device"], starts, ends)
    device_allocs = (timeline["op"] == "alloc") & is_device_kind(timeline["kind"])
    rows = {}
    for rec, start, end, (entry, peak) in zip(mine, starts, ends, peaks, strict=True):
        in_window = ((timeline["timestamp_ns"] >= start) & (timeline["timestamp_ns"] <= end)
                     & (timeline["device"] == rec["device"]) & device_allocs)
        row = rows.setdefault(rec["name"], dict(region=rec["name"], instances=0, peak_bytes=0,
                                                peak_above_entry_bytes=0, allocations=0,
                                                allocated_bytes=0))
        row["instances"] += 1
        row["peak_bytes"] = max(row["peak_bytes"], peak)
        row["peak_above_entry_bytes"] = max(row["peak_above_entry_bytes"], peak - entry)
        row["allocations"] += int(in_window.sum())
        row["allocated_bytes"] += int(timeline["bytes"][in_window].sum())
    return list(rows.values())
