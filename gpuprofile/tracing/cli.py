"""`gpuprofile merge`: per-rank Chrome traces of a distributed job into one (tracing/merge.py).
gpuprofile/cli.py dispatches here."""

from __future__ import annotations

import argparse
import math
import os
import sys

from .._cli_common import write_json
from .engines import DEFAULT_MEMORY_LIMIT, ENGINES

MERGE_EXAMPLE = """\
examples:
  torchrun --nproc-per-node 4 train.py               # each rank: p.export_chrome_trace("trace.json.gz")
  gpuprofile merge trace.rank*.json.gz -o merged.json.gz
  gpuprofile merge trace.rank*.json.gz -o merged.json.gz --straggler-step train_step --json m.json
  gpuprofile merge trace.rank*.parquet -o steps3-5.json.gz --steps 3:5 --tables tables/
  gpuprofile merge trace.rank*.parquet -o ranks0-7.json.gz --trace-ranks 0-7 --engine dask

Reads the ranks one at a time (Chrome JSON or Parquet from p.export_parquet, which is faster),
so memory holds one rank, not the job.

Writes one Chrome/Perfetto trace with a process per rank, on one time line: each rank's
(CUPTI, wall clock) pair, refined by the ends of NCCL collectives that every rank ran (the
printed spread is the measured alignment error). NCCL kernels are named by collective, with
bytes and bus bandwidth where a gp.distributed.collective() region gave the size. The straggler
table splits each step (a region, default 'step') per rank into compute, collective and wait time
and names the rank that arrived last; then compute/communication overlap, exposed communication
and idle time per rank, and the steps where late ranks held the others back, with why. --tables
writes every table as CSV (every step and rank; the printout shows totals). Exit status: 0
merged; 2 the output or a table cannot be written, bad arguments, or a bad input file
(unreadable, not a Chrome trace or gpuprofile Parquet file, a field of the wrong type or out of
range, two of the same rank, a foreign trace such as torch.profiler's: the message names the
file). docs/distributed.md explains the output.
"""


def add_parsers(sub, formatter) -> None:
    p = sub.add_parser("merge", help="merge per-rank traces of a distributed job into one",
                       description="Merge per-rank traces (trace.rank{r}.json.gz or "
                                   "trace.rank{r}.parquet) into one trace with clocks aligned, "
                                   "and print the straggler and step tables.",
                       epilog=MERGE_EXAMPLE, formatter_class=formatter)
    p.add_argument("files", nargs="+", metavar="FILE", help="one trace per rank")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="the merged trace (gzip when it ends in .gz)")
    p.add_argument("--straggler-step", default="step", metavar="NAME",
                   help="the region that delimits a step (default: step)")
    p.add_argument("--align", choices=("auto", "wall", "collectives"), default="auto",
                   help="auto: wall clock refined by collective ends when there are any (default)")
    p.add_argument("--steps", default=None, metavar="A:B", type=_span(int),
                   help="write only steps A to B-1 (the tables still cover every step)")
    p.add_argument("--window-ms", default=None, metavar="T0:T1", type=_span(float),
                   help="write only the events overlapping T0..T1 ms of the merged time line")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the summary as JSON")
    p.add_argument("--tables", default=None, metavar="DIR",
                   help="also write the tables as CSV files in DIR: collectives, straggler, "
                        "steps, held_back")
    p.add_argument("--engine", choices=tuple(ENGINES), default=None,
                   help="who computes the tables: numpy, duckdb (SQL), dask (a cluster); "
                        "default: each analysis by the faster (docs/distributed.md, Engines)")
    p.add_argument("--memory-limit", default=DEFAULT_MEMORY_LIMIT, metavar="SIZE",
                   help=f"duckdb: memory before it spills to --temp-dir (default {DEFAULT_MEMORY_LIMIT})")
    p.add_argument("--temp-dir", default=None, metavar="DIR", help="duckdb: where it spills")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="dask: a scheduler's address (default: a local cluster)")
    p.add_argument("--trace-ranks", default=None, metavar="LIST", type=_ranks,
                   help="write only these ranks' events to the trace, e.g. 0,37,512-519 "
                        "(the tables cover every rank)")
    p.set_defaults(func=merge_main)


def _ranks(text: str) -> list:
    """argparse type of a list of ranks and ranges: '0,3,8-15'."""
    out = []
    try:
        for part in filter(None, text.split(",")):
            a, _, b = part.partition("-")
            lo, hi = int(a), int(b or a)
            if lo < 0 or hi < lo:
                raise ValueError
            out.extend(range(lo, hi + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected ranks like 0,3,8-15, got {text!r}") from None
    return out


def _span(kind):
    """argparse type of 'A:B' (two numbers of `kind`)."""
    def parse(text: str) -> tuple:
        parts = text.split(":")
        try:
            if len(parts) != 2:
                raise ValueError
            a, b = kind(parts[0]), kind(parts[1])
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected START:END, got {text!r}") from None
        if not (math.isfinite(a) and math.isfinite(b)) or b < a:
            raise argparse.ArgumentTypeError(f"expected START:END with START <= END, got {text!r}")
        return a, b
    return parse


def _write_tables(folder: str, result) -> None:
    os.makedirs(folder, exist_ok=True)
    for name, table in (("collectives", result), ("straggler", result.straggler),
                        ("steps", result.steps), ("held_back", result.held_back)):
        table.to_csv(os.path.join(folder, f"{name}.csv"))


def merge_main(args) -> int:
    from .merge import merge_traces

    try:
        window = None if args.window_ms is None else tuple(int(round(t * 1e6)) for t in args.window_ms)
        options = ({"scheduler": args.scheduler} if args.engine == "dask" else
                   {"memory_limit": args.memory_limit, "temp_directory": args.temp_dir}
                   if args.engine in ("duckdb", None) else {})
        result = merge_traces(args.files, args.output, step=args.straggler_step, align=args.align,
                              steps=args.steps, window=window, engine=args.engine,
                              trace_ranks=args.trace_ranks, engine_options=options)
    except ValueError as exc:  # TraceFileError names the file
        print(f"gpuprofile merge: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"gpuprofile merge: error: cannot write {args.output}: {exc}", file=sys.stderr)
        return 2
    print(result)
    if args.tables:
        try:
            _write_tables(args.tables, result)
        except OSError as exc:
            print(f"gpuprofile merge: error: cannot write the tables in {args.tables}: {exc}",
                  file=sys.stderr)
            return 2
    if args.json:
        return write_json("gpuprofile merge", args.json, result.to_dict())
    return 0
