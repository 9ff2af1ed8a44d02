"""A profile as one columnar table: every kernel, copy, set, region, region GPU span and memory
event of one rank as a row, with the same fields the Chrome trace carries, for Apache Arrow and
Parquet (pyarrow, optional) and for the streaming merge (tracing/merge.py reads these files a
rank at a time, only the columns it needs). docs/tracing.md lists the columns.

Times are the rank's CUPTI clock in ns (host regions moved onto it by the profile's clock
offset), as in p.kernels. The table's schema metadata holds, under b"gpuprofile", the JSON of
what a Chrome trace keeps in otherData: version, time_zero_cupti_ns, rank, world size, host
name, the clock pair and how many records were dropped. Columns that do not apply to a row hold
-1 (integers), NaN (occupancy) or '' (strings), so that SQL and pandas see plain values.
"""

from __future__ import annotations

import json
import zlib

import numpy as np

from .._tables import factorize
from .chrome_trace import gpu_region_spans
from .collectives import per_kernel_bytes
from .nccl import parse_names, region_bytes

PARQUET_MAGIC = b"PAR1"
META_KEY = b"gpuprofile"
META_CRC_KEY = b"gpuprofile.crc32"
KINDS = ("kernel", "memcpy", "memset", "region", "region (GPU)", "memory")

# (column, NumPy dtype or str for a string column); the order of the table
COLUMNS = (
    ("rank", "<i4"), ("kind", str), ("name", str), ("start_ns", "<i8"), ("end_ns", "<i8"),
    ("device", "<i4"), ("stream", "<i8"), ("thread", "<i8"), ("correlation_id", "<i8"),
    ("region", str), ("record", "<i8"), ("parent", "<i8"), ("bytes", "<i8"),
    ("memory_kind", str), ("bytes_in_use", "<i8"),
    ("grid_x", "<i4"), ("grid_y", "<i4"), ("grid_z", "<i4"),
    ("block_x", "<i4"), ("block_y", "<i4"), ("block_z", "<i4"),
    ("registers_per_thread", "<i4"), ("static_smem", "<i4"), ("dynamic_smem", "<i4"),
    ("occupancy", "<f4"), ("collective", str), ("nccl_algorithm", str), ("nccl_protocol", str),
    ("collective_bytes", "<i8"), ("python_line", str),
)
STRING_COLUMNS = tuple(name for name, t in COLUMNS if t is str)
_CONFIG = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
           "static_smem", "dynamic_smem")


def require_pyarrow():
    """The pyarrow module, or ImportError saying how to get it."""
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401  (the submodule the writers and readers use)
    except ImportError:
        raise ImportError("Arrow and Parquet need pyarrow, which is not installed: pip install "
                          "pyarrow (the Chrome trace needs nothing more)") from None
    if int(pyarrow.__version__.split(".")[0]) < 13:  # page checksums, written and verified
        raise ImportError(f"Arrow and Parquet need pyarrow >= 13, this is {pyarrow.__version__}: "
                          "pip install -U pyarrow")
    return pyarrow


class _Part:
    """Rows of one kind: numeric columns as arrays, string columns as (codes, labels)."""

    def __init__(self, kind: str, n: int):
        self.n = n
        self.num = {}
        self.str = {"kind": (np.zeros(n, np.int32), [kind])}

    def set(self, name: str, values) -> None:
        if dict(COLUMNS)[name] is str:
            self.str[name] = factorize(values, np.int32)
        else:
            self.num[name] = np.asarray(values)


def _gpu_rows(kind: str, t, recorded=None) -> _Part:
    p = _Part(kind, len(t))
    for f in ("start_ns", "end_ns", "device", "stream", "correlation_id", "region", "python_line"):
        p.set(f, t[f])
    p.set("record", t["region_record"])
    if kind == "kernel":
        p.set("name", t["name"])
        for f in _CONFIG:
            p.set(f, t[f])
        p.set("occupancy", t["occupancy"])
        parsed = parse_names(t["name"])
        for f in ("collective", "nccl_algorithm", "nccl_protocol"):
            p.set(f, parsed[f])
        sizes = parsed_bytes(t["region"], parsed["collective"])
        if recorded is not None:  # torch's Flight Recorder first, as the Chrome trace does
            sizes = np.where(recorded >= 0, recorded, sizes)
        p.set("collective_bytes", sizes)
    else:
        label = t["kind"] if kind == "memcpy" else t["memory_kind"]
        prefix = "Memcpy " if kind == "memcpy" else "Memset "
        p.set("name", [prefix + x if kind == "memcpy" else f"{prefix}({x})" for x in label.tolist()])
        p.set("memory_kind", label)
        p.set("bytes", t["bytes"].astype(np.int64))
    return p


def parsed_bytes(regions, ops) -> np.ndarray:
    """Bytes named by each kernel's collective() region when it names the kernel's collective,
    else -1 (tracing/nccl.py: the kernel record holds no size)."""
    cache: dict = {}
    out = np.full(len(ops), -1, np.int64)
    for i, (region, op) in enumerate(zip(list(regions), list(ops), strict=True)):
        if op:
            key = (region, op)
            if key not in cache:
                cache[key] = region_bytes(str(region), op)
            if cache[key] is not None:
                out[i] = cache[key]
    return out


def _region_rows(records, offset_ns: int, t0: int, t1: int) -> _Part:
    """Host region records that overlap [t0, t1] on the CUPTI clock (open ones end at t1)."""
    if records is None or not len(records):
        return _Part("region", 0)
    start = records["host_start_ns"] + offset_ns
    end = np.where(records["open"], t1, records["host_end_ns"] + offset_ns)
    keep = np.flatnonzero((end >= t0) & (start <= t1))
    p = _Part("region", keep.size)
    p.set("name", records["name"][keep])
    p.set("start_ns", start[keep])
    p.set("end_ns", end[keep])
    p.set("thread", records["thread"][keep].astype(np.int64))
    p.set("device", records["device"][keep])
    p.set("record", keep)
    p.set("parent", records["parent"][keep])
    return p


def _span_rows(kernels, records) -> _Part:
    rec, dev, start, end = gpu_region_spans(kernels, records)
    p = _Part("region (GPU)", rec.size)
    if rec.size:
        p.set("name", records["name"][rec])
        p.set("record", rec)
        p.set("device", dev)
        p.set("start_ns", start)
        p.set("end_ns", end)
    return p


def _memory_rows(memory) -> _Part:
    if memory is None or not len(memory):
        return _Part("memory", 0)
    p = _Part("memory", len(memory))
    for f in ("device", "stream", "correlation_id", "region", "bytes_in_use"):
        p.set(f, memory[f])
    p.set("name", memory["op"])
    p.set("memory_kind", memory["kind"])
    p.set("start_ns", memory["timestamp_ns"])
    p.set("end_ns", memory["timestamp_ns"])
    p.set("bytes", memory["delta"])
    p.set("record", memory["region_record"])
    return p


def _default(dtype):
    return np.nan if np.dtype(dtype).kind == "f" else -1


def _concat(parts, rank: int) -> dict:
    """{column: array} for numeric columns, {column: (codes, labels)} for string columns."""
    n = sum(p.n for p in parts)
    out = {}
    for name, dtype in COLUMNS:
        if dtype is str:
            labels: dict = {"": 0}
            codes = []
            for p in parts:
                c, lab = p.str.get(name, (np.zeros(p.n, np.int32), [""]))
                remap = np.array([labels.setdefault(x, len(labels)) for x in lab] or [0], np.int32)
                codes.append(remap[c] if p.n else np.zeros(0, np.int32))
            out[name] = (np.concatenate(codes) if codes else np.zeros(0, np.int32), list(labels))
        elif name == "rank":
            out[name] = np.full(n, rank, np.int32)
        else:
            cols = [p.num[name].astype(dtype) if name in p.num else np.full(p.n, _default(dtype), dtype)
                    for p in parts]
            out[name] = np.concatenate(cols) if cols else np.zeros(0, dtype)
    return out


def profile_columns(p, metadata: dict) -> tuple:
    """(columns, metadata) of a stopped Profile: columns as _concat gives them; `metadata` is
    what the Chrome trace's otherData would hold (time_zero_cupti_ns is added here)."""
    from .chrome_trace import _base_time

    w = p._stopped()
    k, mc, ms = p.kernels, p.memcpy, p.memset
    memory = p.memory if p.mask & _memory_flag() else None
    records = p._records
    recorded = per_kernel_bytes(p._matched_collectives(), len(k))
    parts = [_gpu_rows("kernel", k, recorded), _gpu_rows("memcpy", mc),
             _gpu_rows("memset", ms), _region_rows(records, w.offset_ns, w.t0, w.t1)]
    if records is not None and len(records):
        parts.append(_span_rows(k, records))
    parts.append(_memory_rows(memory))
    regions = parts[3]
    base = _base_time(w.t0, k["start_ns"], mc["start_ns"], ms["start_ns"],
                      memory["timestamp_ns"] if memory is not None else None,
                      regions.num.get("start_ns"))
    from .._version import __version__

    meta = {"gpuprofile": __version__, "time_zero_cupti_ns": base, **metadata}
    rank = meta.get("rank")
    return _concat(parts, rank if isinstance(rank, int) else 0), meta


def _memory_flag() -> int:
    from .activity import MEMORY

    return MEMORY


def to_arrow(columns: dict, meta: dict):
    """A pyarrow.Table of profile_columns(): string columns dictionary-encoded, the metadata
    as JSON under b"gpuprofile"."""
    pa = require_pyarrow()
    arrays, names = [], []
    for name, dtype in COLUMNS:
        if dtype is str:
            codes, labels = columns[name]
            arrays.append(pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()),
                                                         pa.array(labels, pa.string())))
        else:
            arrays.append(pa.array(columns[name]))
        names.append(name)
    table = pa.Table.from_arrays(arrays, names=names)
    text = json.dumps(meta).encode()
    return table.replace_schema_metadata({META_KEY: text, META_CRC_KEY: meta_crc(text)})


def meta_crc(text: bytes) -> bytes:
    """The CRC-32 of the metadata's JSON, stored beside it: Parquet's page checksums cover the
    data pages, not the footer where the metadata lives."""
    return b"%08x" % zlib.crc32(text)


def to_frame(columns: dict):
    """A pandas DataFrame of profile_columns() (string columns as categoricals)."""
    from .._tables import require_pandas

    pd = require_pandas()
    data = {}
    for name, dtype in COLUMNS:
        if dtype is str:
            codes, labels = columns[name]
            data[name] = pd.Categorical.from_codes(codes, categories=pd.Index(labels, dtype=object))
        else:
            data[name] = columns[name]
    return pd.DataFrame(data, columns=[c for c, _ in COLUMNS])


def write_parquet(path: str, table, row_group_rows: int = 1 << 17) -> str:
    """`table` as a Parquet file at `path`, written atomically (gpuprofile._files), zstd
    compressed, in row groups that a reader can take one at a time, each page with its CRC-32
    (the merge verifies them: a flipped bit is an error, not a different trace)."""
    require_pyarrow()
    import pyarrow.parquet as pq

    from .._files import atomic_write

    with atomic_write(path, "wb", buffering=1 << 20) as f:
        pq.write_table(table, f, compression="zstd", row_group_size=row_group_rows,
                       write_page_checksum=True)
    return path
