"""The merged Perfetto/Chrome trace, written as it is made: one rank at a time, each rank read
again from its file (rank_input.py), moved onto the merged time line and written in blocks, so
that memory holds one rank, never the whole output. A time window (ns on the merged line) keeps
only the events that overlap it.

Each rank becomes process `rank` (named "rank r (GPU d, host h)"); its host threads keep their
ids, and its GPU streams become threads "GPU d stream s" (tid GPU_PID_BASE + d * STREAM_TID + s).
NCCL kernels are named by their collective, with bytes, wait, transfer time and bandwidth in
their arguments (merge.py computes them; `notes` maps a kernel's row in its file to them).
"""

from __future__ import annotations

import json

import numpy as np

from .._files import atomic_write
from .chrome_trace import GPU_PID_BASE, _combine, _groups, x_events
from .columns import COLUMNS
from .rank_input import _ns, is_parquet, read_json, read_parquet

STREAM_TID = 1 << 20  # GPU d's stream s becomes thread GPU_PID_BASE + d * STREAM_TID + s
_CONFIG = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")


def _dumps(e) -> bytes:
    return json.dumps(e, separators=(",", ":")).encode() + b",\n"


def _write(path: str, events) -> None:
    """Write `events` (dicts, or bytes blocks of events each ending in ',\\n') as a Chrome
    trace, atomically (gzip when `path` ends in .gz). The last block is held back so that its
    trailing comma can go."""
    with atomic_write(path, "wb", gzip=path.endswith(".gz"), buffering=1 << 20) as f:
        f.write(b'{"displayTimeUnit":"ns","traceEvents":[\n')
        pending = b""
        for item in events:
            block = item if isinstance(item, bytes) else _dumps(item)
            if not block:
                continue
            if pending:
                f.write(pending)
            pending = block
        f.write(pending[:-2] + b"\n" if pending else b"")
        f.write(b"]}\n")


def nccl_name(collective: str, algorithm: str, protocol: str) -> str:
    extra = "/".join(x for x in (algorithm, protocol) if x)
    return f"NCCL {collective}" + (f" ({extra})" if extra else "")


def rank_header(r) -> list:
    where = [f"GPU {','.join(map(str, r.gpus))}"] if r.gpus else []
    if r.meta.get("hostname"):
        where.append(f"host {r.meta['hostname']}")
    name = f"rank {r.rank}" + (f" ({', '.join(where)})" if where else "")
    return [{"ph": "M", "name": "process_name", "pid": r.rank, "args": {"name": name}},
            {"ph": "M", "name": "process_sort_index", "pid": r.rank, "args": {"sort_index": r.rank}}]


# ---- a Chrome-trace rank: its events one by one ----------------------------------------------

def _remap(r, event) -> dict | None:
    """One rank's event moved onto its merged process, thread and time; None to drop it."""
    e = dict(event)
    pid = e.get("pid", 0)
    gpu = pid - GPU_PID_BASE if isinstance(pid, int) and pid >= GPU_PID_BASE else None
    if e.get("ph") == "M" and e.get("name") in ("process_name", "process_sort_index", "process_labels"):
        return None
    e["pid"] = r.rank
    if gpu is not None:
        tid = e.get("tid", 0)
        e["tid"] = GPU_PID_BASE + gpu * STREAM_TID + (tid if isinstance(tid, int) else 0)
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            e["args"] = {"name": f"GPU {gpu} {e['args']['name']}"}
        elif e.get("ph") == "M" and e.get("name") == "thread_sort_index":
            e["args"] = {"sort_index": 1000 * (gpu + 1) + int(e["args"]["sort_index"])}
        elif e.get("ph") == "C":
            e["name"] = f"{e['name']} (GPU {gpu})"
    if "id" in e:
        e["id"] = f"{r.rank}:{e['id']}"
    if "ts" in e:
        e["ts"] = (_ns(e["ts"]) + r.shift_ns) / 1000
    return e


def _span_keep(events, shift: int, window) -> set:
    """Ids of b/e pairs whose span overlaps the window (a pair is kept or dropped whole)."""
    spans: dict = {}
    for e in events:
        if e.get("ph") in ("b", "e") and "ts" in e:
            t = _ns(e["ts"]) + shift
            lo, hi = spans.get(e.get("id"), (t, t))
            spans[e.get("id")] = (min(lo, t), max(hi, t))
    return {k for k, (lo, hi) in spans.items() if hi >= window[0] and lo <= window[1]}


def json_rank(r, notes: dict, window=None):
    """Events of a Chrome-trace rank, remapped, NCCL kernels annotated, filtered by window."""
    meta, events = read_json(r.path)
    del meta
    keep_spans = _span_keep(events, r.shift_ns, window) if window is not None else None
    for i, x in enumerate(events):
        if window is not None and x.get("ph") != "M":
            t = _ns(x["ts"]) + r.shift_ns
            if x.get("ph") in ("b", "e"):
                if x.get("id") not in keep_spans:
                    continue
            elif t > window[1] or t + _ns(x.get("dur") or 0) < window[0]:
                continue
        e = _remap(r, x)
        if e is None:
            continue
        note = dict(notes[i]) if i in notes else None
        if note is not None:
            args = e.setdefault("args", {})
            args.setdefault("kernel", e.get("name"))
            e["name"] = note.pop("_name")
            args.update(note)
        yield e


# ---- a Parquet rank: its columns, in blocks --------------------------------------------------

def _tid(device, stream) -> np.ndarray:
    return GPU_PID_BASE + np.asarray(device, np.int64) * STREAM_TID + np.asarray(stream, np.int64)


def _label(c, name, i) -> str:
    codes, labels = c[name]
    return labels[codes[i]]


def _gpu_prefix(c, i, rank: int, cat: str, name: str) -> str:
    args = {}
    if cat == "kernel":
        occ = float(c["occupancy"][i])
        args = {"grid": [int(c[f][i]) for f in _CONFIG[:3]],
                "block": [int(c[f][i]) for f in _CONFIG[3:]],
                "regs": int(c["registers_per_thread"][i]),
                "smem": [int(c["static_smem"][i]), int(c["dynamic_smem"][i])],
                "occ": round(100 * occ, 1) if np.isfinite(occ) else None}
    elif c["bytes"][i] >= 0:
        args = {"bytes": int(c["bytes"][i])}
    for key, col in (("region", "region"), ("python", "python_line")):
        if _label(c, col, i):
            args[key] = _label(c, col, i)
    tid = int(_tid(c["device"][i], c["stream"][i]))
    head = f'"cat":"{cat}","name":{json.dumps(name)},"pid":{rank},"tid":{tid},'
    return head + (f'"args":{json.dumps(args, separators=(",", ":"))},' if args else "")


def _key(column) -> np.ndarray:
    """An integer column to group by: string codes, integers, or a float's bits."""
    a = np.asarray(column[0] if isinstance(column, tuple) else column)
    return a.astype(np.float32).view(np.int32) if a.dtype.kind == "f" else a


def _x_blocks(c, rows, key_columns, prefix, base: int):
    """X events of `rows`, grouped by equal key columns (one prefix per group)."""
    if not rows.size:
        return
    keys = _combine(*[_key(c[k])[rows] for k in key_columns])
    start = c["start_ns"][rows]
    dur = c["end_ns"][rows] - start
    for first, part in _groups(keys, start):
        yield x_events(prefix(int(rows[first])), start[part] + base, dur[part])


def _threads(c, rank: int, rows_gpu, rows_host) -> list:
    out = []
    pairs = sorted(set(zip(c["device"][rows_gpu].tolist(), c["stream"][rows_gpu].tolist(), strict=True)))
    for d, s in pairs:
        tid = int(_tid(d, s))
        out += [{"ph": "M", "name": "thread_name", "pid": rank, "tid": tid,
                 "args": {"name": f"GPU {d} stream {s}"}},
                {"ph": "M", "name": "thread_sort_index", "pid": rank, "tid": tid,
                 "args": {"sort_index": 1000 * (d + 1) + s}}]
    for t in sorted(set(c["thread"][rows_host].tolist())):
        out.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": t,
                    "args": {"name": f"thread ({t})"}})
    return out


def parquet_rank(r, notes: dict, window=None):
    """Blocks of a Parquet rank's events, on the merged time line, filtered by window."""
    _, c = read_parquet(r.path, [name for name, _ in COLUMNS])
    kind_codes, kinds = c["kind"]
    shift = r.shift_ns
    keep = np.ones(kind_codes.size, bool)
    if window is not None:
        keep = (c["end_ns"] + shift >= window[0]) & (c["start_ns"] + shift <= window[1])

    def rows_of(kind):
        return np.flatnonzero((kind_codes == (kinds.index(kind) if kind in kinds else -1)) & keep)

    kernels, host = rows_of("kernel"), rows_of("region")
    copies = {k: rows_of(k) for k in ("memcpy", "memset")}
    yield from _threads(c, r.rank, np.concatenate([kernels, *copies.values()]), host)
    noted = np.zeros(kind_codes.size, bool)
    noted[np.fromiter(notes, np.int64, len(notes))] = True
    plain = kernels[~noted[kernels]]
    config = ["name", "region", "python_line", "device", "stream", *_CONFIG,
              "registers_per_thread", "static_smem", "dynamic_smem", "occupancy"]
    yield from _x_blocks(c, plain, config, lambda i: _gpu_prefix(
        c, i, r.rank, "kernel", _label(c, "name", i)), shift)
    for i in kernels[noted[kernels]].tolist():
        note = dict(notes[i])
        name = note.pop("_name")
        e = {"ph": "X", "cat": "kernel", "name": name, "pid": r.rank,
             "tid": int(_tid(c["device"][i], c["stream"][i])),
             "ts": (int(c["start_ns"][i]) + shift) / 1000,
             "dur": (int(c["end_ns"][i]) - int(c["start_ns"][i])) / 1000,
             "args": {"kernel": _label(c, "name", i), "region": _label(c, "region", i), **note}}
        yield e
    for cat, rows in copies.items():
        yield from _x_blocks(c, rows, ["name", "region", "python_line", "device", "stream", "bytes"],
                             lambda i, cat=cat: _gpu_prefix(c, i, r.rank, cat, _label(c, "name", i)),
                             shift)
    yield from _x_blocks(c, host, ["name", "thread"], lambda i: (
        f'"cat":"region","name":{json.dumps(_label(c, "name", i))},"pid":{r.rank},'
        f'"tid":{int(c["thread"][i])},'), shift)
    yield from _spans(c, rows_of("region (GPU)"), r.rank, shift)
    yield from _memory(c, rows_of("memory"), r.rank, shift)


def _spans(c, rows, rank: int, shift: int):
    for i in rows.tolist():
        common = {"cat": "region (GPU)", "name": _label(c, "name", i),
                  "id": f"{rank}:{int(c['record'][i])}", "pid": rank,
                  "tid": int(_tid(c["device"][i], 0))}
        yield {"ph": "b", **common, "ts": (int(c["start_ns"][i]) + shift) / 1000}
        yield {"ph": "e", **common, "ts": (int(c["end_ns"][i]) + shift) / 1000}


def _memory(c, rows, rank: int, shift: int):
    for i in rows.tolist():
        yield {"ph": "C", "name": f"device memory (GPU {int(c['device'][i])})", "pid": rank,
               "tid": int(_tid(c["device"][i], 0)), "ts": (int(c["start_ns"][i]) + shift) / 1000,
               "args": {"bytes": int(c["bytes_in_use"][i])}}


def rank_events(r, notes: dict, window=None):
    """The merged trace's events of rank `r` (a RankSummary with its shift), either format."""
    yield from rank_header(r)
    yield from (parquet_rank if is_parquet(r.path) else json_rank)(r, notes, window)
