"""The straggler table of a merged multi-rank trace: per training step and rank, GPU compute
time, time in collective kernels, how much of that was spent waiting for the last rank, and which
rank arrived last. Pure maths on aligned times (gpuprofile.tracing.merge gathers them).

Definitions (all on the merged, aligned time line, per rank r and step k, where step k is the
k-th instance of the step region on that rank, taken from its GPU span when the trace has one and
from the host region otherwise):

- compute: the union of r's non-NCCL kernels inside the step;
- collective: the union of r's NCCL kernels inside the step;
- wait: for each collective that every rank ran (matched by order), the time from r's kernel
  start to the latest start over all ranks (at most the kernel's duration): a collective cannot
  move data before every rank has joined, so this part of the collective time is waiting;
- arrived last: for the step's first collective that every rank started inside its step k, the
  rank whose kernel started last; the others waited for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._format import html_table, text_table
from .._tables import Tabular
from .align import union_ns


@dataclass
class RankTimes:
    """One rank's aligned times: step windows (n x 2), kernels' start and end, and each kernel's
    collective: -1 for compute, -2 for a collective not matched on every rank, else the row of
    the matched collective."""

    steps: np.ndarray
    start: np.ndarray
    end: np.ndarray
    instance: np.ndarray


def straggler_rows(ranks: list, inst_start) -> tuple:
    """(rows, last rank per step) from RankTimes per rank and the matched collectives' start
    times (collectives x ranks). A row: step, rank, compute_ns, collective_ns, wait_ns. Each
    step looks only at the kernels and collectives near it (sorted once), so the cost grows
    linearly with steps and kernels."""
    starts = np.asarray(inst_start, dtype=np.int64).reshape(-1, len(ranks))
    latest = starts.max(axis=1) if starts.size else np.empty(0, np.int64)
    by_start = [np.argsort(starts[:, r], kind="stable") for r in range(len(ranks))]
    local = [_sorted(t) for t in ranks]
    n_steps = min((len(r.steps) for r in ranks), default=0)
    rows, last = [], []
    for k in range(n_steps):
        common = None  # matched collectives that start inside step k on every rank
        for r, (t, (s, e, inst, longest)) in enumerate(zip(ranks, local, strict=True)):
            lo, hi = int(t.steps[k][0]), int(t.steps[k][1])
            col = starts[by_start[r], r]
            mine = by_start[r][np.searchsorted(col, lo):np.searchsorted(col, hi)]
            common = mine if common is None else np.intersect1d(common, mine)
            a, b = np.searchsorted(s, lo - longest), np.searchsorted(s, hi)
            ks, ke, ki = s[a:b], e[a:b], inst[a:b]
            compute = ki == -1
            in_step = (ki >= 0) & (ks >= lo)
            wait = np.minimum(latest[ki[in_step]], ke[in_step]) - ks[in_step]
            rows.append({"step": k, "rank": r,
                         "compute_ns": union_ns(ks[compute], ke[compute], lo, hi),
                         "collective_ns": union_ns(ks[~compute], ke[~compute], lo, hi),
                         "wait_ns": int(np.maximum(wait, 0).sum())})
        if common is not None and common.size:
            i = common[np.argmin(starts[common].min(axis=1))]
            last.append(int(np.argmax(starts[i])))
        else:
            last.append(None)
    return rows, last


def _sorted(t: RankTimes) -> tuple:
    """A rank's kernels by start time, and the longest kernel (how far before a step a kernel
    that reaches into it can start)."""
    order = np.argsort(t.start, kind="stable")
    s, e = t.start[order], t.end[order]
    return s, e, t.instance[order], int((e - s).max()) if s.size else 0


@dataclass
class StragglerTable(Tabular):
    """Per step and rank: compute, collective and wait time (ms) and who arrived last; totals
    per rank. print() it, show it in a notebook, or to_dict() it."""

    step: str
    world_size: int
    rows: list = field(default_factory=list)  # from straggler_rows
    last: list = field(default_factory=list)  # the last rank of each step (None: no collective)

    def totals(self) -> list:
        out = []
        for r in range(self.world_size):
            mine = [row for row in self.rows if row["rank"] == r]
            out.append({"rank": r, "steps": len(mine),
                        **{k: sum(row[k] for row in mine)
                           for k in ("compute_ns", "collective_ns", "wait_ns")},
                        "arrived_last": sum(1 for x in self.last if x == r)})
        return out

    def to_dict(self) -> dict:
        return {"step": self.step, "world_size": self.world_size, "rows": list(self.rows),
                "last_rank": list(self.last), "totals": self.totals()}

    def table_rows(self) -> list:
        """One row per step and rank (times in ns), with whether that rank arrived last."""
        return [{**row, "arrived_last": self.last[row["step"]] == row["rank"]} for row in self.rows]

    _HEADERS = ["step", "rank", "compute ms", "collective ms", "wait ms", "arrived last"]

    def _rows(self):
        body = []
        for row in self.rows:
            last = self.last[row["step"]]
            body.append([str(row["step"]), row["rank"], row["compute_ns"] / 1e6,
                         row["collective_ns"] / 1e6, row["wait_ns"] / 1e6,
                         "last" if last == row["rank"] else ""])
        for t in self.totals():
            body.append(["total", t["rank"], t["compute_ns"] / 1e6, t["collective_ns"] / 1e6,
                         t["wait_ns"] / 1e6, f"{t['arrived_last']} of {t['steps']}"])
        return body

    def _title(self) -> str:
        return (f"stragglers per '{self.step}' step ({len(self.last)} steps, "
                f"{self.world_size} ranks)")

    def __str__(self) -> str:
        if not self.rows:
            return f"{self._title()}: no step found in every rank's trace"
        return text_table(self._HEADERS, self._rows(), title=self._title())

    def __repr__(self) -> str:
        return f"<StragglerTable '{self.step}': {len(self.last)} steps, {self.world_size} ranks>"

    def _repr_html_(self) -> str:
        return html_table(self._HEADERS, self._rows(), title=self._title())
