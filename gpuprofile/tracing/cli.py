"""`gpuprofile merge`: per-rank Chrome traces of a distributed job into one (tracing/merge.py).
gpuprofile/cli.py dispatches here."""

from __future__ import annotations

import sys

from .._cli_common import write_json

MERGE_EXAMPLE = """\
examples:
  torchrun --nproc-per-node 4 train.py               # each rank: p.export_chrome_trace("trace.json.gz")
  gpuprofile merge trace.rank*.json.gz -o merged.json.gz
  gpuprofile merge trace.rank*.json.gz -o merged.json.gz --straggler-step train_step --json m.json

Writes one Chrome/Perfetto trace with a process per rank, on one time line: each rank's
(CUPTI, wall clock) pair, refined by the ends of NCCL collectives that every rank ran (the
printed spread is the measured alignment error). NCCL kernels are named by collective, with
bytes and bus bandwidth where a gp.distributed.collective() region gave the size. The straggler
table splits each step (a region, default 'step') per rank into compute, collective and wait time
and names the rank that arrived last. Exit status: 0 merged; 1 the output cannot be written;
2 bad arguments or a bad input file (unreadable, not a Chrome trace, a field of the wrong type or
out of range, two of the same rank, a foreign trace such as torch.profiler's: the message names
the file). docs/distributed.md explains the output.
"""


def add_parsers(sub, formatter) -> None:
    p = sub.add_parser("merge", help="merge per-rank traces of a distributed job into one",
                       description="Merge per-rank Chrome traces (trace.rank{r}.json.gz) into one "
                                   "trace with clocks aligned, and print the straggler table.",
                       epilog=MERGE_EXAMPLE, formatter_class=formatter)
    p.add_argument("files", nargs="+", metavar="FILE", help="one trace per rank")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="the merged trace (gzip when it ends in .gz)")
    p.add_argument("--straggler-step", default="step", metavar="NAME",
                   help="the region that delimits a step (default: step)")
    p.add_argument("--align", choices=("auto", "wall", "collectives"), default="auto",
                   help="auto: wall clock refined by collective ends when there are any (default)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the summary as JSON")
    p.set_defaults(func=merge_main)


def merge_main(args) -> int:
    from .merge import merge_traces

    try:
        result = merge_traces(args.files, args.output, step=args.straggler_step, align=args.align)
    except ValueError as exc:  # TraceFileError names the file
        print(f"gpuprofile merge: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"gpuprofile merge: error: cannot write {args.output}: {exc}", file=sys.stderr)
        return 1
    print(result)
    if args.json:
        return write_json("gpuprofile merge", args.json, result.to_dict())
    return 0
