"""The analyses of a merged multi-rank trace, computed from columns a rank at a time (issue 28).

Per rank, from its own kernels and step windows (on its own clock: nothing here depends on the
alignment), RankSummary keeps per step: the step's length, compute (union of non-NCCL kernels),
communication (union of NCCL kernels), their overlap (time when both run), exposed
communication (communication minus overlap) and idle time (no kernel at all); and of every NCCL
kernel its times and how long the GPU had been idle right before it. Everything a rank's
kernels say about its steps is reduced here, so the merge holds ranks x steps numbers, not
events.

Across ranks (after alignment), `match` pairs the k-th NCCL kernel of each collective on every
rank (NCCL requires the same order on every rank of a communicator), and `held_back` lists the
steps where one rank, or a group of ranks slow at once, arrived last at the step's first
collective, by how much they held the others, and why: the last rank's GPU idled before the
collective longer than the others' (a late launch by its host: data loading, a sync, Python) or
its own kernels took longer (compute).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._format import html_table, text_table
from .._tables import Tabular, named_row


def runs(start, end) -> tuple:
    """The union of intervals [start, end) as disjoint sorted runs (starts, ends) and the
    running total of their lengths (one longer, from 0)."""
    s = np.asarray(start, np.int64)
    e = np.asarray(end, np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if not s.size:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(1, np.int64)
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum.accumulate(e[order])
    new = np.r_[True, s[1:] > e[:-1]]
    run_start = s[new]
    run_end = np.maximum.reduceat(e, np.flatnonzero(new))
    return run_start, run_end, np.r_[0, np.cumsum(run_end - run_start)]


def covered(r, lo, hi) -> np.ndarray:
    """Length of runs `r` (from runs()) inside each window [lo, hi), vectorized over windows."""
    rs, re, cum = r
    lo = np.asarray(lo, np.int64)
    hi = np.maximum(np.asarray(hi, np.int64), lo)

    def before(t):  # covered length in (-inf, t)
        j = np.searchsorted(rs, t, side="left")  # runs that start before t
        last_end = re[np.maximum(j - 1, 0)] if re.size else np.zeros_like(t)
        return cum[j] - np.where(j > 0, np.maximum(last_end - t, 0), 0)

    if not rs.size:
        return np.zeros(lo.shape, np.int64)
    return before(hi) - before(lo)


STEP_FIELDS = ("step_ns", "compute_ns", "collective_ns", "overlap_ns", "exposed_ns", "idle_ns")


@dataclass
class RankSummary:
    """One rank reduced: its steps' numbers (STEP_FIELDS, one array each), the windows, and
    its NCCL kernels sorted by start (start, end, collective, algorithm, protocol, nbytes, row,
    idle_before: the GPU's idle time right before the kernel, since the end of every kernel
    that started earlier)."""

    rank: int
    path: str
    meta: dict
    gpus: list
    steps: np.ndarray
    per_step: dict
    nccl: dict
    shift_ns: int = 0


def summarize(rank: int, path: str, scan) -> RankSummary:
    start, end = scan.start, scan.end
    is_nccl = scan.collective != ""
    lo, hi = scan.steps[:, 0], scan.steps[:, 1]
    every = runs(start, end)
    compute = covered(runs(start[~is_nccl], end[~is_nccl]), lo, hi)
    comm = covered(runs(start[is_nccl], end[is_nccl]), lo, hi)
    busy = covered(every, lo, hi)
    overlap = compute + comm - busy
    per_step = {"step_ns": np.maximum(hi - lo, 0), "compute_ns": compute, "collective_ns": comm,
                "overlap_ns": overlap, "exposed_ns": comm - overlap,
                "idle_ns": np.maximum(hi - lo, 0) - busy}
    order = np.argsort(start, kind="stable")
    prior = np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(end[order])[:-1]]
    idle_before = np.empty(start.size, np.int64)
    idle_before[order] = np.maximum(start[order] - prior, 0) if start.size else prior[:0]
    first = np.ones(start.size, bool)  # the first kernel: idle since the step began (below)
    if start.size:
        first[order[1:]] = False
    pick = order[is_nccl[order]]
    nccl = {"start": start[pick], "end": end[pick], "collective": scan.collective[pick],
            "algorithm": scan.algorithm[pick], "protocol": scan.protocol[pick],
            "nbytes": scan.nbytes[pick], "row": scan.row[pick],
            "idle_before": np.where(first[pick], np.iinfo(np.int64).max, idle_before[pick])}
    return RankSummary(rank, path, scan.meta, scan.gpus, scan.steps, per_step, nccl)


def match(ranks) -> dict:
    """Matched collectives, ordered by the first rank's start: {'op': list, 'index': array (k of
    that op), 'pos': (collectives x ranks) positions into each rank's nccl arrays}."""
    per_rank = []
    for r in ranks:
        ops = r.nccl["collective"]
        per_rank.append({op: np.flatnonzero(ops == op) for op in set(ops.tolist())})
    names, index, pos = [], [], []
    for op in sorted(set().union(*per_rank) if per_rank else ()):
        count = min(len(p.get(op, ())) for p in per_rank)
        if count:
            names += [op] * count
            index.append(np.arange(count))
            pos.append(np.stack([p[op][:count] for p in per_rank], axis=1))
    if not pos:
        return {"op": [], "index": np.zeros(0, np.int64), "pos": np.zeros((0, len(ranks)), np.int64)}
    index, pos = np.concatenate(index), np.concatenate(pos)
    first = ranks[0].nccl["start"][pos[:, 0]]
    order = np.argsort(first, kind="stable")
    return {"op": [names[i] for i in order], "index": index[order], "pos": pos[order]}


def matrix(ranks, matched, key: str) -> np.ndarray:
    """(collectives x ranks) of a matched collective's field on each rank."""
    pos = matched["pos"]
    out = np.zeros(pos.shape, np.int64)
    for i, r in enumerate(ranks):
        out[:, i] = r.nccl[key][pos[:, i]]
    return out


def step_of(windows, t) -> np.ndarray:
    """The step whose window [lo, hi) holds each time t, else -1."""
    if not len(windows):
        return np.full(np.shape(t), -1, np.int64)
    k = np.searchsorted(windows[:, 0], t, side="right") - 1
    inside = (k >= 0) & (t < windows[np.maximum(k, 0), 1])
    return np.where(inside, k, -1)


def straggler(ranks, matched, starts, ends, n_steps: int) -> tuple:
    """(rows, last rank per step, first collective per step) on aligned `starts`/`ends`
    (collectives x ranks). Rows: step, rank, compute_ns, collective_ns, wait_ns (straggler.py
    defines them)."""
    world = len(ranks)
    latest = starts.max(axis=1) if starts.size else np.zeros(0, np.int64)
    wait = np.maximum(np.minimum(latest[:, None], ends) - starts, 0)
    steps = np.full(starts.shape, -1, np.int64)
    waits = np.zeros((n_steps, world), np.int64)
    for i, r in enumerate(ranks):
        own = starts[:, i] - r.shift_ns  # back on the rank's clock, as its windows are
        steps[:, i] = step_of(r.steps[:n_steps], own)
        ok = steps[:, i] >= 0
        waits[:, i] = np.bincount(steps[ok, i], weights=wait[ok, i], minlength=n_steps)[:n_steps]
    rows = []
    for k in range(n_steps):
        for i, r in enumerate(ranks):
            rows.append({"step": k, "rank": r.rank,
                         "compute_ns": int(r.per_step["compute_ns"][k]),
                         "collective_ns": int(r.per_step["collective_ns"][k]),
                         "wait_ns": int(waits[k, i])})
    same = (steps == steps[:, :1]).all(axis=1) & (steps[:, 0] >= 0) if starts.size else np.zeros(0, bool)
    last, first = [None] * n_steps, [None] * n_steps
    if same.any():
        cands = np.flatnonzero(same)
        earliest = starts[cands].min(axis=1)
        for c in cands[np.lexsort((earliest, steps[cands, 0]))][::-1]:  # earliest wins
            first[steps[c, 0]] = int(c)
        for k, c in enumerate(first):
            if c is not None:
                last[k] = int(np.argmax(starts[c]))
    return rows, last, first


def step_rows(ranks, n_steps: int) -> list:
    """One row per step and rank: STEP_FIELDS."""
    return [{"step": k, "rank": r.rank, **{f: int(r.per_step[f][k]) for f in STEP_FIELDS}}
            for k in range(n_steps) for r in ranks]


def _idle_before(r, j: int, k: int) -> int:
    """Rank r's GPU idle time right before its NCCL kernel j, within step k."""
    own = int(r.nccl["start"][j])
    lo = int(r.steps[k, 0])
    return max(min(int(r.nccl["idle_before"][j]), own - lo), 0)


def late_group(s) -> list:
    """Indices of the ranks that arrived late at a collective, from their starts `s`: those
    closer to the latest start than to the median start (s > median + (latest - median) / 2),
    latest first (ties: the lower index, as straggler's `last`). Empty when the latest start is
    the median (at least half the ranks arrived last together: nobody held the others). Integer
    arithmetic: times in ns since an epoch do not fit a float's 53 bits."""
    s = [int(x) for x in s]
    lo = min(s)
    d = sorted(x - lo for x in s)
    twice_median = d[(len(d) - 1) // 2] + d[len(d) // 2]
    latest = d[-1]
    # s > m + (latest - m) / 2  <=>  4 s > 2 m + 2 latest
    late = [i for i, x in enumerate(s) if 4 * (x - lo) > twice_median + 2 * latest]
    return sorted(late, key=lambda i: (-s[i], i))


def held_back(ranks, matched, starts, last, first) -> list:
    """Steps where a late group of ranks arrived last at the step's first collective, most held
    first. The late group (late_group()) is the ranks whose start is closer to the latest start
    than to the median start: one slow rank, or several slow at once. Rows: step, rank (the
    last to arrive, as straggler's `last`), ranks (the late group's rank ids, sorted),
    collective, held_ns (the last rank's start minus the latest start of the ranks not in the
    group: how much sooner the collective could have started without the group;
    for one late rank, its start minus the next latest), idle_before_ns and compute_ns of the
    last rank, the medians of both over the ranks not in the group, and the reason: 'late
    launch' when the last rank's GPU idled before the collective longer than the others' by
    more than its compute exceeded theirs, 'compute' when the reverse, 'unclear' when the two
    are equal. A step with no late group (the latest start is also the median) is not listed."""
    out = []
    if len(ranks) < 2:
        return out
    for k, (who, c) in enumerate(zip(last, first, strict=True)):
        if who is None:
            continue
        s = starts[c]
        group = late_group(s)
        if not group:
            continue
        rest = np.setdiff1d(np.arange(len(ranks)), group)
        held = int(s[who] - np.max(s[rest]))
        if held <= 0:
            continue
        idle = np.array([_idle_before(r, int(matched["pos"][c, i]), k) for i, r in enumerate(ranks)])
        compute = np.array([int(r.per_step["compute_ns"][k]) for r in ranks])
        others_idle = int(round(float(np.median(idle[rest]))))
        others_compute = int(round(float(np.median(compute[rest]))))
        late, busy = int(idle[who]) - others_idle, int(compute[who]) - others_compute
        out.append({"step": k, "rank": ranks[who].rank,
                    "ranks": sorted(ranks[i].rank for i in group),
                    "collective": f"{matched['op'][c]} #{int(matched['index'][c])}",
                    "held_ns": held,
                    "idle_before_ns": int(idle[who]), "others_idle_before_ns": others_idle,
                    "compute_ns": int(compute[who]), "others_compute_ns": others_compute,
                    "reason": "late launch" if late > busy else "compute" if busy > late else "unclear"})
    out.sort(key=lambda row: (-row["held_ns"], row["step"]))
    return out


@dataclass
class StepTable(Tabular):
    """Per step and rank: step length, compute, communication, their overlap, exposed
    communication and idle time (ns in rows, ms when printed)."""

    world_size: int
    rows: list = field(default_factory=list)

    _HEADERS = ["step", "rank", "step ms", "compute ms", "comm ms", "overlap ms", "exposed ms",
                "idle ms"]

    def table_rows(self) -> list:
        """Every step's row, named and scaled as printed (ms); to_dict() keeps the ns."""
        return [named_row(self._HEADERS, [row["step"], row["rank"], *(row[f] / 1e6 for f in STEP_FIELDS)])
                for row in self.rows]

    def to_dict(self) -> dict:
        return {"world_size": self.world_size, "rows": list(self.rows), "totals": self.totals()}

    def totals(self) -> list:
        out = []
        for rank in sorted({row["rank"] for row in self.rows}):
            mine = [row for row in self.rows if row["rank"] == rank]
            out.append({"rank": rank, "steps": len(mine),
                        **{f: sum(row[f] for row in mine) for f in STEP_FIELDS}})
        return out

    def _body(self) -> list:
        return [["total", t["rank"], *(t[f] / 1e6 for f in STEP_FIELDS)] for t in self.totals()]

    def _title(self) -> str:
        return (f"compute/communication per rank ({self.world_size} ranks, totals over steps; "
                "to_pandas() has every step)")

    def __str__(self) -> str:
        if not self.rows:
            return "compute/communication per rank: no step found in every rank's trace"
        return text_table(self._HEADERS, self._body(), title=self._title())

    def __repr__(self) -> str:
        return f"<StepTable: {len(self.rows)} rows, {self.world_size} ranks>"

    def _repr_html_(self) -> str:
        return html_table(self._HEADERS, self._body(), title=self._title())


@dataclass
class HeldBackTable(Tabular):
    """Steps where a rank, or a group of late ranks, held the others back, most first
    (held_back() defines the rows; `rank` is the last to arrive, `ranks` the late group)."""

    rows: list = field(default_factory=list)
    top: int = 10

    _HEADERS = ["step", "rank", "late ranks", "collective", "held us", "GPU idle before us",
                "others' idle us", "compute ms", "others' compute ms", "why"]

    def table_rows(self) -> list:
        """Every row (not only the top), named and scaled as printed (us, ms); to_dict() keeps
        the ns. `late_ranks` is a list here, "2,3" when printed."""
        return [named_row(self._HEADERS, self._cells(r)) for r in self.rows]

    def to_dict(self) -> dict:
        return {"rows": list(self.rows)}

    @staticmethod
    def _cells(r) -> list:
        return [r["step"], r["rank"], list(r["ranks"]), r["collective"], r["held_ns"] / 1e3,
                r["idle_before_ns"] / 1e3, r["others_idle_before_ns"] / 1e3, r["compute_ns"] / 1e6,
                r["others_compute_ns"] / 1e6, r["reason"]]

    def _body(self) -> list:
        body = [self._cells(r) for r in self.rows[: self.top]]
        for cells in body:
            cells[0], cells[2] = str(cells[0]), ",".join(map(str, cells[2]))
        return body

    def _title(self) -> str:
        return f"steps where late ranks held the others back (top {min(self.top, len(self.rows))} of {len(self.rows)})"

    def __str__(self) -> str:
        if not self.rows:
            return "no step where late ranks held the others back"
        return text_table(self._HEADERS, self._body(), title=self._title())

    def __repr__(self) -> str:
        return f"<HeldBackTable: {len(self.rows)} steps>"

    def _repr_html_(self) -> str:
        return html_table(self._HEADERS, self._body(), title=self._title())
