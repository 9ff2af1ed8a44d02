"""A/B in one run: two or more callables timed in interleaved rounds, the order rotated each
round, and judged by the median of their paired ratios.

    r = gp.benchmark({"ref": old, "new": new}, x, rounds=10)    # the first entry is the reference
    r.verdict, r.ratio, r.ratio_low, r.ratio_high, r.results["new"]

Comparing two runs taken at different times reads drift between them (clock and power state,
heat, neighbours) as a change. Here every round times every callable back to back, so what
drifts moves both sides of a round alike and cancels in that round's ratio (its median over the
reference's median of the same round); rotating the order gives no callable a fixed place
(first after a pause, or right after a cache-hungry neighbour). The interval of the median ratio
is the distribution-free order-statistic interval over the rounds (bench/_stats.median_ci), so
it spans the variation between rounds, and the verdict is the gates' rule (bench/gate.py).

interleave() and rotation() are the loop alone, for benchmark scripts whose rounds are not one
callable each (a block of training steps, a child process): they time what they like and pass
their paired numbers to paired_ratio().
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .._format import fmt, html_table, text_table
from .._tables import Tabular
from . import gate

# A/B defaults where the caller gives none: enough rounds for a 95 % interval of the median
# ratio with a rank to spare (10 rounds: the 2nd and 9th of the sorted ratios), and short rounds,
# since it is the rounds, not one long round, that see the spread between runs.
AB_DEFAULTS = dict(rounds=10, warmup=0.05, min_time=0.05, max_time=0.5)


def rotation(order: list, i: int) -> list:
    """Round i's order: `order` rotated left by i, so that every entry takes every place."""
    k = i % len(order) if order else 0
    return list(order[k:]) + list(order[:k])


def interleave(runs: dict, rounds: int) -> dict:
    """Call every runs[name]() once per round, `rounds` rounds, in an order rotated each round;
    {name: [what each call returned, in round order]}."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be an int >= 1, got {rounds!r}")
    out: dict = {name: [] for name in runs}
    for i in range(rounds):
        for name in rotation(list(runs), i):
            out[name].append(runs[name]())
    return out


def paired_ratio(new, ref) -> tuple[float, float, float]:
    """(median, low, high) of the per-round ratios new[i] / ref[i]: their median and its 95 %
    order-statistic interval ((nan, nan) under 6 rounds). Non-positive or non-finite pairs make
    the median NaN (a gate never passes it)."""
    import numpy as np

    from .. import _stats

    a, b = np.asarray(new, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"paired_ratio needs two equal, non-empty lists, got {a.size} and {b.size}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b)) and np.all(b > 0) and np.all(a >= 0)):
        return math.nan, math.nan, math.nan
    ratios = a / b
    return (float(np.median(ratios)), *_stats.median_ci(ratios))


def judge(new, ref, threshold=None, clock: str | None = None) -> gate.Decision:
    """The gates' verdict on per-round times new[i] vs ref[i] measured in interleaved rounds
    (`clock` picks the default threshold)."""
    ratio, low, high = paired_ratio(new, ref)
    n = len(new)
    too_few = (f"{n} paired rounds, {gate.MIN_PAIRED_ROUNDS} needed"
               if n < gate.MIN_PAIRED_ROUNDS else None)
    return gate.decide(ratio, low, high, threshold=gate.threshold_pct(threshold, clock), between_runs=True,
                       basis=f"{n} paired rounds", too_few=too_few)


@dataclass
class ABResult(Tabular):
    """Two or more callables measured in interleaved rounds against the first (the reference).

    results: {name: BenchmarkResult} each side's own result (its rounds merged, bench/rounds.py).
    decisions: {name: gate.Decision} for every name but the reference: the median of the paired
    per-round ratios name / reference, its 95 % interval, and the verdict. For two callables,
    verdict, ratio, ratio_low and ratio_high are the second one's."""

    reference: str
    results: dict
    decisions: dict
    rounds: int
    clock: str
    round_medians_ms: dict = field(default_factory=dict)

    @property
    def _only(self) -> gate.Decision:
        if len(self.decisions) != 1:
            raise AttributeError("several candidates: read decisions[name]")
        return next(iter(self.decisions.values()))

    verdict = property(lambda self: self._only.verdict)
    ratio = property(lambda self: self._only.ratio)
    ratio_low = property(lambda self: self._only.low)
    ratio_high = property(lambda self: self._only.high)

    @property
    def fails(self) -> bool:
        """Whether a gate fails: a candidate slower than the reference, or a number not finite."""
        return any(d.fails for d in self.decisions.values())

    def lines(self) -> list:
        """One gate line per candidate (bench/gate.py Decision.line)."""
        return [d.line(f"{name} vs {self.reference}", self.clock) for name, d in self.decisions.items()]

    def to_dict(self) -> dict:
        return {"reference": self.reference, "rounds": self.rounds, "clock": self.clock,
                "decisions": {n: d.to_dict() for n, d in self.decisions.items()},
                "round_medians_ms": {n: list(m) for n, m in self.round_medians_ms.items()},
                "results": {n: r.to_dict() for n, r in self.results.items()}}

    def table_rows(self) -> list:
        rows = []
        for name, r in self.results.items():
            d = self.decisions.get(name)
            rows.append({"name": name, "median_ms": r.median_ms, "rounds": r.rounds,
                         "ratio": d.ratio if d else 1.0, "ratio_low": d.low if d else 1.0,
                         "ratio_high": d.high if d else 1.0,
                         "verdict": d.verdict if d else "reference"})
        return rows

    def _table(self):
        from .result import fmt_time

        headers = ["name", "median", "paired ratio", "95% interval", "verdict"]
        body = [[row["name"], fmt_time(row["median_ms"]),
                 "" if row["verdict"] == "reference" else f"{fmt(row['ratio'])}x",
                 "" if row["verdict"] == "reference" else f"{fmt(row['ratio_low'])} .. {fmt(row['ratio_high'])}",
                 row["verdict"]] for row in self.table_rows()]
        return headers, body

    def _title(self) -> str:
        return f"A/B: {self.rounds} interleaved rounds, order rotated, {self.clock} clock"

    def __repr__(self) -> str:
        headers, body = self._table()
        return "\n".join([text_table(headers, body, title=self._title()), *self.lines()])

    def _repr_html_(self) -> str:
        headers, body = self._table()
        return html_table(headers, body, title=self._title())


def result(per_round: dict, threshold=None) -> ABResult:
    """The ABResult of {name: [one BenchmarkResult per round]} (the first name the reference):
    each side's rounds merged (bench/rounds.py), each candidate judged on its paired medians."""
    from .rounds import merge_rounds

    reference, *candidates = list(per_round)
    medians = {n: [r.median_ms for r in rs] for n, rs in per_round.items()}
    results = {n: merge_rounds(rs) for n, rs in per_round.items()}
    clock = "+".join(sorted({r.clock for r in results.values()}))
    decisions = {n: judge(medians[n], medians[reference], threshold, clock) for n in candidates}
    return ABResult(reference, results, decisions, len(medians[reference]), clock, medians)
