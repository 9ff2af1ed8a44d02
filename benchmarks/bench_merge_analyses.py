"""The analyses of `gpuprofile merge` one at a time, NumPy against DuckDB's SQL, on the same
ranks (the numbers behind tracing/engines.DEFAULTS, docs/distributed.md "Engines"):

    python benchmarks/bench_merge.py --ranks 256 --engines default    # makes the ranks once
    python benchmarks/bench_merge_analyses.py --data /tmp/gp-merge-parquet-256x200000 --ranks 8,64 --repeat 2
    python benchmarks/bench_merge_analyses.py --data ... --ranks 256 --repeat 2 --sql-summaries-up-to 64

summaries: pass 1 of the merge, each rank's file read and reduced to its steps' compute,
communication, overlap, exposed communication and idle time and its NCCL kernels (one rank at a
time by NumPy; one query over every file by DuckDB). held_back: the held-back steps and why,
from the summaries. Each is timed --repeat times, the engines interleaved round by round; the
median is printed. The cross-rank work that only NumPy does (matching, alignment, the
collectives and straggler tables) is timed once beside them.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE]

from _children import write_json  # noqa: E402


def _timed(fn) -> tuple:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def point(paths: list, repeat: int, sql_summaries: bool = True) -> dict:
    import numpy as np

    from gpuprofile.tracing import analyses, engines, merge

    times: dict = {}
    for _ in range(repeat):
        for engine in ("numpy", "duckdb") if sql_summaries else ("numpy",):
            dt, ranks = _timed(lambda e=engine: merge._summaries(paths, "step", e, {}))
            times.setdefault(f"summaries {engine}", []).append(dt)
    once = {}
    once["match"], matched = _timed(lambda: analyses.match(ranks))
    once["align"], _ = _timed(lambda: merge._align(ranks, matched, "auto"))
    shifts = np.array([r.shift_ns for r in ranks], np.int64)
    starts = analyses.matrix(ranks, matched, "start") + shifts
    ends = analyses.matrix(ranks, matched, "end") + shifts
    n_steps = min(len(r.steps) for r in ranks)
    once["collectives"], _ = _timed(lambda: merge._collectives(ranks, matched, starts, ends))
    once["straggler"], (_, last, first) = _timed(
        lambda: analyses.straggler(ranks, matched, starts, ends, n_steps))
    once["step rows"], _ = _timed(lambda: analyses.step_rows(ranks, n_steps))
    results = {}
    for _ in range(repeat):
        for engine in ("numpy", "duckdb"):
            dt, results[engine] = _timed(lambda e=engine: engines.held_back(
                ranks, matched, starts, last, first, e))
            times.setdefault(f"held_back {engine}", []).append(dt)
    assert results["numpy"] == results["duckdb"], "the engines disagree"
    return {"ranks": len(paths), **{k: statistics.median(v) for k, v in times.items()},
            **{f"{k} (numpy only)": v for k, v in once.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="a folder of trace.rank{r}.parquet (bench_merge.py's)")
    ap.add_argument("--ranks", default="8,64")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--output", default=None)
    ap.add_argument("--sql-summaries-up-to", type=int, default=None, metavar="N",
                    help="time DuckDB's summaries only up to N ranks (they take minutes beyond)")
    args = ap.parse_args()
    found = glob.glob(os.path.join(args.data, "trace.rank*.parquet"))
    paths = sorted(found, key=lambda p: int(re.findall(r"rank(\d+)", p)[-1]))
    rows = []
    for n in (int(x) for x in args.ranks.split(",")):
        if n > len(paths):
            sys.exit(f"{args.data} holds {len(paths)} ranks, not {n}")
        limit = args.sql_summaries_up_to
        row = point(paths[:n], args.repeat, limit is None or n <= limit)
        rows.append(row)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}),
              flush=True)
    if args.output:
        write_json(args.output, {"data": args.data, "repeat": args.repeat, "cpus": os.cpu_count(),
                                 "rows": rows})


if __name__ == "__main__":
    main()
