"""The straggler table of a merged multi-rank trace: per training step and rank, GPU compute
time, time in collective kernels, how much of that was spent waiting for the last rank, and which
rank arrived last. analyses.py computes the rows from columns, a rank at a time.

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

from .._format import html_table, text_table
from .._tables import Tabular, named_row


@dataclass
class StragglerTable(Tabular):
    """Per step and rank: compute, collective and wait time (ms) and who arrived last; totals
    per rank. print() it, show it in a notebook, or to_dict() it."""

    step: str
    world_size: int
    rows: list = field(default_factory=list)  # from analyses.straggler
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
        """One row per step and rank, named and scaled as printed (ms), with whether that rank
        arrived last (to_dict() keeps the ns; the printed totals are a frame's groupby)."""
        return [named_row(self._HEADERS, [row["step"], row["rank"], row["compute_ns"] / 1e6,
                                          row["collective_ns"] / 1e6, row["wait_ns"] / 1e6,
                                          self.last[row["step"]] == row["rank"]])
                for row in self.rows]

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
