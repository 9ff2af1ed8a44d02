"""Chrome trace export: a JSON file (gzip when the name ends in .gz) that opens in Perfetto
(ui.perfetto.dev) and chrome://tracing. docs/tracing.md describes each track.

Events are written per group (same kernel name, stream, region and launch configuration): the
group's JSON prefix is built once and the per-event timestamps are turned into fixed-width ASCII
with NumPy, so a million kernels take well under a second. Fixed width means numbers are padded
with spaces, which JSON allows and gzip removes. Events are in time order within a group; the
format does not require more (viewers sort).
"""

from __future__ import annotations

import json
import os
import threading

import numpy as np

from .._files import atomic_write
from .._tables import factorize
from .._version import __version__
from .region_clock import NO_END, subtree_spans

GPU_PID_BASE = 1 << 23  # above any Linux pid (pid_max <= 2**22)
_CHUNK_EVENTS = 1 << 16


# ---- fixed-width numbers ---------------------------------------------------------------------

def _int_digits(values: np.ndarray) -> np.ndarray:
    """Non-negative ints as right-aligned ASCII digits, one row per value (N x width uint8)."""
    v = np.asarray(values, dtype=np.int64)
    width = max(1, len(str(int(v.max())))) if v.size else 1
    out = np.empty((v.size, width), np.uint8)
    rest = v.copy()
    for k in range(width - 1, -1, -1):
        out[:, k] = 48 + rest % 10
        rest //= 10
    if width > 1:
        # leading zeros become spaces: a digit is leading while the value is below 10**(its place)
        places = 10 ** np.arange(width - 1, 0, -1, dtype=np.int64)
        out[:, : width - 1][v[:, None] < places] = 32
    return out


def _frac3(values: np.ndarray) -> np.ndarray:
    """0..999 as exactly three digits."""
    v = np.asarray(values, dtype=np.int64)
    return np.stack([48 + v // 100, 48 + v // 10 % 10, 48 + v % 10], axis=1).astype(np.uint8)


def _const(text: bytes, n: int) -> np.ndarray:
    return np.broadcast_to(np.frombuffer(text, np.uint8), (n, len(text)))


def x_events(prefix: str, ts_ns, dur_ns) -> bytes:
    """Complete ('X') events sharing `prefix` (the JSON members other than ts and dur, with a
    trailing comma), each followed by ',\\n'. Times are ns, written in µs with 3 decimals."""
    ts = np.maximum(np.asarray(ts_ns, dtype=np.int64), 0)
    dur = np.maximum(np.asarray(dur_ns, dtype=np.int64), 0)
    n = ts.size
    if n == 0:
        return b""
    tq, tr = np.divmod(ts, 1000)
    dq, dr = np.divmod(dur, 1000)
    rows = np.hstack([
        _const(b'{"ph":"X",' + prefix.encode() + b'"ts":', n), _int_digits(tq), _const(b".", n),
        _frac3(tr), _const(b',"dur":', n), _int_digits(dq), _const(b".", n), _frac3(dr),
        _const(b"},\n", n),
    ])
    return rows.tobytes()


def _us(ns: int) -> str:
    ns = max(int(ns), 0)
    return f"{ns // 1000}.{ns % 1000:03d}"


# ---- grouping --------------------------------------------------------------------------------

def _codes(values) -> np.ndarray:
    """Codes of an object array by value, in order of first appearance."""
    return factorize(values)[0]


def _pack(columns) -> list:
    """Integer columns packed into as few int64 keys as their ranges allow (exactly: equal keys
    mean equal columns)."""
    keys, key, used = [], None, 0
    for col in columns:
        c = np.asarray(col).astype(np.int64)
        lo = int(c.min()) if c.size else 0
        c = c - lo
        bits = max(1, int(c.max()).bit_length()) if c.size else 1
        if key is not None and used + bits <= 62:
            key = (key << bits) | c
            used += bits
        else:
            if key is not None:
                keys.append(key)
            key, used = c, bits
    keys.append(key)
    return keys


def _combine(*columns) -> np.ndarray:
    """One int64 code per row, equal exactly when all columns are equal."""
    keys = _pack(columns)
    code = keys[0]
    for key in keys[1:]:
        _, a = np.unique(code, return_inverse=True)
        _, b = np.unique(key, return_inverse=True)
        code = a.reshape(-1) * (int(b.max()) + 1) + b.reshape(-1)
    return code


def _groups(code: np.ndarray, ts: np.ndarray):
    """Yields (first row, rows in time order) for every distinct code, in batches of at most
    _CHUNK_EVENTS rows so that memory stays bounded."""
    order = np.lexsort((ts, code))
    c = code[order]
    bounds = np.flatnonzero(np.r_[True, c[1:] != c[:-1], True])
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        for lo in range(a, b, _CHUNK_EVENTS):
            yield order[a], order[lo:min(b, lo + _CHUNK_EVENTS)]


def _columns(records, keep):
    """Column accessor for the rows of a structured array where `keep` holds, copying only the
    columns asked for (never whole rows: copying object fields is slow)."""
    if keep.all():
        return lambda f: records[f]
    idx = np.flatnonzero(keep)
    return lambda f: records[f][idx]


# ---- tracks ----------------------------------------------------------------------------------

_KERNEL_CONFIG = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                  "registers_per_thread", "static_smem", "dynamic_smem")


def _kernel_prefix(col, i, details: bool, nccl_bytes=None) -> str:
    region = col("region")[i]
    head = (f'"cat":"kernel","name":{json.dumps(col("name")[i])},'
            f'"pid":{GPU_PID_BASE + int(col("device")[i])},"tid":{int(col("stream")[i])},')
    args = {}
    if details:
        occ = float(col("occupancy")[i])
        args = {"grid": [int(col(f)[i]) for f in _KERNEL_CONFIG[:3]],
                "block": [int(col(f)[i]) for f in _KERNEL_CONFIG[3:6]],
                "regs": int(col("registers_per_thread")[i]),
                "smem": [int(col("static_smem")[i]), int(col("dynamic_smem")[i])],
                "occ": round(100 * occ, 1) if np.isfinite(occ) else None}
    if region:
        args["region"] = region
    if _python_line(col, i):
        args["python"] = _python_line(col, i)
    if nccl_bytes is not None and nccl_bytes[i] >= 0:
        args["nccl_bytes"] = int(nccl_bytes[i])  # from torch's NCCL Flight Recorder (merge reads it)
    return head + (f'"args":{json.dumps(args, separators=(",", ":"))},' if args else "")


def _python_line(col, i) -> str:
    """The row's python_line ('' for arrays without the column)."""
    try:
        return col("python_line")[i]
    except (KeyError, ValueError):
        return ""


def _python_codes(records, col):
    """Codes of the python_line column, so that rows from different lines are not merged."""
    return [_codes(col("python_line"))] if "python_line" in records.dtype.names else []


def _kernel_events(kernels, base: int, details: bool, codes=None, nccl_bytes=None):
    """X events of kernels. `codes` may give ('name', 'region') integer codes per kernel, which
    spares factorizing the object columns; `nccl_bytes` the collective size per kernel (-1: none)."""
    keep = kernels["start_ns"] > 0
    if not keep.any():
        return
    col = _columns(kernels, keep)
    codes = codes or {}
    name = codes["name"][keep] if "name" in codes else _codes(col("name"))
    region = codes["region"][keep] if "region" in codes else _codes(col("region"))
    columns = [name, region, col("device"), col("stream"), *_python_codes(kernels, col)]
    sizes = None if nccl_bytes is None else np.asarray(nccl_bytes, dtype=np.int64)[keep]
    if sizes is not None and (sizes >= 0).any():
        columns.append(sizes)  # a size is part of what events of one prefix share
    else:
        sizes = None
    if details:
        columns += [col(f) for f in _KERNEL_CONFIG]
    start = col("start_ns")
    duration = col("duration_ns")
    for first, rows in _groups(_combine(*columns), start):
        yield x_events(_kernel_prefix(col, first, details, sizes), start[rows] - base, duration[rows])


def _copy_events(records, base: int, cat: str, details: bool):
    keep = records["start_ns"] > 0
    if not keep.any():
        return
    col = _columns(records, keep)
    label = col("kind") if cat == "memcpy" else col("memory_kind")
    columns = [_codes(label), _codes(col("region")), col("device"), col("stream"),
               *_python_codes(records, col)]
    if details:
        columns.append(col("bytes"))
    start = col("start_ns")
    for i, rows in _groups(_combine(*columns), start):
        name = f"Memcpy {label[i]}" if cat == "memcpy" else f"Memset ({label[i]})"
        args = {"bytes": int(col("bytes")[i])} if details else {}
        if col("region")[i]:
            args["region"] = col("region")[i]
        if _python_line(col, i):
            args["python"] = _python_line(col, i)
        prefix = (f'"cat":"{cat}","name":{json.dumps(name)},'
                  f'"pid":{GPU_PID_BASE + int(col("device")[i])},"tid":{int(col("stream")[i])},')
        if args:
            prefix += f'"args":{json.dumps(args, separators=(",", ":"))},'
        yield x_events(prefix, start[rows] - base, col("duration_ns")[rows])


def host_regions(regions, offset_ns: int, t0: int, t1: int):
    """Region records (gpuprofile.records()) that overlap [t0, t1] on the CUPTI clock, with their
    start/end moved there; open regions end at t1."""
    if regions is None or not len(regions):
        return None, None, None
    start = regions["host_start_ns"] + offset_ns
    end = np.where(regions["open"], t1, regions["host_end_ns"] + offset_ns)
    keep = (end >= t0) & (start <= t1)
    return regions[keep], start[keep], end[keep]


def _host_events(regions, start, end, base: int, pid: int):
    if regions is None or not len(regions):
        return
    names = regions["name"]
    threads = regions["thread"]
    for first, rows in _groups(_combine(_codes(names), threads), start):
        prefix = f'"cat":"region","name":{json.dumps(names[first])},"pid":{pid},"tid":{int(threads[first])},'
        yield x_events(prefix, start[rows] - base, end[rows] - start[rows])


def gpu_region_spans(kernels, regions):
    """For each region record with kernels (its own or its descendants'), on each device: the
    span from the first kernel's start to the last kernel's end. Returns (record, device, start,
    end) arrays."""
    empty = (np.empty(0, np.int64),) * 4
    if regions is None or not len(regions):
        return empty
    n = len(regions)
    rec_all = kernels["region_record"]
    keep = (rec_all >= 0) & (rec_all < n) & (kernels["start_ns"] > 0)
    if not keep.any():
        return empty
    rec, dev = rec_all[keep], kernels["device"][keep]
    start, end = kernels["start_ns"][keep], kernels["end_ns"][keep]
    out = []
    for d in np.unique(dev):
        on = dev == d
        lo, hi = subtree_spans(regions, rec[on], start[on], end[on])
        has = np.flatnonzero(hi != NO_END)
        out.append((has, np.full(has.size, d, np.int64), lo[has], hi[has]))
    return tuple(np.concatenate(parts) for parts in zip(*out, strict=True))


def _gpu_region_events(kernels, regions, base: int):
    rec, dev, start, end = gpu_region_spans(kernels, regions)
    events = []
    for r, d, s, e in zip(rec.tolist(), dev.tolist(), start.tolist(), end.tolist(), strict=True):
        name = json.dumps(regions["name"][r])
        common = f'"cat":"region (GPU)","name":{name},"id":{r},"pid":{GPU_PID_BASE + d},"tid":0'
        events.append(f'{{"ph":"b",{common},"ts":{_us(s - base)}}},\n'
                      f'{{"ph":"e",{common},"ts":{_us(e - base)}}},\n')
    return "".join(events).encode()


def _memory_events(memory, base: int) -> bytes:
    if memory is None or not len(memory):
        return b""
    lines = []
    for ts, dev, used in zip(memory["timestamp_ns"].tolist(), memory["device"].tolist(),
                             memory["bytes_in_use"].tolist(), strict=True):
        lines.append(f'{{"ph":"C","name":"device memory","pid":{GPU_PID_BASE + dev},'
                     f'"ts":{_us(ts - base)},"args":{{"bytes":{used}}}}},\n')
    return "".join(lines).encode()


def _sample_events(samples, base: int) -> bytes:
    """PM-sampling results (gpuprofile.sample()) as counter tracks of their device's GPU process:
    one counter per result, one value per metric and sample, stamped at the sample's start."""
    lines = []
    for result in samples or ():
        rows = result.samples
        if not len(rows):
            continue
        pid = GPU_PID_BASE + int(result.info.get("device", 0))
        fields = [result.fields[m] for m in result.metrics]
        columns = [rows[f].tolist() for f in fields]
        for i, ts in enumerate(rows["start_ns"].tolist()):
            args = ",".join(f'"{f}":{json.dumps(col[i])}' for f, col in zip(fields, columns, strict=True))
            lines.append(f'{{"ph":"C","name":"PM sampling","pid":{pid},"ts":{_us(ts - base)},'
                         f'"args":{{{args}}}}},\n')
    return "".join(lines).encode()


def _metadata(kernels, memcpy, memset, memory, regions, pid: int, label: str = "") -> list:
    """Process and thread names; `label` ('rank 1 / ' in a multi-rank job) leads process names."""
    devices = set()
    streams = set()
    for recs in (kernels, memcpy, memset):
        if recs is not None and len(recs):
            devices.update(recs["device"].tolist())
            streams.update(zip(recs["device"].tolist(), recs["stream"].tolist(), strict=True))
    if memory is not None and len(memory):
        devices.update(memory["device"].tolist())
    events = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"{label}Host (pid {pid})"}},
              {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": 0}}]
    names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
    for tid in sorted(set(regions["thread"].tolist()) if regions is not None else ()):
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                       "args": {"name": f"{names.get(tid, 'thread')} ({tid})"}})
    for dev in sorted(devices):
        gpid = GPU_PID_BASE + dev
        events += [{"ph": "M", "name": "process_name", "pid": gpid, "args": {"name": f"{label}GPU {dev}"}},
                   {"ph": "M", "name": "process_sort_index", "pid": gpid,
                    "args": {"sort_index": 1 + dev}}]
    for dev, stream in sorted(streams):
        events += [{"ph": "M", "name": "thread_name", "pid": GPU_PID_BASE + dev, "tid": stream,
                    "args": {"name": f"stream {stream}"}},
                   {"ph": "M", "name": "thread_sort_index", "pid": GPU_PID_BASE + dev,
                    "tid": stream, "args": {"sort_index": stream}}]
    return events


def _label(other: dict) -> str:
    """'rank r / ' when the trace's metadata says it is one rank of several, else ''."""
    world = other.get("world_size")
    return f"rank {other.get('rank')} / " if isinstance(world, int) and world > 1 else ""


def _base_time(t0: int, *arrays) -> int:
    """The earliest timestamp of the trace, so that every ts is >= 0."""
    base = t0
    for a in arrays:
        a = a[a > 0] if a is not None else None
        if a is not None and a.size:
            base = min(base, int(a.min()))
    return base


def write_chrome_trace(path, *, kernels, memcpy, memset, memory, regions, offset_ns: int,
                       t0_ns: int, t1_ns: int, details: bool = True, metadata=None,
                       kernel_codes=None, samples=None, nccl_bytes=None) -> str:
    """Write the trace to `path` (see the module docstring). Times of kernels, copies, sets,
    memory events and PM samples (`samples`: gpuprofile.sample() results) are CUPTI ns; region
    records are host ns and move by `offset_ns`.
    `kernel_codes` optionally gives integer codes of the kernels' names and regions
    ({'name': ..., 'region': ...}); `nccl_bytes` the size of each NCCL kernel's collective (-1
    where unknown), written as the kernel's nccl_bytes argument. The file is written atomically
    (gpuprofile._files), so a failed export leaves no partial file."""
    path = os.fspath(path)
    all_regions = regions
    regions, r_start, r_end = host_regions(regions, offset_ns, t0_ns, t1_ns)
    base = _base_time(t0_ns, kernels["start_ns"], memcpy["start_ns"], memset["start_ns"],
                      memory["timestamp_ns"] if memory is not None else None, r_start)
    pid = os.getpid()
    other = {"gpuprofile": __version__, "time_zero_cupti_ns": base, **(metadata or {})}
    try:
        with atomic_write(path, "wb", gzip=path.endswith(".gz"), buffering=1 << 20) as f:
            f.write(b'{"displayTimeUnit":"ns","otherData":' + json.dumps(other).encode()
                    + b',"traceEvents":[\n')
            for event in _metadata(kernels, memcpy, memset, memory, regions, pid, _label(other)):
                f.write(json.dumps(event, separators=(",", ":")).encode() + b",\n")
            for block in _host_events(regions, r_start, r_end, base, pid):
                f.write(block)
            for block in _kernel_events(kernels, base, details, kernel_codes, nccl_bytes):
                f.write(block)
            for block in _copy_events(memcpy, base, "memcpy", details):
                f.write(block)
            for block in _copy_events(memset, base, "memset", details):
                f.write(block)
            f.write(_gpu_region_events(kernels, all_regions, base))
            f.write(_memory_events(memory, base))
            f.write(_sample_events(samples, base))
            # the last event carries no trailing comma
            f.write(b'{"ph":"M","name":"process_labels","pid":%d,"args":{"labels":"gpuprofile"}}'
                    b"\n]}\n" % pid)
    except OSError as exc:
        if exc.errno is None:
            raise
        raise type(exc)(exc.errno, f"cannot write the Chrome trace ({exc.strerror})", path) from None
    return path
