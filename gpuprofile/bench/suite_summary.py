"""The pytest plugin's summary table: one block per group, the columns and row order the user
chose (--gpu-benchmark-columns, --gpu-benchmark-sort), the saved run's median, ratio and verdict
when comparing. Pure functions of the plugin's entries; NumPy is imported only to compare."""

from __future__ import annotations

import math

# --gpu-benchmark-columns: the summary's columns after the name (pytest-benchmark's names where
# they exist); --gpu-benchmark-sort: the order of the rows in each group.
COLUMNS = ("median", "noise", "iterations", "mode", "clock", "mean", "min", "max", "stddev",
           "iqr", "p10", "p90", "ops", "rounds")
DEFAULT_COLUMNS = ("median", "noise", "iterations", "mode", "clock")
SORTS = ("name", "median", "mean", "min", "max", "stddev", "noise", "iterations", "ops")
_FIELD = {"median": "median_ms", "mean": "mean_ms", "min": "min_ms", "max": "max_ms",
          "stddev": "stdev_ms", "iqr": "iqr_ms", "p10": "p10_ms", "p90": "p90_ms"}


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


def parse_columns(text) -> tuple:
    """The columns of a --gpu-benchmark-columns value ('median,min,ops'); ValueError naming an
    unknown one."""
    columns = tuple(c.strip().lower() for c in str(text).split(",") if c.strip())
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown or not columns:
        raise ValueError(f"unknown column(s) {unknown or [text]}: choose from {', '.join(COLUMNS)}")
    return columns


def _sort_value(e, sort: str):
    r = e["result"]
    if sort == "name":
        return (0, 0.0, e["name"])
    if sort == "noise":
        value = r.get("rel_noise")
    elif sort == "iterations":
        value = r.get("iterations")
    elif sort == "ops":
        mean = r.get("mean_ms")
        value = 1e3 / mean if isinstance(mean, (int, float)) and mean > 0 else None
    else:
        value = r.get(_FIELD[sort])
    ok = isinstance(value, (int, float)) and value == value  # NaN and None last
    return (0 if ok else 1, float(value) if ok else 0.0, e["name"])


def _cell(column: str, r: dict, clock: str):
    from .._format import fmt
    from .result import fmt_time

    if column in _FIELD:
        return fmt_time(r.get(_FIELD[column]))
    if column == "noise":
        return f"±{fmt(r['rel_noise'] * 100, 3)} %"
    if column == "mode":
        return "-" if r["clock"] == "host" else r["mode"]  # the host clock has no modes
    if column == "clock":
        return clock
    if column == "ops":
        mean = r.get("mean_ms")
        return fmt(1e3 / mean) if isinstance(mean, (int, float)) and mean > 0 else "-"
    return r.get(column, 1 if column == "rounds" else "-")  # iterations, rounds


def summary_lines(entries, columns=DEFAULT_COLUMNS, sort: str = "name", threshold=None) -> list[str]:
    """The summary table, one block per group, with `columns` after the name (COLUMNS) and rows
    ordered by `sort` (SORTS: name, or a statistic, smallest first); verdicts against a saved
    run by bench/gate.py's rule at `threshold` percent (None: its default). Pure: entries as
    recorded by the fixture."""
    from .. import _stats
    from .._format import fmt, text_table
    from . import gate
    from .result import fmt_time

    lines = []
    notes = []  # why CUPTI timing was not used, once per distinct reason
    groups = sorted({e["group"] or "" for e in entries})
    with_baseline = any("baseline" in e for e in entries)
    for group in groups:
        headers = ["name", *columns]
        if with_baseline:
            headers += ["saved", "ratio", "verdict"]
        rows = []
        members = sorted((e for e in entries if (e["group"] or "") == group),
                         key=lambda e: _sort_value(e, sort))
        for e in members:
            r = e["result"]
            clock = r["clock"]
            if r.get("clock_note") and "clock" in columns:  # fell back from CUPTI: say so
                if r["clock_note"] not in notes:
                    notes.append(r["clock_note"])
                clock = f"{clock} [{notes.index(r['clock_note']) + 1}]"
            row = [e["name"], *(_cell(c, r, clock) for c in columns)]
            if with_baseline:
                b = e.get("baseline")
                if b is None:
                    row += ["-", "-", "new"]
                else:
                    low, high = _stats.ratio_interval(*gate.interval(r), b["ci_low_ms"], b["ci_high_ms"])
                    ratio = _ratio(r["median_ms"], b["median_ms"])
                    judged = gate.stored(ratio, low, high, r.get("rounds", 1), b.get("rounds", 1),
                                         threshold, r.get("clock")).verdict
                    row += [fmt_time(b["median_ms"]), f"{fmt(ratio)}x", judged]
            rows.append(row)
        lines += text_table(headers, rows, title=f"group: {group}" if group else None).splitlines()
        lines.append("")
    lines += [f"[{k + 1}] {note}" for k, note in enumerate(notes)]
    if min(e["result"].get("rounds", 1) for e in entries) <= 1:
        lines.append(f"note: {gate.WITHIN_ONE_RUN}")
    return lines
