"""gpuprofile.merge_traces: per-rank traces (trace.rank{r}.json.gz or trace.rank{r}.parquet,
written by Profile.export_chrome_trace / export_parquet in each rank) into one Chrome/Perfetto
trace with one process per rank, on one aligned time line, with NCCL kernels named by their
collective and given bytes and bandwidth, plus the tables of docs/distributed.md: stragglers,
compute/communication per step, and the steps where late ranks held the others back.

The merge streams (issue 28): it reads the ranks one at a time, twice. The first pass reduces
each rank to its steps' numbers and its NCCL kernels (analyses.py); alignment, matching and the
tables come from those; the second pass reads each rank again and writes its events on the
merged time line (merge_writer.py). Memory holds one rank's events plus ranks x (steps +
collectives) numbers, whatever the number of ranks. align.py explains the clocks.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np

from .._format import html_table, text_table
from .._tables import Tabular
from . import analyses, engines, nccl
from .align import collective_corrections, wall_shifts
from .merge_writer import _write, nccl_name, rank_events
from .straggler import StragglerTable
from .trace_input import TraceFileError, read_trace

__all__ = ["MergeResult", "TraceFileError", "merge_traces", "read_trace"]


def _check_world(ranks) -> None:
    """TraceFileError naming the files whose world sizes disagree, or a rank beyond its world."""
    sizes: dict = {}
    for r in ranks:
        size = r.meta.get("world_size")
        if size is None:
            continue
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size < 2**31:
            raise TraceFileError(f"{r.path}: its world_size is {size!r}, not an int >= 1")
        if r.rank >= size:
            raise TraceFileError(f"{r.path}: rank {r.rank} of a world of {size} ranks")
        sizes.setdefault(size, r.path)
    if len(sizes) > 1:
        said = "; ".join(f"{size} in {path}" for size, path in sorted(sizes.items()))
        raise TraceFileError(f"the traces disagree on the world size ({said}): they are not of "
                             "one job")


def _files(paths) -> list:
    """The rank files of `paths`, a folder standing for the traces under it (the partitioned
    layout job/rank=R/trace.parquet), ordered by path with numbers compared as numbers."""
    out = []
    for p in paths:
        if not os.path.isdir(p):
            out.append(p)
            continue
        found = [os.path.join(root, name) for root, _, names in os.walk(p) for name in names
                 if name.endswith((".parquet", ".json", ".json.gz"))]
        out += sorted(found, key=lambda f: [int(x) if x.isdigit() else x
                                            for x in re.split(r"(\d+)", f)])
    return out


def _summaries(paths, step: str, engine, options: dict) -> list:
    """Pass 1: every rank reduced (analyses.RankSummary) by `engine` (engines.py), sorted by
    rank."""
    ranks = engines.summaries(paths, step, engine, **options)
    _check_world(ranks)
    seen = [r.rank for r in ranks]
    for k, r in enumerate(ranks):
        if r.rank in seen[:k]:
            first = ranks[seen.index(r.rank)].path
            raise TraceFileError(f"{r.path}: of rank {r.rank}, like {first}; two traces are of the "
                                 "same rank: pass one file per rank")
    ranks.sort(key=lambda r: r.rank)
    return ranks


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


def _align(ranks, matched, method: str) -> dict:
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
    n = len(matched["op"])
    info["collectives_matched"] = n
    if method == "collectives" and not n:
        raise ValueError("align='collectives': no NCCL collective appears in every rank's trace")
    if method != "wall" and n and len(ranks) > 1:
        ends = analyses.matrix(ranks, matched, "end").T + np.array(shifts, np.int64)[:, None]
        corrections, info["spread_median_ns"], info["spread_max_ns"] = collective_corrections(ends)
        info["corrections_ns"] = corrections
        info["method"] += " + collective ends"
        shifts = [s + c for s, c in zip(shifts, corrections, strict=True)]
    low = min(shifts)
    for r, s in zip(ranks, shifts, strict=True):
        r.shift_ns = s - low
    return info


def _collectives(ranks, matched, starts, ends) -> list:
    """One row per matched collective: op, index, bytes, last_rank (arrived last), skew_ns
    (first arrival to last), start_ns/end_ns per rank, transfer_ns, algbw/busbw (GB/s)."""
    world = len(ranks)
    nbytes = analyses.matrix(ranks, matched, "nbytes")
    rows = []
    for c, op in enumerate(matched["op"]):
        sizes = set(nbytes[c].tolist()) - {-1}
        size = sizes.pop() if len(sizes) == 1 else None
        transfer = int(ends[c].max() - starts[c].max())
        algbw, busbw = nccl.bandwidth(op, size, transfer, world)
        rows.append({"op": op, "index": int(matched["index"][c]), "bytes": size,
                     "last_rank": ranks[int(np.argmax(starts[c]))].rank,
                     "skew_ns": int(starts[c].max() - starts[c].min()),
                     "start_ns": starts[c].tolist(), "end_ns": ends[c].tolist(),
                     "transfer_ns": transfer, "algbw_gbps": algbw, "busbw_gbps": busbw})
    return rows


def _notes(ranks, i: int, matched, rows) -> dict:
    """{kernel row in rank i's file: its merged name and arguments} for rank i's NCCL kernels."""
    r = ranks[i]
    n = r.nccl
    notes = {int(row): {"_name": nccl_name(op, alg, proto)} for row, op, alg, proto in zip(
        n["row"].tolist(), n["collective"].tolist(), n["algorithm"].tolist(),
        n["protocol"].tolist(), strict=True)}
    for c, row in enumerate(rows):
        j = matched["pos"][c, i]
        start = row["start_ns"][i]
        notes[int(n["row"][j])].update({
            "collective": row["op"], "instance": row["index"], "bytes": row["bytes"],
            "wait_us": round((max(row["start_ns"]) - start) / 1000, 3),
            "transfer_us": round(row["transfer_ns"] / 1000, 3),
            "algbw_GBps": None if row["algbw_gbps"] is None else round(row["algbw_gbps"], 3),
            "busbw_GBps": None if row["busbw_gbps"] is None else round(row["busbw_gbps"], 3)})
    return notes


def _window(ranks, n_steps: int, window, steps):
    """The time window to write (ns on the merged time line), from `window` or `steps`."""
    if window is not None and steps is not None:
        raise ValueError("give window or steps, not both")
    if steps is not None:
        a, b = (steps.start or 0, steps.stop if steps.stop is not None else n_steps) \
            if isinstance(steps, range | slice) else steps
        if not (0 <= a < b <= n_steps):
            raise ValueError(f"steps {a}:{b} out of range: every rank's trace has {n_steps} "
                             "steps")
        return (min(int(r.steps[a, 0]) + r.shift_ns for r in ranks),
                max(int(r.steps[b - 1, 1]) + r.shift_ns for r in ranks))
    if window is not None:
        lo, hi = (min(max(int(x), -(2**62)), 2**62) for x in window)  # beyond any trace time
        if hi < lo:
            raise ValueError(f"window ends before it starts: {window}")
        return lo, hi
    return None


def _events(ranks, matched, rows, window, trace_ranks):
    for i, r in enumerate(ranks):
        if trace_ranks is None or r.rank in trace_ranks:
            yield from rank_events(r, _notes(ranks, i, matched, rows), window)


@dataclass
class MergeResult(Tabular):
    """What merge_traces() did: the output path, each rank's file and clock shift, how the
    clocks were aligned and how well, every matched collective, the straggler table, the
    compute/communication table per step and rank, and the steps where late ranks (one, or
    several slow at once) held the others back. Each table has to_pandas()."""

    path: str
    ranks: list
    alignment: dict
    collectives: list
    straggler: StragglerTable
    steps: analyses.StepTable = field(default_factory=lambda: analyses.StepTable(0))
    held_back: analyses.HeldBackTable = field(default_factory=analyses.HeldBackTable)
    window_ns: tuple | None = None
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"path": self.path, "ranks": self.ranks, "alignment": self.alignment,
                "collectives": self.collectives, "straggler": self.straggler.to_dict(),
                "steps": self.steps.to_dict(), "held_back": self.held_back.to_dict(),
                "window_ns": list(self.window_ns) if self.window_ns else None,
                "notes": list(self.notes)}

    def table_rows(self) -> list:
        """One row per matched collective (the other tables: self.straggler, self.steps,
        self.held_back, each with to_pandas())."""
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
        out = [f"merged {len(self.ranks)} ranks into {self.path}", self._alignment_line(), *self.notes]
        if self.window_ns:
            out.append(f"written: {self.window_ns[0] / 1e6:.6g} to {self.window_ns[1] / 1e6:.6g} ms "
                       "of the merged time line")
        if self.collectives:
            out += ["", text_table(self._OP_HEADERS, self._by_op(), title="NCCL collectives")]
        return "\n".join(out + ["", str(self.straggler), "", str(self.steps), "",
                                str(self.held_back)])

    def __repr__(self) -> str:
        return f"<MergeResult {self.path}: {len(self.ranks)} ranks, {len(self.collectives)} collectives>"

    def _repr_html_(self) -> str:
        table = html_table(self._OP_HEADERS, self._by_op(), title="NCCL collectives") if self.collectives else ""
        return (f"<p>{self._alignment_line()}</p>{table}{self.straggler._repr_html_()}"
                f"{self.steps._repr_html_()}{self.held_back._repr_html_()}")




def _notes_of(engine) -> list:
    """What the default engine could not do as DEFAULTS says (engines.default_engine)."""
    if engine not in (None, "dask"):
        return []
    return [note for a in engines.DEFAULTS if (note := engines.default_engine(a)[1])]


def merge_traces(paths, output, step: str = "step", align: str = "auto", window=None,
                 steps=None, engine: str | None = None, trace_ranks=None,
                 engine_options: dict | None = None) -> MergeResult:
    """Merge per-rank traces (Chrome JSON or Parquet, mixed as they come) into `output`, a
    Chrome/Perfetto trace (gzip when it ends in .gz): one process per rank, clocks aligned,
    NCCL kernels named by collective with bytes and bandwidth. `step`: the region that
    delimits training steps for the tables. `align`: 'auto' (wall clock, refined by collective
    ends when every rank ran one), 'wall' or 'collectives'. `window`: (start, end) ns on the
    merged time line, or `steps`: (first, stop) or a range of steps: write only the events
    that overlap it (the tables cover every step). Reads one rank at a time (docs/distributed.md).
    `engine`: who reduces the ranks for the tables, a name of engines.ENGINES ('numpy', the
    default; 'duckdb'; 'dask'), `engine_options` its keywords (memory_limit,
    temp_directory; scheduler, workers). `trace_ranks`: the ranks whose events the trace holds
    (default: all; the tables cover every rank). Returns a MergeResult (print it)."""
    if align not in ("auto", "wall", "collectives"):
        raise ValueError(f"align must be 'auto', 'wall' or 'collectives', got {align!r}")
    if isinstance(paths, (str, os.PathLike)):  # one file, not its characters
        paths = [paths]
    paths = _files([os.fspath(p) for p in paths])
    if not paths:
        raise ValueError("merge_traces: no trace files given")
    output = os.fspath(output)
    trace_ranks = None if trace_ranks is None else {int(r) for r in trace_ranks}
    options = dict(engine_options or {})
    ranks = _summaries(paths, step, engine, options)
    matched = analyses.match(ranks)
    alignment = _align(ranks, matched, align)
    shifts = np.array([r.shift_ns for r in ranks], np.int64)
    starts = analyses.matrix(ranks, matched, "start") + shifts
    ends = analyses.matrix(ranks, matched, "end") + shifts
    rows = _collectives(ranks, matched, starts, ends)
    n_steps = min((len(r.steps) for r in ranks), default=0)
    written = _window(ranks, n_steps, window, steps)
    s_rows, last, first = analyses.straggler(ranks, matched, starts, ends, n_steps)
    _write(output, _events(ranks, matched, rows, written, trace_ranks))
    info = [{"rank": r.rank, "file": r.path, "hostname": r.meta.get("hostname"),
             "world_size": r.meta.get("world_size"), "shift_ns": r.shift_ns,
             "clock_pair": r.meta.get("clock_pair")} for r in ranks]
    last_rank = [None if x is None else ranks[x].rank for x in last]
    return MergeResult(output, info, alignment, rows,
                       StragglerTable(step, len(ranks), s_rows, last_rank),
                       analyses.StepTable(len(ranks), analyses.step_rows(ranks, n_steps)),
                       analyses.HeldBackTable(engines.held_back(ranks, matched, starts, last, first,
                                                                engine, **options)),
                       written, _notes_of(engine))
