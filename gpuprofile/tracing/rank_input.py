"""One rank's trace as `gpuprofile merge` reads it, from either file a profile writes: the Chrome
trace (JSON, trace_input.py checks it) or the Parquet table (columns.py). The merge reads every
rank twice, one rank at a time: a scan (kernel times, NCCL kernels, step windows) for the
analyses, then the whole rank for the merged trace; nothing of a rank stays in memory between
the two but what the scan keeps.

Times here are ns from the rank's time zero (`time_zero_cupti_ns`), as in the Chrome trace.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import numpy as np

from .chrome_trace import GPU_PID_BASE
from .columns import (
    COLUMNS,
    KINDS,
    META_CRC_KEY,
    META_KEY,
    PARQUET_MAGIC,
    STRING_COLUMNS,
    meta_crc,
    require_pyarrow,
)
from .nccl import parse_names, region_bytes
from .trace_input import _MAX_CLOCK_NS, _MAX_TIME_NS, TraceFileError, _check_meta, read_trace


def _ns(ts) -> int:
    return int(round(float(ts) * 1000))


def is_parquet(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == PARQUET_MAGIC
    except OSError:
        return False  # read_trace names the problem


@dataclass
class Scan:
    """What the analyses need of one rank. Kernels (start, end, device; collective: NCCL's
    op or ''; algorithm, protocol; nbytes: from a collective() region, -1 unknown; row: the
    kernel's event or row index in the file, to annotate it when the merged trace is written),
    steps (n x 2 windows of the step region), gpus (devices seen)."""

    meta: dict
    start: np.ndarray
    end: np.ndarray
    collective: np.ndarray
    algorithm: np.ndarray
    protocol: np.ndarray
    nbytes: np.ndarray
    row: np.ndarray
    steps: np.ndarray
    gpus: list


# ---- Chrome trace (JSON) ---------------------------------------------------------------------

def read_json(path: str) -> tuple:
    """(metadata, events) of a Chrome trace that gpuprofile wrote; TraceFileError otherwise."""
    data = read_trace(path)
    meta = dict(data.get("otherData") or {})
    if "gpuprofile" not in meta:  # its clocks and ranks are unknown: nothing to align by
        raise TraceFileError(f"{path}: a foreign trace (torch.profiler's or another "
                             "tool's: no otherData.gpuprofile): merge reads the per-rank traces "
                             "that gpuprofile's Profile.export_chrome_trace writes")
    return meta, data["traceEvents"]


def _windows(spans: dict, host: list) -> np.ndarray:
    windows = [(lo, hi) for lo, hi in spans.values() if lo is not None and hi is not None]
    w = np.array(sorted(windows or host), dtype=np.int64).reshape(-1, 2)
    return w


def _recorded_bytes(value):
    """A kernel's nccl_bytes argument (torch's Flight Recorder, written by the rank's profile):
    the size when it is a plain int within int64, else None (the collective() region decides)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**62:
        return value
    return None


def scan_json(path: str, step: str) -> Scan:
    meta, events = read_json(path)
    rows, start, end, names, regions, recorded = [], [], [], [], [], []
    spans: dict = {}
    host = []
    gpus = set()
    for i, e in enumerate(events):
        ph, cat = e.get("ph"), e.get("cat")
        pid = e.get("pid")
        if isinstance(pid, int) and pid >= GPU_PID_BASE:
            gpus.add(pid - GPU_PID_BASE)
        if ph == "X" and cat == "kernel":
            s = _ns(e["ts"])
            rows.append(i)
            start.append(s)
            end.append(s + _ns(e.get("dur", 0)))
            names.append(str(e.get("name", "")))
            args = e.get("args") or {}
            regions.append(str(args.get("region", "")))
            recorded.append(_recorded_bytes(args.get("nccl_bytes")))
        elif cat == "region (GPU)" and e.get("name") == step and ph in ("b", "e"):
            lo, hi = spans.get(e.get("id"), (None, None))
            t = _ns(e["ts"])
            if ph == "b":
                lo = t if lo is None else min(lo, t)
            else:
                hi = t if hi is None else max(hi, t)
            spans[e.get("id")] = (lo, hi)
        elif ph == "X" and cat == "region" and e.get("name") == step:
            s = _ns(e["ts"])
            host.append((s, s + _ns(e.get("dur", 0))))
    del events
    parsed = parse_names(names)
    op = parsed["collective"]
    sizes = [rec if rec is not None else region_bytes(reg, o) if o else None
             for reg, o, rec in zip(regions, op.tolist(), recorded, strict=True)]
    nbytes = np.array([-1 if b is None else b for b in sizes], dtype=np.int64)
    return Scan(meta, np.array(start, np.int64), np.array(end, np.int64), op,
                parsed["nccl_algorithm"], parsed["nccl_protocol"], nbytes,
                np.array(rows, np.int64), _windows(spans, host), sorted(gpus))


# ---- Parquet ---------------------------------------------------------------------------------

_SCAN_COLUMNS = ("kind", "name", "start_ns", "end_ns", "device", "record", "collective",
                 "nccl_algorithm", "nccl_protocol", "collective_bytes")


def _codes(column) -> tuple:
    """(int64 codes, labels) of a string column, dictionary-encoded or not."""
    import pyarrow as pa

    if not pa.types.is_dictionary(column.type):
        column = column.dictionary_encode()
    column = column.unify_dictionaries() if hasattr(column, "unify_dictionaries") else column
    combined = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    if combined.null_count:
        raise ValueError("holds nulls")
    labels = combined.dictionary.to_pylist()
    if any(not isinstance(x, str) for x in labels):
        raise ValueError("is not a string column")
    codes = combined.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    if codes.size and (codes.min() < 0 or codes.max() >= len(labels)):
        raise ValueError("has dictionary indices out of range")
    return codes, labels


def _numbers(column, dtype) -> np.ndarray:
    """A numeric column as `dtype`; ValueError for nulls, another type, or values that the
    dtype cannot hold (never wrapped)."""
    import pyarrow as pa

    if column.null_count:
        raise ValueError("holds nulls")
    kind = np.dtype(dtype).kind
    if kind in "iu" and not pa.types.is_integer(column.type):
        raise ValueError(f"must hold integers, holds {column.type}")
    if kind == "f" and not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
        raise ValueError(f"must hold numbers, holds {column.type}")
    values = column.to_numpy()
    if kind in "iu" and values.size:
        info = np.iinfo(dtype)
        if int(values.min()) < info.min or int(values.max()) > info.max:
            raise ValueError(f"holds values beyond {np.dtype(dtype).name}")
    with np.errstate(over="ignore", invalid="ignore"):  # a float beyond float32 becomes inf
        return values.astype(dtype)


def read_parquet(path: str, columns=None) -> tuple:
    """(metadata, {column: array, or (codes, labels) for strings}) of a Parquet file that
    Profile.export_parquet wrote; TraceFileError naming the file otherwise. Times are moved to
    ns from the rank's time zero."""
    try:
        pa = require_pyarrow()
    except ImportError as exc:  # a file merge cannot read here: the one error merge gives for that
        raise TraceFileError(f"{path}: a Parquet trace, and {exc}") from None
    import pyarrow.parquet as pq

    wanted = list(columns or [c for c, _ in COLUMNS])
    try:
        f = pq.ParquetFile(path, page_checksum_verification=True)
        raw_meta = (f.schema_arrow.metadata or {}).get(META_KEY)
        if raw_meta is None:
            raise TraceFileError(f"{path}: a Parquet file without gpuprofile metadata: merge reads "
                                 "the files that Profile.export_parquet writes")
        _check_crc(path, raw_meta, f.schema_arrow.metadata.get(META_CRC_KEY))
        meta = json.loads(raw_meta)
        if not isinstance(meta, dict) or "gpuprofile" not in meta:
            raise ValueError("the gpuprofile metadata is not an object with its version")
        _check_meta(meta)
        missing = [c for c in wanted if c not in f.schema_arrow.names]
        if missing:
            raise ValueError(f"no column {missing[0]!r}")
        table = f.read(columns=wanted)
        table.validate(full=True)  # damaged bytes can decode into inconsistent arrays
    except TraceFileError:
        raise
    except (OSError, pa.ArrowException, ValueError, TypeError, RecursionError) as exc:
        if "checksum" in str(exc).lower():
            raise TraceFileError(f"{path}: damaged: a page's CRC-32 does not match its data (the "
                                 f"file changed after it was written: {exc})") from None
        raise TraceFileError(f"{path}: not a gpuprofile Parquet trace "
                             f"({type(exc).__name__}: {exc})") from None
    zero = meta.get("time_zero_cupti_ns") or 0
    types = dict(COLUMNS)
    out = {}
    for name in wanted:
        try:
            col = table.column(name)
            out[name] = _codes(col) if name in STRING_COLUMNS else _numbers(col, types[name])
        except (pa.ArrowException, ValueError, TypeError) as exc:
            raise TraceFileError(f"{path}: column {name!r} {exc}") from None
    for name in ("start_ns", "end_ns"):
        if name in out:
            t = out[name]
            if t.size and (np.abs(t).max() > _MAX_CLOCK_NS or not math.isfinite(zero)):
                raise TraceFileError(f"{path}: column {name!r} out of range")
            out[name] = t - int(zero)
            if t.size and np.abs(out[name]).max() > _MAX_TIME_NS:
                raise TraceFileError(f"{path}: column {name!r} is more than 2^60 ns from the "
                                     "file's time zero")
    if "start_ns" in out and "end_ns" in out:
        _check_spans(path, meta, out["start_ns"], out["end_ns"])
    for name, limit in (("device", 2**20), ("stream", 2**40)):  # thread ids of the merged trace
        if name in out and out[name].size and (out[name].min() < -1 or out[name].max() >= limit):
            raise TraceFileError(f"{path}: column {name!r} out of range (-1 to {limit - 1})")
    if "kind" in out:
        unknown = set(out["kind"][1]) - set(KINDS)
        if unknown and np.isin(out["kind"][0], [out["kind"][1].index(u) for u in unknown]).any():
            raise TraceFileError(f"{path}: column 'kind' holds {sorted(unknown)[0]!r}")
    return meta, out


def _check_crc(path: str, text: bytes, crc) -> None:
    """TraceFileError unless the metadata's JSON matches the CRC-32 written beside it (files
    written before the CRC was, have none: nothing to check)."""
    if crc is not None and crc != meta_crc(text):
        raise TraceFileError(f"{path}: damaged: the gpuprofile metadata does not match its CRC-32 "
                             "(the file changed after it was written)")


def _check_spans(path: str, meta: dict, start: np.ndarray, end: np.ndarray) -> None:
    """TraceFileError naming the file, the rank and the first row whose event ends before it
    starts (a merged trace would show a negative duration)."""
    bad = np.flatnonzero(end < start)
    if bad.size:
        i = int(bad[0])
        raise TraceFileError(f"{path}: rank {meta.get('rank', '?')}: row {i} ends before it starts "
                             f"(end_ns {int(end[i])} < start_ns {int(start[i])}, from the file's "
                             f"time zero; {bad.size} such row(s))")


def _label_of(col, value: str) -> int:
    codes, labels = col
    return labels.index(value) if value in labels else -1


def scan_parquet(path: str, step: str) -> Scan:
    meta, c = read_parquet(path, _SCAN_COLUMNS)
    kind = c["kind"][0]
    kernel = np.flatnonzero(kind == _label_of(c["kind"], "kernel"))
    step_code = _label_of(c["name"], step)
    windows = np.zeros((0, 2), np.int64)
    for k in ("region (GPU)", "region"):  # the GPU span when there is one, else the host region
        rows = np.flatnonzero((kind == _label_of(c["kind"], k)) & (c["name"][0] == step_code))
        if rows.size and step_code >= 0:
            rec = c["record"][rows]
            order = np.unique(rec, return_inverse=True)[1].reshape(-1)
            n = int(order.max()) + 1
            lo = np.full(n, np.iinfo(np.int64).max)
            hi = np.full(n, np.iinfo(np.int64).min)
            np.minimum.at(lo, order, c["start_ns"][rows])
            np.maximum.at(hi, order, c["end_ns"][rows])
            windows = np.array(sorted(zip(lo.tolist(), hi.tolist(), strict=True)),
                               np.int64).reshape(-1, 2)
            break
    labels = {f: np.asarray(c[f][1], dtype=object) for f in ("collective", "nccl_algorithm",
                                                             "nccl_protocol")}
    gpu_rows = kind != _label_of(c["kind"], "region")
    gpus = sorted(set(np.unique(c["device"][gpu_rows]).tolist()) - {-1})
    return Scan(meta, c["start_ns"][kernel], c["end_ns"][kernel],
                labels["collective"][c["collective"][0][kernel]],
                labels["nccl_algorithm"][c["nccl_algorithm"][0][kernel]],
                labels["nccl_protocol"][c["nccl_protocol"][0][kernel]],
                c["collective_bytes"][kernel], kernel.astype(np.int64), windows, gpus)


def scan(path: str, step: str) -> Scan:
    """One rank's Scan, from either format (told apart by the Parquet magic bytes)."""
    path = os.fspath(path)
    return scan_parquet(path, step) if is_parquet(path) else scan_json(path, step)
