"""Saved benchmark results on disk, and their comparison (`gpuprofile compare`).

Three kinds of file hold results: one BenchmarkResult (`result.save(path)`, `gpuprofile bench
--json`), the pytest plugin's saved runs ({"gpuprofile_benchmark_file": 1, "results": [...]}),
and pytest-benchmark's JSON (the plugin's --gpu-benchmark-json export, or pytest-benchmark's own
files: bench/pytest_json.py). A JSON list of results is read too. Files of one result each are compared
with each other whatever their names (a before/after pair of `gpuprofile bench` runs); files of
several are matched by result name (a test suite saved twice).
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
from dataclasses import dataclass

from .._files import read_json
from .._format import fmt_column, html_table, text_table
from .._tables import Tabular
from .pytest_json import is_pytest_benchmark, results_of
from .result import BenchmarkResult, compared_row, fmt_times


class ResultFileError(ValueError):
    """A file that cannot be read as benchmark results; the message names the file."""


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector off for the block: reading and comparing saved
    results makes millions of objects that hold no cycles, and each of its full passes visits
    every one of them (a third of the CPU time of a compare of 50k results, 2026-12-05)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_results(path) -> list:
    """The BenchmarkResults in a saved file (one result, a pytest plugin file, or a list)."""
    with collector_paused():
        return _load_results(path)


def _load_results(path) -> list:
    try:
        data = read_json(path)
    except (OSError, ValueError) as e:
        raise ResultFileError(f"cannot read {path}: {e}") from None
    if is_pytest_benchmark(data):  # pytest-benchmark's JSON, or our export in its schema
        try:
            items = results_of(data, str(path))
        except ValueError as e:
            raise ResultFileError(str(e)) from None
        for d in items:
            if d.get("mode") == "pytest-benchmark" and not d.get("samples"):
                raise ResultFileError(
                    f"{path}: {d['name']}: a pytest-benchmark result without its samples has no "
                    "interval of its median to compare; save them (pytest --benchmark-save-data)")
    elif isinstance(data, dict) and isinstance(data.get("results"), list):
        items = data["results"]
    elif isinstance(data, dict):
        items = [data]
    elif isinstance(data, list):
        items = data
    else:
        items = None
    if not items or not all(isinstance(d, dict) and "median_ms" in d and "name" in d for d in items):
        raise ResultFileError(f"{path} holds no gpuprofile benchmark results (a file written by "
                              "BenchmarkResult.save, `gpuprofile bench --json`, pytest "
                              "--gpu-benchmark-save or pytest-benchmark's JSON)")
    try:
        return [BenchmarkResult.from_dict(d) for d in items]
    except (TypeError, ValueError) as e:  # from_dict names the missing or mistyped field
        raise ResultFileError(f"{path}: a result lacks fields or has wrong ones: {e}") from None


def file_labels(paths) -> list:
    """Short labels for files: base names, or the paths as given where base names collide; a
    file given twice gets its position too ("r.json (2)")."""
    names = [os.path.basename(str(p)) for p in paths]
    if len(set(names)) != len(names):
        names = [str(p) for p in paths]
    return [n if names.index(n) == i else f"{n} ({i + 1})" for i, n in enumerate(names)]


@dataclass
class FileRow:
    name: str
    file: str
    median_ms: float
    rel_noise: float
    ratio: float
    ratio_low: float
    ratio_high: float
    verdict: str  # baseline | faster | slower | same | unknown | new (not in the baseline)
    rounds: int = 1  # whole measurements behind the result (its interval spans their medians)
    why: str = ""  # the gate's line (bench/gate.py Decision.line)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class FileComparison(Tabular):
    """Every result against the baseline file's result of the same name (see compare())."""

    baseline: str
    files: list
    rows: list
    missing: list  # (name, file): in the baseline, absent from that file

    def to_dict(self) -> dict:
        return {"baseline": self.baseline, "files": list(self.files),
                "rows": [r.to_dict() for r in self.rows],
                "missing": [{"name": n, "file": f} for n, f in self.missing]}

    def table_rows(self) -> list:
        """One row per result of every file (FileRow's fields); the missing ones are not rows."""
        return [r.to_dict() for r in self.rows]

    def regressions(self, threshold_pct: float = 0.0) -> list:
        """Rows the gate's rule called slower (bench/gate.py decide(), at compare_files'
        threshold) whose ratio's lower bound also exceeds 1 + threshold_pct / 100."""
        return [r for r in self.rows if r.verdict == "slower" and r.ratio_low > 1 + threshold_pct / 100]

    def scope_note(self) -> str:
        """What the bounds mean, in one line: within one run, or the spread between rounds."""
        from .gate import WITHIN_ONE_RUN

        fewest = min((r.rounds for r in self.rows), default=1)
        if fewest > 1:
            return (f"note: every result was measured in {fewest} rounds or more: its interval "
                    "spans the spread between those runs (not between machines or days)")
        return f"note: {WITHIN_ONE_RUN}"

    def counts(self) -> dict:
        out = {}
        for r in self.rows:
            if r.verdict != "baseline":
                out[r.verdict] = out.get(r.verdict, 0) + 1
        return out

    def _table(self):
        headers = ["name", "file", "median", "noise", "ratio", "ratio 95% bounds", "verdict"]
        rows = self.rows  # a column at a time: 400k rows in a compare of 200k pairs
        noise = fmt_column([r.rel_noise * 100 for r in rows], 3)
        ratio, low, high = (fmt_column([getattr(r, k) for r in rows])
                            for k in ("ratio", "ratio_low", "ratio_high"))
        body = [[r.name, r.file, median, f"±{n} %", "", "", r.verdict]
                if r.verdict in ("baseline", "new") else
                [r.name, r.file, median, f"±{n} %", f"{x}x", f"{lo} .. {hi}", r.verdict]
                for r, median, n, x, lo, hi in zip(rows, fmt_times([r.median_ms for r in rows]), noise,
                                                  ratio, low, high, strict=True)]
        return headers, body

    def _title(self) -> str:
        return f"compare: vs {self.baseline}"

    def __str__(self) -> str:
        headers, body = self._table()
        lines = [text_table(headers, body, title=self._title())]
        lines += [f"missing: {n} (not in {f})" for n, f in self.missing]
        summary = ", ".join(f"{n} {v}" for v, n in sorted(self.counts().items()))
        lines.append(f"verdicts: {summary or 'none'}")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        headers, body = self._table()
        return html_table(headers, body, title=self._title())


def compare_files(files, baseline: int = 0, threshold=None) -> FileComparison:
    """Compare [(label, [BenchmarkResult, ...]), ...] against files[baseline]: each result's
    median ratio to the baseline's, with the interval and verdict of bench.result.compare().
    A result a gate cannot trust (bench/gate.py) is a ResultFileError naming its file, result
    and field: the comparison fails closed."""
    from . import gate

    trusted = set()  # ids of the results passing() decided: their pairs are decided at once
    for label, results in files:
        for r, ok in zip(results, gate.passing(results), strict=True):
            why = None if ok else gate.problem(r)  # all at once, one by one where not shown
            if why is not None:
                raise ResultFileError(f"{label}: result {r.name!r}: {why}")
            if ok:
                trusted.add(id(r))
    if len(files) < 2:
        raise ValueError("compare needs at least two files")
    if not -len(files) <= baseline < len(files):
        raise ValueError(f"baseline {baseline} is out of range for {len(files)} files")
    baseline %= len(files)
    labels = [label for label, _ in files]
    by_position = all(len(results) == 1 for _, results in files)
    table = []
    for _, results in files:
        keyed = {}
        for r in results:
            keyed.setdefault("" if by_position else r.name, r)
        table.append(keyed)
    # the baseline's names first, then the others' in order of appearance: dict keys, so that
    # each name is looked up once, not against every name before it (200k results in seconds)
    names = list(dict.fromkeys([*table[baseline], *(n for keyed in table for n in keyed)]))
    rows, missing, pairs = [], [], []
    base_table = table[baseline]
    for name in names:
        base = base_table.get(name)
        if base is None:  # not in the baseline
            rows += [FileRow(r.name, labels[i], r.median_ms, r.rel_noise, math.nan, math.nan, math.nan,
                             "new", r.rounds) for i, keyed in enumerate(table)
                     if (r := keyed.get(name)) is not None]
            continue
        base_trusted = id(base) in trusted
        for label, keyed in zip(labels, table, strict=True):
            r = keyed.get(name)
            if r is None:
                missing.append((name, label))
            elif base_trusted and id(r) in trusted:  # decided with every such pair below
                pairs.append((len(rows), label, r, base))
                rows.append(None)
            else:  # every result passed gate.problem() above: not checked again
                row = compared_row(label, r, base, threshold, trusted=True)
                rows.append(FileRow(r.name, label, row.median_ms, row.rel_noise, row.ratio,
                                    row.ratio_low, row.ratio_high, row.verdict, r.rounds, row.why))
    if pairs:
        decided = gate.stored_pairs([p[2] for p in pairs], [p[3] for p in pairs], threshold)
        for (at, f, r, _), ratio, low, high, verdict, why in zip(pairs, *decided, strict=True):
            rows[at] = FileRow(r.name, f, r.median_ms, r.rel_noise, ratio, low, high, verdict,
                               r.rounds, why)
    return FileComparison(labels[baseline], labels, rows, missing)
