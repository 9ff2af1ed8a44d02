"""Region results: records(), stats(name), report(). The C core keeps the records; this module
turns them into NumPy arrays and tables."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import _C
from ._format import html_table, text_table
from ._stats import summary
from ._tables import Tabular, factorize, groups
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
        ("gpu_clock", "U6"),
        ("no_gpu_work", "?"),
    ]
)

# What measured a GPU record's time: its two CUDA events, or the span of its traced work.
EVENTS, CUPTI = "events", "cupti"



def records() -> np.ndarray:
    """Every region instance since the last reset(), in the order they were entered.

    A NumPy structured array with fields name, depth, parent (index of the enclosing record in
    this array, -1 at top level), thread (native thread id), device (-1 for host-clock records),
    clock ('gpu' or 'host'), host_start_ns/host_end_ns (time.monotonic_ns clock), host_ms, gpu_ms
    (NaN for host-clock, failed or still-open records), raised (the body raised), failed (the
    GPU time could not be measured), open (not exited yet), memory (a region(memory=True)),
    gpu_clock ('events': two CUDA events on the region's stream; 'cupti': entered while a
    gpuprofile.profile() traced with regions, its time is the span of the traced work attributed
    to it, filled in when the profile stops, NaN until then; '' for host-clock records) and
    no_gpu_work (a 'cupti' record whose trace holds no GPU work of it: no GPU time, gpu_ms NaN).
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
    out["gpu_clock"] = np.where(raw["device"] < 0, "", np.where(raw["cupti"] != 0, CUPTI, EVENTS))
    out["no_gpu_work"] = raw["no_gpu_work"].astype(bool)
    return out


@dataclass(frozen=True)
class RegionStats(Tabular):
    """Statistics of one region name. Times in ms; `clock` says which clock measured `samples_ms`
    ('gpu' or 'host': the host clock, used without a device) and `gpu_clock` how the GPU time was
    taken ('events': CUDA events on the region's stream; 'cupti': the span of the work a
    gpuprofile.profile() traced in the region; 'events+cupti': both, for instances inside and
    outside a profile). no_gpu_work counts the traced instances with no GPU work, which have no
    GPU time (they are not samples); a name with only those has count 0 and NaN times."""

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
    gpu_clock: str = ""
    no_gpu_work: int = 0
    samples_ms: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False, compare=False)

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "samples_ms"}
        d["samples_ms"] = self.samples_ms.tolist()
        return d

    def table_rows(self) -> list:
        """One row: every statistic, without the samples; the name's column is `region`, as
        its printed header."""
        return [{("region" if k == "name" else k): getattr(self, k) for k in self.__dataclass_fields__
                 if k != "samples_ms"}]

    def _row(self):
        return [self.name, self.count, self.clock, self.gpu_clock, self.total_ms, self.mean_ms,
                self.median_ms, self.min_ms, self.max_ms, self.p90_ms, self.host_total_ms,
                self.host_mean_ms, self.no_gpu_work]

    def __str__(self) -> str:
        return text_table(_HEADERS, [self._row()])

    def _repr_html_(self) -> str:
        return html_table(_HEADERS, [self._row()])


_HEADERS = ["region", "count", "clock", "gpu clock", "total ms", "mean ms", "median ms", "min ms",
            "max ms", "p90 ms", "host total ms", "host mean ms", "no GPU work"]


def _stats_from(name: str, recs: np.ndarray) -> RegionStats:
    done = recs[~recs["open"]]
    gpu = done[(done["clock"] == "gpu") & ~done["failed"]]
    no_work = int(gpu["no_gpu_work"].sum())
    gpu_clock = "+".join(c for c in (EVENTS, CUPTI) if (gpu["gpu_clock"] == c).any())
    if len(gpu):
        # a CUPTI-clock record is a sample once its profile stopped and found GPU work in it
        clock, samples = "gpu", gpu["gpu_ms"][np.isfinite(gpu["gpu_ms"])]
    else:
        clock, samples = "host", done[done["clock"] == "host"]["host_ms"]
    s = summary(samples)
    host = summary(done["host_ms"])
    total = s["total"] if s["count"] else float("nan")  # no sample: no time, not 0 ms
    return RegionStats(
        name=name, count=s["count"], clock=clock, total_ms=total if clock == "gpu" else s["total"],
        mean_ms=s["mean"], median_ms=s["median"], min_ms=s["min"], max_ms=s["max"],
        p90_ms=s["p90"], stdev_ms=s["stdev"], host_total_ms=host["total"],
        host_mean_ms=host["mean"], raised=int(done["raised"].sum()),
        failed=int(done["failed"].sum()), gpu_clock=gpu_clock, no_gpu_work=no_work,
        samples_ms=np.array(samples, dtype=np.float64),
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
    codes, names = factorize(recs["name"])
    rows = [_stats_from(name, recs[rows]) for name, rows in zip(names, groups(codes, len(names)), strict=True)]
    rows.sort(key=lambda r: -r.total_ms if r.count else 0.0)
    return Report(rows, rank_fields())
