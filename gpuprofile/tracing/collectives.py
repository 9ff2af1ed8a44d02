"""Collective sizes without a hook: torch's NCCL Flight Recorder, matched to NCCL kernel records.

A CUPTI kernel record says which collective an NCCL kernel ran (its name), never how many bytes.
torch's ProcessGroupNCCL keeps a ring buffer of the collectives it issued, the Flight Recorder
(on by default in torch >= 2.5; its size is TORCH_NCCL_TRACE_BUFFER_SIZE, 0 turns it off): per
collective the process group, a sequence number, the op ("nccl:all_reduce"), the input and output
sizes in elements, their dtypes and the wall-clock time it was created. Reading it costs nothing
while the job runs (torch records it anyway); gpuprofile reads it once, when the profile stops.

Matching. NCCL runs a communicator's collectives in the order they were issued, and torch records
a collective right before it launches its kernel. So, per CUDA stream, the NCCL kernels in the
profile, in start order, are the last entries of one process group that were created before the
profile stopped, in sequence order. The pairing is taken from the end (the recorder keeps the
newest entries, and a collective issued just before the profile started may still run inside it)
and checked: every pair must name the same collective, else that stream gets no sizes and a note
says why. Bytes follow nccl-tests' "size" (nccl.py): the buffer for AllReduce, Broadcast and
Reduce, the whole gathered buffer for AllGather, the whole input for ReduceScatter.
"""

from __future__ import annotations

import pickle
import sys
from typing import NamedTuple

import numpy as np

from . import nccl

# torch's dtype names in the recorder (c10::ScalarType's), and their sizes in bytes
DTYPE_BYTES = {
    "Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Int": 4, "Long": 8, "Short": 2,
    "Char": 1, "Byte": 1, "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16, "ComplexHalf": 4,
    "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1,
    "UInt16": 2, "UInt32": 4, "UInt64": 8,
}

COLUMNS = [("kernel", "<i8"), ("op", object), ("bytes", "<i8"), ("dtype", object),
           ("group", object), ("seq", "<i8")]


class Matched(NamedTuple):
    """Sizes of matched NCCL kernels: `table` (a structured array of COLUMNS, one row per kernel
    given a size) and `notes` (why some got none)."""

    table: np.ndarray
    notes: list


def _op(profiling_name: str) -> str:
    """NCCL's name of a recorder entry's collective: 'nccl:all_reduce' -> 'AllReduce',
    'nccl:_allgather_base' -> 'AllGather'; a barrier is an AllReduce, and sends, receives and
    all-to-all are NCCL's SendRecv kernels (it runs all-to-all as grouped sends and receives)."""
    name = profiling_name.split(":", 1)[-1].split()[0].strip("_")
    op = "AllReduce" if name == "barrier" else nccl.canonical_op(name)
    return "SendRecv" if op in ("Send", "Recv", "AllToAll") else op


def _elements(sizes) -> int:
    """Elements of every tensor in a recorder size list ([[n, m], [k]] -> n*m + k)."""
    total = 0
    for shape in sizes or ():
        n = 1
        for d in shape:
            n *= int(d)
        total += n
    return total


def entry_bytes(entry: dict) -> int | None:
    """nccl-tests' size of one recorder entry, or None when its dtype is unknown."""
    op = _op(str(entry.get("profiling_name", "")))
    gathered = op == "AllGather"
    sizes = entry.get("output_sizes" if gathered else "input_sizes")
    dtypes = entry.get("output_dtypes" if gathered else "input_dtypes") or []
    if not dtypes or any(d not in DTYPE_BYTES for d in dtypes):
        return None
    if len(set(dtypes)) == 1:
        return _elements(sizes) * DTYPE_BYTES[dtypes[0]]
    if len(dtypes) != len(sizes or ()):
        return None
    return sum(_elements([s]) * DTYPE_BYTES[d] for s, d in zip(sizes, dtypes, strict=True))


def read_flight_recorder() -> tuple:
    """(entries, None), or (None, why not): the recorder's collective entries of this process,
    read only where torch.distributed is already imported and initialized."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None, "torch.distributed is not initialized"
    try:
        from torch._C._distributed_c10d import _dump_nccl_trace
    except ImportError:
        return None, "this torch has no NCCL Flight Recorder (_dump_nccl_trace)"
    try:
        dump = pickle.loads(_dump_nccl_trace(True, False, False))
    except Exception as exc:  # a torch that changed the call, or NCCL not in use
        return None, f"the NCCL Flight Recorder could not be read ({type(exc).__name__}: {exc})"
    entries = dump.get("entries") if isinstance(dump, dict) else None
    if not entries:
        return None, ("the NCCL Flight Recorder holds no collectives (TORCH_NCCL_TRACE_BUFFER_SIZE "
                      "may be 0; set it, e.g. to 2000, before init_process_group)")
    return list(entries), None


def match(names, starts, streams, entries, created_before_ns: int) -> Matched:
    """Sizes for the NCCL kernels among `names` (per-kernel arrays `names`, `starts`, `streams`),
    from recorder `entries` created at or before `created_before_ns` (wall-clock ns).
    Pure: no torch, no GPU (tests feed it synthetic entries)."""
    rows, notes = [], []
    parsed = [nccl.parse_kernel(str(n)) for n in names]
    idx = [i for i, p in enumerate(parsed) if p is not None]
    if not idx:
        return Matched(np.zeros(0, dtype=COLUMNS), notes)
    groups: dict = {}  # process group -> [(entry, its op)] in sequence order
    for e in entries:
        t = e.get("time_created_ns")
        if e.get("profiling_name") and (t is None or int(t) <= created_before_ns):
            key = tuple(e.get("process_group") or (str(e.get("pg_id")),))
            groups.setdefault(key, []).append((e, _op(str(e["profiling_name"]))))
    for g in groups.values():
        g.sort(key=lambda eo: (int(eo[0].get("collective_seq_id") or 0),
                               int(eo[0].get("p2p_seq_id") or 0), int(eo[0].get("record_id") or 0)))
    by_stream: dict = {}
    for i in idx:
        by_stream.setdefault(int(streams[i]), []).append(i)
    taken = set()
    for stream, ks in sorted(by_stream.items()):
        ks.sort(key=lambda i: int(starts[i]))
        ops = [parsed[i]["op"] for i in ks]
        found = None
        for key, g in groups.items():
            tail = g[-len(ks):]
            if key not in taken and [op for _, op in tail] == ops[len(ks) - len(tail):]:
                found = (key, [e for e, _ in tail], ks[len(ks) - len(tail):])
                break
        if found is None:
            notes.append(f"stream {stream}: {len(ks)} NCCL kernels match no process group's "
                         "recorded collectives in order; no sizes for them")
            continue
        key, tail, kept = found
        taken.add(key)
        if len(kept) < len(ks):
            notes.append(f"stream {stream}: the recorder kept only the last {len(kept)} of "
                         f"{len(ks)} collectives (raise TORCH_NCCL_TRACE_BUFFER_SIZE)")
        for i, e in zip(kept, tail, strict=True):
            b = entry_bytes(e)
            rows.append((i, parsed[i]["op"], -1 if b is None else b,
                         ",".join(e.get("input_dtypes") or []), "/".join(map(str, key)),
                         int(e.get("collective_seq_id") or e.get("p2p_seq_id") or 0)))
    return Matched(np.array(sorted(rows), dtype=COLUMNS), notes)


def per_kernel_bytes(matched: Matched, n: int) -> np.ndarray:
    """An int64 array of `n` kernels: the matched size, -1 where there is none."""
    out = np.full(n, -1, dtype=np.int64)
    if len(matched.table):
        out[matched.table["kernel"]] = matched.table["bytes"]
    return out
