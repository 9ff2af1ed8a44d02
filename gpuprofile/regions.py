"""Region results: records(), stats(name), report(). The C core keeps the records; this module
turns them into NumPy arrays and tables."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import _C
from ._format import html_table, text_table
from ._stats import summary
from ._tables import Tabular
from .distributed import rank_fields

# The packed records of _C._records(): the layout comes from the C struct (gp_record_out).
_RAW_DTYPE = np.dtype(_C._record_layout())

RECORD_DTYPE = np.dtype(
    [
        ("name", object),
        ("depth", "<i4"),
        ("parent", "<i8"),
        ("thread", "<u8"),
        ("device", "<i4"),
        ("clock", "U4"),
        ("host_start_ns", "<i8"),
        ("host_end_ns", "<i8"),
        ("host_ms", "<f8"),
        ("gpu_ms", "<f8"),
        ("raised", "?"),
        ("failed", "?"),
        ("open", "?"),
        ("memory", "?"),
    ]
)


def records() -> np.ndarray:
    """Every region instance since the last reset(), in the order they were entered.

    A NumPy structured array with fields name, depth, parent (index of the enclosing record in
    this array, -1 at top level), thread (native thread id), device (-1 for host-clock records),
    clock ('gpu' or 'host'), host_start_ns/host_end_ns (time.monotonic_ns clock), host_ms, gpu_ms
    (NaN for host-clock, failed or still-open records), raised (the body raised), failed (the
    GPU time could not be measured), open (not exited yet) and memory (a region(memory=True)).
    Reading waits for pending GPU work.
    """
    names, packed = _C._records()
    raw = np.frombuffer(packed, dtype=_RAW_DTYPE)
    out = np.empty(raw.shape[0], dtype=RECORD_DTYPE)
    out["name"] = np.asarray(names, dtype=object)[raw["name_index"]] if len(raw) else []
    for key in ("depth", "parent", "thread", "device", "host_start_ns", "host_end_ns", "gpu_ms"):
        out[key] = raw[key]
    out["clock"] = np.where(raw["device"] >= 0, "gpu", "host")
    is_open = raw["open"].astype(bool)
    out["host_ms"] = np.where(is_open, np.nan, (raw["host_end_ns"] - raw["host_start_ns"]) / 1e6)
    out["raised"] = raw["raised"].astype(bool)
    out["failed"] = raw["failed"].astype(bool)
    out["open"] = is_open
    out["memory"] = raw["memory"].astype(bool)
    return out


@dataclass(frozen=True)
class RegionStats(Tabular):
    """Statistics of one region name. Times in ms; `clock` says which clock measured `samples_ms`
    ('gpu': CUDA events on the region's stream; 'host': the host clock, used without a device)."""

    name: str
    count: int
    clock: str
    total_ms: float
    mean_ms: float
    median_ms: float
    min_ms: float
    max_ms: float
    p90_ms: float
    stdev_ms: float
    host_total_ms: float
    host_mean_ms: float
    raised: int = 0
    failed: int = 0
    samples_ms: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False, compare=False)

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "samples_ms"}
        d["samples_ms"] = self.samples_ms.tolist()
        return d

    def table_rows(self) -> list:
        """One row: every statistic, without the samples."""
        return [{k: getattr(self, k) for k in self.__dataclass_fields__ if k != "samples_ms"}]

    def _row(self):
        return [self.name, self.count, self.clock, self.total_ms, self.mean_ms, self.median_ms,
                self.min_ms, self.max_ms, self.p90_ms, self.host_total_ms, self.host_mean_ms]

    def __str__(self) -> str:
        return text_table(_HEADERS, [self._row()])

    def _repr_html_(self) -> str:
        return html_table(_HEADERS, [self._row()])


_HEADERS = ["region", "count", "clock", "total ms", "mean ms", "median ms", "min ms", "max ms",
            "p90 ms", "host total ms", "host mean ms"]


def _stats_from(name: str, recs: np.ndarray) -> RegionStats:
    done = recs[~recs["open"]]
    gpu = done[(done["clock"] == "gpu") & ~done["failed"]]
    if len(gpu):
        clock, samples = "gpu", gpu["gpu_ms"]
    else:
        clock, samples = "host", done[done["clock"] == "host"]["host_ms"]
    s = summary(samples)
    host = summary(done["host_ms"])
    return RegionStats(
        name=name, count=s["count"], clock=clock, total_ms=s["total"], mean_ms=s["mean"],
        median_ms=s["median"], min_ms=s["min"], max_ms=s["max"], p90_ms=s["p90"], stdev_ms=s["stdev"],
        host_total_ms=host["total"], host_mean_ms=host["mean"], raised=int(done["raised"].sum()),
        failed=int(done["failed"].sum()), samples_ms=np.array(samples, dtype=np.float64),
    )


def stats(name: str) -> RegionStats:
    """Statistics of every finished instance of region `name` (waits for their GPU work)."""
    if not isinstance(name, str):
        raise TypeError(f"stats(name): name must be a str, got {type(name).__name__}")
    recs = records()
    mine = recs[recs["name"] == name]
    if not len(mine):
        known = ", ".join(sorted(set(recs["name"]))) or "none"
        raise KeyError(f"no region named {name!r} was recorded (recorded: {known})")
    return _stats_from(name, mine)


@dataclass(frozen=True)
class Report(Tabular):
    """Per-name statistics of all regions, largest total first. print() it, or show it in a
    notebook; `rows` holds RegionStats objects."""

    rows: list
    rank: dict = field(default_factory=dict)  # {'rank', 'world_size'} in a multi-rank job

    def to_dict(self) -> dict:
        return {**self.rank, "regions": [r.to_dict() for r in self.rows]}

    def table_rows(self) -> list:
        """One row per region name (RegionStats.table_rows), with rank fields in a multi-rank job."""
        return [{**self.rank, **r.table_rows()[0]} for r in self.rows]

    def _title(self) -> str:
        where = f" (rank {self.rank['rank']} of {self.rank['world_size']})" if self.rank else ""
        return f"gpuprofile regions{where}"

    def __getitem__(self, name: str) -> RegionStats:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(name)

    def __len__(self) -> int:
        return len(self.rows)

    def __str__(self) -> str:
        if not self.rows:
            return "gpuprofile: no regions recorded"
        return text_table(_HEADERS, [r._row() for r in self.rows], title=self._title())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return html_table(_HEADERS, [r._row() for r in self.rows], title=self._title())


def report(since_ns: int | None = None) -> Report:
    """A table of every region name: count, total/mean/median/min/max/p90 time on the clock that
    measured it (GPU when there is a device), and host time. Waits for pending GPU work.
    since_ns: only regions entered at or after this time.monotonic_ns() value."""
    recs = records()
    if since_ns is not None:
        recs = recs[recs["host_start_ns"] >= since_ns]
    rows = []
    for name in dict.fromkeys(recs["name"]):
        rows.append(_stats_from(name, recs[recs["name"] == name]))
    rows.sort(key=lambda r: -r.total_ms if r.count else 0.0)
    return Report(rows, rank_fields())
