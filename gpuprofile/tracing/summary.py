"""Pure functions behind Profile.summary(): busy time, grouping by kernel name and by region,
GPU idle time between a region's kernels. No device, no globals; tested with exact values."""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from .._format import Label, html_table, text_table
from .._tables import column_name, factorize, frame

if TYPE_CHECKING:  # pandas stays optional at run time
    import pandas


def merged_intervals(starts, ends):
    """The union of [start, end) intervals as (starts, ends) of disjoint, sorted intervals."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    if s.size == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def busy_ns(starts, ends) -> int:
    """Length of the union of the intervals: time during which at least one ran."""
    s, e = merged_intervals(starts, ends)
    return int((e - s).sum())


def _segments(codes):
    """(order, bounds): `order` sorts `codes` stably; rows order[bounds[i]:bounds[i+1]] share a
    code."""
    codes = np.asarray(codes)
    order = np.argsort(codes, kind="stable")
    c = codes[order]
    bounds = np.flatnonzero(np.r_[True, c[1:] != c[:-1], True]) if c.size else np.zeros(1, np.int64)
    return order, bounds


def idle_ns_by_group(groups, starts, ends) -> dict:
    """For each group id (e.g. a region record): time between its first start and its last end
    when none of its intervals ran. Vectorized: one sort for all groups."""
    groups = np.asarray(groups)
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    if groups.size == 0:
        return {}
    order = np.lexsort((s, groups))
    g, s, e = groups[order], s[order], e[order]
    first = np.r_[True, g[1:] != g[:-1]]
    rank = np.cumsum(first) - 1
    seg = np.flatnonzero(first)
    tmin = int(s.min())
    span_r = int(max(e.max(), s.max())) - tmin + 1
    if int(rank[-1] + 1) * span_r >= 2**62:  # too wide to separate groups in one int64
        return {k: v for k, v in (_idle_one(gk, s[g == gk], e[g == gk]) for gk in g[seg])}
    lift = rank * span_r
    reach = np.maximum.accumulate(e - tmin + lift) - lift + tmin  # running max of ends, per group
    new = first.copy()
    new[1:] |= s[1:] > reach[:-1]
    blocks = np.flatnonzero(new)
    busy = np.bincount(rank[blocks], weights=np.maximum.reduceat(e, blocks) - s[blocks],
                       minlength=seg.size)
    span = np.maximum.reduceat(e, seg) - np.minimum.reduceat(s, seg)
    idle = span - busy.astype(np.int64)
    return dict(zip(g[seg].tolist(), idle.tolist(), strict=True))


def _idle_one(group, starts, ends) -> tuple:
    return group.item(), int(ends.max() - starts.min()) - busy_ns(starts, ends)


@dataclass(frozen=True)
class GroupRow:
    """One line of a summary table. Times in ms (totals) and µs (per kernel)."""

    key: str
    calls: int
    total_ms: float
    mean_us: float
    min_us: float
    max_us: float
    pct_busy: float
    occupancy_pct: float
    limiter: str
    instances: int = 0
    idle_ms: float = float("nan")

    def to_dict(self) -> dict:
        return asdict(self)


def group_rows(codes, labels, durations_ns, occupancy, limiters, busy: int) -> list:
    """One row per distinct code (labelled labels[code]), largest total first: kernel calls,
    total/mean/min/max duration, share of the busy time, mean theoretical occupancy and the most
    common limiter."""
    d = np.asarray(durations_ns, dtype=np.int64)
    occ = np.asarray(occupancy, dtype=np.float64)
    lim, lim_labels = factorize(limiters)
    order, bounds = _segments(codes)
    codes = np.asarray(codes)
    rows = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        idx = order[a:b]
        dk, ok = d[idx], occ[idx]
        total = int(dk.sum())
        finite = ok[np.isfinite(ok)]
        rows.append(GroupRow(
            key=str(labels[codes[idx[0]]]), calls=int(idx.size), total_ms=total / 1e6,
            mean_us=float(dk.mean()) / 1e3, min_us=int(dk.min()) / 1e3, max_us=int(dk.max()) / 1e3,
            pct_busy=100.0 * total / busy if busy else float("nan"),
            occupancy_pct=100.0 * float(finite.mean()) if finite.size else float("nan"),
            limiter=lim_labels[int(np.bincount(lim[idx]).argmax())] or "",
        ))
    rows.sort(key=lambda r: (-r.total_ms, r.key))
    return rows


def region_rows(region_codes, region_labels, region_records, durations_ns, starts, ends,
                occupancy, limiters, busy: int) -> list:
    """group_rows by region name, plus the number of region instances (records) that launched
    kernels and the GPU idle time between each instance's kernels, summed per name. Kernels
    outside any region have code -1 and are labelled '(no region)'."""
    codes = np.asarray(region_codes, dtype=np.int64)
    labels = list(region_labels) + ["(no region)"]
    codes = np.where(codes < 0, len(labels) - 1, codes)
    rows = group_rows(codes, labels, durations_ns, occupancy, limiters, busy)
    recs = np.asarray(region_records, dtype=np.int64)
    inside = recs >= 0
    idle = idle_ns_by_group(recs[inside], np.asarray(starts)[inside], np.asarray(ends)[inside])
    uniq, first = np.unique(recs[inside], return_index=True)
    rec_codes = codes[inside][first]
    instances = np.bincount(rec_codes, minlength=len(labels))
    idle_of = np.fromiter((idle[r] for r in uniq.tolist()), np.int64, uniq.size)
    idle_by = np.bincount(rec_codes, weights=idle_of, minlength=len(labels))
    index = {label: c for c, label in enumerate(labels)}
    out = []
    for row in rows:
        c = index[row.key]
        out.append(GroupRow(**{**row.to_dict(), "instances": int(instances[c]),
                               "idle_ms": idle_by[c] / 1e6 if instances[c] else float("nan")}))
    return out


# Summary.sorted(sort_by=...): GroupRow fields, and torch.profiler's names for the same columns.
SORT_KEYS = ("total_ms", "calls", "mean_us", "min_us", "max_us", "pct_busy", "occupancy_pct",
             "idle_ms", "instances", "key")
_SORT_ALIASES = {"cuda_time_total": "total_ms", "device_time_total": "total_ms",
                 "self_cuda_time_total": "total_ms", "self_device_time_total": "total_ms",
                 "count": "calls", "cuda_time": "mean_us", "device_time": "mean_us", "name": "key"}


def sort_rows(rows: list, sort_by: str) -> list:
    """GroupRows by `sort_by`: largest first for numbers (NaN last), by name for 'key'; ties by
    name. ValueError naming the choices for an unknown key."""
    key = _SORT_ALIASES.get(sort_by, sort_by) if isinstance(sort_by, str) else None
    if key not in SORT_KEYS:
        raise ValueError(f"summary(sort_by=...) must be one of {SORT_KEYS} (or torch.profiler's "
                         f"{tuple(_SORT_ALIASES)}), got {sort_by!r}")
    if key == "key":
        return sorted(rows, key=lambda r: r.key)
    def order(r):
        v = float(getattr(r, key))
        return (v != v, -v if v == v else 0.0, r.key)  # NaN (v != v) after every number
    return sorted(rows, key=order)


def _row_limit(row_limit) -> int | None:
    if row_limit is None or (isinstance(row_limit, int) and not isinstance(row_limit, bool)
                             and row_limit < 0):
        return None  # every row (torch.profiler's row_limit=-1)
    if isinstance(row_limit, bool) or not isinstance(row_limit, int) or row_limit == 0:
        raise ValueError(f"summary(row_limit=...) must be an int >= 1, or None or -1 for every "
                         f"row, got {row_limit!r}")
    return row_limit


_KERNEL_HEADERS = ["kernel", "calls", "total ms", "mean us", "min us", "max us", "% busy",
                   "occupancy %", "limiter"]
_REGION_HEADERS = ["region", "instances", "kernels", "total ms", "mean us", "min us", "max us",
                   "% busy", "occupancy %", "idle ms"]
_MEMORY_HEADERS = ["region", "instances", "peak MiB", "peak above entry MiB", "allocations",
                   "allocated MiB"]


def _kernel_cells(r: GroupRow):
    return [Label(r.key), r.calls, r.total_ms, r.mean_us, r.min_us, r.max_us, r.pct_busy,
            r.occupancy_pct, r.limiter]


def _region_cells(r: GroupRow):
    return [r.key, r.instances, r.calls, r.total_ms, r.mean_us, r.min_us, r.max_us, r.pct_busy,
            r.occupancy_pct, r.idle_ms]


def _memory_cells(r: dict):
    mib = 2.0 ** 20
    return [r["region"], r["instances"], r["peak_bytes"] / mib, r["peak_above_entry_bytes"] / mib,
            r["allocations"], r["allocated_bytes"] / mib]


@dataclass(frozen=True)
class Summary:
    """Profile.summary(): kernels grouped by name and by region, memory peaks of memory=True
    regions, and the totals they are shares of. print() it or show it in a notebook."""

    by_kernel: list
    by_region: list
    memory_by_region: list
    kernels: int
    kernel_ms: float
    busy_ms: float
    span_ms: float
    dropped: int
    partial: bool
    notes: list = field(default_factory=list)  # e.g. regions whose events missed other streams

    def to_dict(self) -> dict:
        return {
            "by_kernel": [r.to_dict() for r in self.by_kernel],
            "by_region": [r.to_dict() for r in self.by_region],
            "memory_by_region": list(self.memory_by_region),
            "kernels": self.kernels, "kernel_ms": self.kernel_ms, "busy_ms": self.busy_ms,
            "span_ms": self.span_ms, "dropped": self.dropped, "partial": self.partial,
            "notes": list(self.notes),
        }

    _TABLES = ("kernel", "region", "memory")

    def sorted(self, sort_by: str = "total_ms", row_limit: int | None = None) -> Summary:
        """This summary with its kernel and region tables ordered by `sort_by` (a column:
        total_ms, calls, mean_us, min_us, max_us, pct_busy, occupancy_pct, idle_ms, instances,
        or key for the name; torch.profiler's cuda_time_total and count work too) and cut to
        the first `row_limit` rows each (None or -1: every row). A cut says so in the notes;
        the totals (kernels, busy time) stay those of every kernel."""
        limit = _row_limit(row_limit)
        tables = {}
        notes = list(self.notes)
        for what, rows in (("kernels", self.by_kernel), ("regions", self.by_region)):
            rows = sort_rows(rows, sort_by)
            if limit is not None and len(rows) > limit:
                notes.append(f"{what}: the first {limit} of {len(rows)} rows by {sort_by} "
                             f"(row_limit={limit})")
                rows = rows[:limit]
            tables[what] = rows
        return replace(self, by_kernel=tables["kernels"], by_region=tables["regions"], notes=notes)

    def table_rows(self, by: str = "kernel") -> list:
        """The rows of one table: by='kernel' (by_kernel), 'region' (by_region) or 'memory'
        (memory_by_region)."""
        if by not in self._TABLES:
            raise ValueError(f"by must be one of {self._TABLES}, got {by!r}")
        if by == "memory":  # in MiB, as printed (memory_by_region keeps the bytes)
            return [{column_name(h): v for h, v in zip(_MEMORY_HEADERS, _memory_cells(r), strict=True)}
                    for r in self.memory_by_region]
        # columns named as the printed headers are: the key is the kernel or the region, and a
        # region's calls are its kernels
        if by == "kernel":
            return [{"kernel": d.pop("key"), **d} for d in (r.to_dict() for r in self.by_kernel)]
        return [{"region": d.pop("key"), "kernels": d.pop("calls"), **d}
                for d in (r.to_dict() for r in self.by_region)]

    def to_pandas(self, by: str = "kernel") -> pandas.DataFrame:
        """One table as a pandas DataFrame (needs pandas): by='kernel', 'region' or 'memory'."""
        return frame(self.table_rows(by))

    def _title(self) -> str:
        notes = []
        if self.dropped:
            notes.append(f"{self.dropped} RECORDS DROPPED")
        if self.partial:
            notes.append("PARTIAL (interrupted)")
        extra = f" [{'; '.join(notes)}]" if notes else ""
        return (f"gpuprofile trace: {self.kernels} kernels, {self.kernel_ms:.4g} ms of kernel time, "
                f"GPU busy {self.busy_ms:.4g} ms of {self.span_ms:.4g} ms{extra}")

    def _tables(self, table) -> list:
        out = [table(_KERNEL_HEADERS, [_kernel_cells(r) for r in self.by_kernel],
                     title="by kernel")]
        if any(r.key != "(no region)" for r in self.by_region):
            out.append(table(_REGION_HEADERS, [_region_cells(r) for r in self.by_region],
                             title="by region"))
        if self.memory_by_region:
            out.append(table(_MEMORY_HEADERS, [_memory_cells(r) for r in self.memory_by_region],
                             title="device memory of memory=True regions"))
        return out

    def __str__(self) -> str:
        notes = "\n".join(f"note: {n}" for n in self.notes)
        return "\n\n".join([self._title(), *self._tables(text_table), *([notes] if notes else [])])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return f"<p><b>{html.escape(self._title())}</b></p>" + "".join(self._tables(html_table))
