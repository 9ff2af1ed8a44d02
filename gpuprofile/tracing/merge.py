"""gpuprofile.merge_traces: per-rank Chrome traces (trace.rank{r}.json.gz, written by
Profile.export_chrome_trace in each rank) into one trace with one process per rank, on one
aligned time line, with NCCL kernels named by their collective and given bytes and bandwidth,
plus a straggler table per step. docs/distributed.md explains the output; align.py the clocks.

Each rank becomes process `rank` (named "rank r (GPU d, host h)"); its host threads keep their
ids, and its GPU streams become threads "GPU d stream s". The whole output is built in memory.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np

from .._files import atomic_write
from .._format import html_table, text_table
from .._tables import Tabular
from . import nccl
from .align import collective_corrections, wall_shifts
from .chrome_trace import GPU_PID_BASE
from .straggler import RankTimes, StragglerTable, straggler_rows
from .trace_input import TraceFileError, read_trace

__all__ = ["MergeResult", "TraceFileError", "merge_traces", "read_trace"]

COLLECTIVE_REGION = "collective "  # gpuprofile.distributed.collective()'s region names
_STREAM_TID = 1 << 20  # GPU d's stream s becomes thread GPU_PID_BASE + d * _STREAM_TID + s


def _bytes_of(region: str, op: str):
    """Bytes named by a collective() region, when it names the same collective."""
    if not region.startswith(COLLECTIVE_REGION):
        return None
    parts = region[len(COLLECTIVE_REGION):].split()
    if len(parts) == 3 and parts[2] == "B" and parts[1].isdigit() and nccl.canonical_op(parts[0]) == op:
        return int(parts[1])
    return None


def _kernel_bytes(args: dict, op: str):
    """A kernel's collective size: the one its rank read from torch's NCCL Flight Recorder
    (nccl_bytes), else one named by a collective() region around it."""
    nbytes = args.get("nccl_bytes")
    if isinstance(nbytes, int) and not isinstance(nbytes, bool) and nbytes >= 0:
        return nbytes
    return _bytes_of(str(args.get("region", "")), op)


@dataclass
class _Rank:
    rank: int
    path: str
    meta: dict
    events: list
    shift_ns: int = 0
    kernels: list = field(default_factory=list)  # (event, start_ns, end_ns, parsed nccl | None)


def _ns(ts) -> int:
    return int(round(float(ts) * 1000))


def _load(paths) -> list:
    ranks = []
    for i, path in enumerate(paths):
        data = read_trace(path)
        meta = dict(data.get("otherData") or {})
        if "gpuprofile" not in meta:  # its clocks and ranks are unknown: nothing to align by
            raise TraceFileError(f"{path}: a foreign trace (torch.profiler's or another "
                                 "tool's: no otherData.gpuprofile): merge reads the per-rank traces "
                                 "that gpuprofile's Profile.export_chrome_trace writes")
        rank = meta.get("rank")
        ok = isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < 2**31
        ranks.append(_Rank(rank if ok else i, os.fspath(path), meta, data["traceEvents"]))
    seen = [r.rank for r in ranks]
    for k, r in enumerate(ranks):
        if r.rank in seen[:k]:
            first = ranks[seen.index(r.rank)].path
            raise TraceFileError(f"{r.path}: of rank {r.rank}, like {first}; two traces are of the "
                                 "same rank: pass one file per rank")
    ranks.sort(key=lambda r: r.rank)
    for r in ranks:
        for e in r.events:
            if e.get("ph") == "X" and e.get("cat") == "kernel":
                start = _ns(e["ts"])
                r.kernels.append((e, start, start + _ns(e.get("dur", 0)),
                                  nccl.parse_kernel(str(e.get("name", "")))))
    return ranks


def _instances(ranks) -> dict:
    """{(op, k): [kernel index per rank]} for the k-th NCCL kernel of each op on every rank
    (NCCL requires every rank to issue a communicator's collectives in the same order)."""
    per_rank = []
    for r in ranks:
        by_op: dict = {}
        order = sorted(range(len(r.kernels)), key=lambda j: r.kernels[j][1])
        for j in order:
            parsed = r.kernels[j][3]
            if parsed is not None:
                by_op.setdefault(parsed["op"], []).append(j)
        per_rank.append(by_op)
    out = {}
    for op in set().union(*per_rank) if per_rank else ():
        count = min(len(p.get(op, ())) for p in per_rank)
        for k in range(count):
            out[(op, k)] = [p[op][k] for p in per_rank]
    return out


def _check_shifts(ranks, shifts) -> None:
    """Clock fields that put a rank centuries from the others would overflow the int64 times:
    TraceFileError naming the file farthest from the median."""
    if max(shifts) - min(shifts) <= 2**60:
        return
    mid = sorted(shifts)[len(shifts) // 2]
    worst = max(range(len(ranks)), key=lambda i: abs(shifts[i] - mid))
    raise TraceFileError(f"{ranks[worst].path}: its clock fields (otherData time_zero_cupti_ns, "
                         f"clock_pair) put it {abs(shifts[worst] - mid) / 3.156e16:.3g} years "
                         "from the other ranks")


def _align(ranks, instances, method: str) -> dict:
    zeros = [int(r.meta.get("time_zero_cupti_ns") or 0) for r in ranks]
    pairs = [r.meta.get("clock_pair") for r in ranks]
    info = {"method": "wall clock", "wall_uncertainty_ns": None, "collectives_matched": 0,
            "spread_median_ns": None, "spread_max_ns": None, "corrections_ns": None}
    if all(isinstance(p, dict) for p in pairs):
        shifts, info["wall_uncertainty_ns"] = wall_shifts(zeros, pairs)
    else:  # older traces: assume one host's shared CUPTI clock
        info["method"] = "CUPTI clock (traces without clock pairs)"
        shifts = [z - min(zeros) for z in zeros]
    _check_shifts(ranks, shifts)
    keys = sorted(instances, key=lambda key: ranks[0].kernels[instances[key][0]][1])
    ends = np.array([[r.kernels[instances[key][i]][2] + shifts[i] for key in keys]
                     for i, r in enumerate(ranks)], dtype=np.int64).reshape(len(ranks), len(keys))
    info["collectives_matched"] = len(keys)
    if method == "collectives" and not keys:
        raise ValueError("align='collectives': no NCCL collective appears in every rank's trace")
    if method != "wall" and keys and len(ranks) > 1:
        corrections, info["spread_median_ns"], info["spread_max_ns"] = collective_corrections(ends)
        info["corrections_ns"] = corrections
        info["method"] += " + collective ends"
        shifts = [s + c for s, c in zip(shifts, corrections, strict=True)]
    low = min(shifts)
    for r, s in zip(ranks, shifts, strict=True):
        r.shift_ns = s - low
    return info


def _annotate(ranks, instances) -> list:
    """Names NCCL kernel events after their collective and adds bytes and bandwidth; returns the
    matched collectives' rows and fills (collectives x ranks) start times for the straggler table."""
    world = len(ranks)
    rows = []
    for (op, k), idx in sorted(instances.items(), key=lambda kv: ranks[0].kernels[kv[1][0]][1]):
        starts = [r.kernels[j][1] + r.shift_ns for r, j in zip(ranks, idx, strict=True)]
        ends = [r.kernels[j][2] + r.shift_ns for r, j in zip(ranks, idx, strict=True)]
        sizes = {_kernel_bytes(r.kernels[j][0].get("args") or {}, op)
                 for r, j in zip(ranks, idx, strict=True)} - {None}
        nbytes = sizes.pop() if len(sizes) == 1 else None
        transfer = max(ends) - max(starts)
        algbw, busbw = nccl.bandwidth(op, nbytes, transfer, world)
        rows.append({"op": op, "index": k, "bytes": nbytes, "last_rank": int(np.argmax(starts)),
                     "start_ns": starts, "end_ns": ends, "transfer_ns": transfer,
                     "algbw_gbps": algbw, "busbw_gbps": busbw})
        for r, j, s in zip(ranks, idx, starts, strict=True):
            event = r.kernels[j][0]
            args = event.setdefault("args", {})
            args.update({"collective": op, "instance": k, "bytes": nbytes,
                         "wait_us": round((max(starts) - s) / 1000, 3),
                         "transfer_us": round(transfer / 1000, 3),
                         "algbw_GBps": None if algbw is None else round(algbw, 3),
                         "busbw_GBps": None if busbw is None else round(busbw, 3)})
    for r in ranks:  # every NCCL kernel, matched or not, is named by its collective
        for event, _, _, parsed in r.kernels:
            if parsed is not None:
                event.setdefault("args", {}).setdefault("kernel", event["name"])
                extra = "/".join(x for x in (parsed["algorithm"], parsed["protocol"]) if x)
                event["name"] = f"NCCL {parsed['op']}" + (f" ({extra})" if extra else "")
    return rows


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
        e["tid"] = GPU_PID_BASE + gpu * _STREAM_TID + (tid if isinstance(tid, int) else 0)
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


def _rank_header(r) -> list:
    gpus = sorted({e["pid"] - GPU_PID_BASE for e in r.events
                   if isinstance(e.get("pid"), int) and e["pid"] >= GPU_PID_BASE})
    where = [f"GPU {','.join(map(str, gpus))}"] if gpus else []
    if r.meta.get("hostname"):
        where.append(f"host {r.meta['hostname']}")
    name = f"rank {r.rank}" + (f" ({', '.join(where)})" if where else "")
    return [{"ph": "M", "name": "process_name", "pid": r.rank, "args": {"name": name}},
            {"ph": "M", "name": "process_sort_index", "pid": r.rank, "args": {"sort_index": r.rank}}]


def _step_windows(r, step: str) -> np.ndarray:
    """[start, end) of each instance of region `step` on the rank, aligned: its GPU span (first
    kernel to last, all devices) when the trace has one, else the host region."""
    spans: dict = {}
    for e in r.events:
        if e.get("cat") == "region (GPU)" and e.get("name") == step and e.get("ph") in ("b", "e"):
            lo, hi = spans.get(e.get("id"), (None, None))
            t = _ns(e["ts"])
            if e["ph"] == "b":
                lo = t if lo is None else min(lo, t)
            else:
                hi = t if hi is None else max(hi, t)
            spans[e.get("id")] = (lo, hi)
    windows = [(lo, hi) for lo, hi in spans.values() if lo is not None and hi is not None]
    if not windows:
        windows = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e.get("dur", 0))) for e in r.events
                   if e.get("ph") == "X" and e.get("cat") == "region" and e.get("name") == step]
    w = np.array(sorted(windows), dtype=np.int64).reshape(-1, 2)
    return w + r.shift_ns


def _straggler(ranks, instances, rows, step: str) -> StragglerTable:
    order = sorted(instances, key=lambda key: ranks[0].kernels[instances[key][0]][1])
    row_of = [{instances[key][i]: n for n, key in enumerate(order)} for i in range(len(ranks))]
    times = []
    for i, r in enumerate(ranks):
        k = r.kernels
        instance = np.array([row_of[i].get(j, -2) if k[j][3] is not None else -1
                             for j in range(len(k))], dtype=np.int64)
        times.append(RankTimes(
            steps=_step_windows(r, step),
            start=np.array([x[1] for x in k], dtype=np.int64) + r.shift_ns,
            end=np.array([x[2] for x in k], dtype=np.int64) + r.shift_ns, instance=instance))
    starts = np.array([row["start_ns"] for row in rows], dtype=np.int64).reshape(-1, len(ranks))
    table_rows, last = straggler_rows(times, starts)
    return StragglerTable(step, len(ranks), table_rows, last)


def _write(path: str, events) -> None:
    with atomic_write(path, "wb", gzip=path.endswith(".gz")) as f:
        f.write(b'{"displayTimeUnit":"ns","traceEvents":[\n')
        f.write(b",\n".join(json.dumps(e, separators=(",", ":")).encode() for e in events))
        f.write(b"\n]}\n")


@dataclass
class MergeResult(Tabular):
    """What merge_traces() did: the output path, each rank's file and clock shift, how the
    clocks were aligned and how well, every matched collective, and the straggler table."""

    path: str
    ranks: list
    alignment: dict
    collectives: list
    straggler: StragglerTable

    def to_dict(self) -> dict:
        return {"path": self.path, "ranks": self.ranks, "alignment": self.alignment,
                "collectives": self.collectives, "straggler": self.straggler.to_dict()}

    def table_rows(self) -> list:
        """One row per matched collective (the straggler table is self.straggler.to_pandas())."""
        return [dict(c) for c in self.collectives]

    def _by_op(self) -> list:
        out = []
        for op in sorted({c["op"] for c in self.collectives}):
            mine = [c for c in self.collectives if c["op"] == op]
            bw = [c["busbw_gbps"] for c in mine if c["busbw_gbps"] is not None]
            sizes = [c["bytes"] for c in mine if c["bytes"] is not None]
            out.append([op, len(mine), sum(sizes) / 2**20 if sizes else None,
                        float(np.median([c["transfer_ns"] for c in mine])) / 1e3,
                        float(np.median(bw)) if bw else None])
        return out

    _OP_HEADERS = ["collective", "count", "MiB (known)", "median transfer us", "median busbw GB/s"]

    def _alignment_line(self) -> str:
        a = self.alignment
        parts = [f"clocks aligned by {a['method']}"]
        if a["wall_uncertainty_ns"] is not None:
            parts.append(f"wall-clock pairs within {a['wall_uncertainty_ns'] / 1e3:.3g} us")
        if a["spread_median_ns"] is not None:
            parts.append(f"collective ends agree within {a['spread_median_ns'] / 1e3:.3g} us "
                         f"(median; worst {a['spread_max_ns'] / 1e3:.3g} us) over "
                         f"{a['collectives_matched']} collectives")
            c = a["corrections_ns"]
            parts.append(f"the wall clocks disagreed by {(max(c) - min(c)) / 1e3:.3g} us")
        return "; ".join(parts)

    def __str__(self) -> str:
        out = [f"merged {len(self.ranks)} ranks into {self.path}", self._alignment_line()]
        if self.collectives:
            out += ["", text_table(self._OP_HEADERS, self._by_op(), title="NCCL collectives")]
        return "\n".join(out + ["", str(self.straggler)])

    def __repr__(self) -> str:
        return f"<MergeResult {self.path}: {len(self.ranks)} ranks, {len(self.collectives)} collectives>"

    def _repr_html_(self) -> str:
        table = html_table(self._OP_HEADERS, self._by_op(), title="NCCL collectives") if self.collectives else ""
        return f"<p>{self._alignment_line()}</p>{table}{self.straggler._repr_html_()}"


def merge_traces(paths, output, step: str = "step", align: str = "auto") -> MergeResult:
    """Merge per-rank Chrome traces into `output` (gzip when it ends in .gz): one process per
    rank, clocks aligned, NCCL kernels named by collective with bytes and bandwidth. `step`:
    the region that delimits training steps for the straggler table. `align`: 'auto' (wall
    clock, refined by collective ends when every rank ran one), 'wall' or 'collectives'.
    Returns a MergeResult (print it)."""
    if align not in ("auto", "wall", "collectives"):
        raise ValueError(f"align must be 'auto', 'wall' or 'collectives', got {align!r}")
    if isinstance(paths, (str, os.PathLike)):  # one file, not its characters
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("merge_traces: no trace files given")
    output = os.fspath(output)
    ranks = _load(paths)
    instances = _instances(ranks)
    alignment = _align(ranks, instances, align)
    rows = _annotate(ranks, instances)
    straggler = _straggler(ranks, instances, rows, step)
    events = []
    for r in ranks:
        events += _rank_header(r)
        events += [e for e in (_remap(r, x) for x in r.events) if e is not None]
    _write(output, events)
    info = [{"rank": r.rank, "file": r.path, "hostname": r.meta.get("hostname"),
             "world_size": r.meta.get("world_size"), "shift_ns": r.shift_ns,
             "clock_pair": r.meta.get("clock_pair")} for r in ranks]
    return MergeResult(output, info, alignment, rows, straggler)
