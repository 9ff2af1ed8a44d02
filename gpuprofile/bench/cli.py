"""`gpuprofile bench` (timeit for the GPU) and `gpuprofile compare` (saved results against a
baseline, with an exit code for CI). gpuprofile/cli.py dispatches here."""

from __future__ import annotations

import sys
import traceback

from .._cli_common import ERROR, FAILED, error, unwritable, write_csv, write_json

BENCH_EXAMPLE = """\
examples:
  gpuprofile bench -s "import torch; x = torch.randn(4096, 4096, device='cuda')" "x @ x" \\
      --flops 137438953472 --json matmul.json
  gpuprofile bench --mode hot -s "import numpy as np; a = np.ones(10**6)" "a.sum()"

STMT (several are joined by newlines) runs as the body of a function; setup runs once before, and
its names are visible to STMT. A single expression's value is returned to the benchmark. Without
a CUDA device the host clock times STMT, and the result says so. In graph mode the name `stream`
is a gpuprofile.Stream: STMT must launch all its work on it (it is captured into a CUDA graph).
The result goes to stdout; warnings and diagnostics to stderr. Exit status: 0 measured; 2 bad
arguments, a STMT that does not compile, STMT or setup raised (traceback on stderr), the machine
lacks the device that --mode graph or --clock gpu|cupti need, or an output cannot be written.
"""

COMPARE_EXAMPLE = """\
examples:
  gpuprofile compare before.json after.json           # two `gpuprofile bench --json` files
  pytest --gpu-benchmark-save=main.json               # on the main branch, then on yours:
  pytest --gpu-benchmark-save=mine.json && gpuprofile compare main.json mine.json --fail-slower 3

Each result is compared with the baseline file's result of the same name (files holding one
result each are compared with each other whatever their names). ratio = median / baseline median;
its 95 % bounds come from the two medians' confidence intervals, and a verdict is 'slower' or
'faster' only when those bounds exclude 1 ('same' otherwise). An interval covers the noise within
one run; results measured with rounds (bench --rounds, pytest --gpu-benchmark-rounds) also cover
the spread between runs, which a CI gate needs. Exit status: 0 no regression, 1 a result is
slower than its baseline by more than --fail-slower percent with 95 % confidence, 2 bad
arguments, an unreadable file, an output that cannot be written (checked before comparing), or
a result a gate cannot trust (a median or interval that is not a finite positive number,
samples that are not finite, a median that is not its samples').
"""


def add_parsers(sub, formatter) -> None:
    p = sub.add_parser("bench", help="timeit for the GPU: benchmark a Python statement",
                       description="Benchmark a Python statement with gpuprofile.benchmark and "
                                   "print the BenchmarkResult.",
                       epilog=BENCH_EXAMPLE, formatter_class=formatter)
    p.add_argument("stmt", nargs="+", metavar="STMT", help="statement(s) to time")
    p.add_argument("-s", "--setup", action="append", default=[], metavar="S",
                   help="run once before timing (may be repeated)")
    p.add_argument("--mode", choices=("cold", "hot", "graph"), default="cold",
                   help="cold: L2 flushed before each iteration (default); hot: back to back; "
                        "graph: STMT captured into a CUDA graph on `stream`")
    p.add_argument("--flops", type=float, default=None, metavar="F", help="FLOPs per call (TFLOP/s, roofline)")
    p.add_argument("--bytes", type=float, default=None, metavar="B", help="bytes moved per call (GB/s)")
    p.add_argument("--clock", choices=("auto", "cupti", "gpu", "host"), default="auto",
                   help="what times an iteration (default: CUPTI records with a device, else host)")
    p.add_argument("--max-time", type=float, default=5.0, metavar="SECONDS",
                   help="stop measuring after this long (default 5)")
    p.add_argument("--max-noise", type=float, default=0.005, metavar="FRACTION",
                   help="stop once the median's 95%% CI half-width is within this (default 0.005)")
    p.add_argument("--rounds", type=int, default=1, metavar="N",
                   help="repeat the whole measurement N times; the interval then spans the "
                        "rounds' medians (the spread between runs: use 5 for a CI gate)")
    p.add_argument("--name", default=None, help="the result's name (default: STMT's first line)")
    p.add_argument("--json", default=None, metavar="PATH", help="save the result (samples included)")
    p.add_argument("--csv", default=None, metavar="PATH",
                   help="write the result as a one-row CSV table (no samples)")
    p.set_defaults(func=bench_main)

    p = sub.add_parser("compare", help="compare saved benchmark results (exit 1 on a regression)",
                       description="Compare saved benchmark results against the first file "
                                   "(or --baseline).",
                       epilog=COMPARE_EXAMPLE, formatter_class=formatter)
    p.add_argument("files", nargs="+", metavar="FILE.json")
    p.add_argument("--baseline", type=int, default=0, metavar="N",
                   help="index of the baseline file among FILE.json (default 0: the first)")
    p.add_argument("--fail-slower", type=float, default=0.0, metavar="PCT",
                   help="exit 1 only for results slower by more than PCT %% (default 0: any "
                        "significant slow-down)")
    p.add_argument("--json", default=None, metavar="PATH", help="write the comparison as JSON")
    p.add_argument("--csv", default=None, metavar="PATH",
                   help="write the comparison as CSV, one row per result")
    p.set_defaults(func=compare_main)


def bench_main(args) -> int:
    from .. import _C
    from ..device import device_count
    from .benchmark import benchmark
    from .stmt import BadStatement, compile_stmt

    stmt = "\n".join(args.stmt)
    namespace: dict = {}
    if unwritable("gpuprofile bench", args.json, args.csv):
        return 2
    if args.mode == "graph":
        if device_count() == 0:
            return error("gpuprofile bench", "--mode graph needs a CUDA device "
                                   f"({_C._cuda_status()['reason'] or 'none found'})", ERROR)
        from ..streams import Stream

        namespace["stream"] = Stream()
    try:
        fn, _ = compile_stmt(stmt, "\n".join(args.setup), namespace, name=args.name)
    except BadStatement as e:
        return error("gpuprofile bench", str(e), 2)
    except Exception:
        traceback.print_exc()
        return error("gpuprofile bench", "the setup raised (traceback above)", ERROR)
    if args.clock in ("auto", "host") and device_count() == 0:
        print(f"gpuprofile bench: no CUDA device ({_C._cuda_status()['reason'] or 'none found'}): "
              "timing with the host clock", file=sys.stderr)
    try:
        result = benchmark(fn, mode=args.mode, flops=args.flops, bytes=args.bytes, clock=args.clock,
                           max_time=args.max_time, max_noise=args.max_noise,
                           stream=namespace.get("stream"), rounds=args.rounds)
    except (TypeError, ValueError) as e:
        if _raised_by_options(e):
            return error("gpuprofile bench", str(e), 2)
        traceback.print_exc()
        return error("gpuprofile bench", "the statement raised (traceback above)", ERROR)
    except _C.NoDeviceError as e:
        return error("gpuprofile bench", str(e), ERROR)
    except Exception:
        traceback.print_exc()
        return error("gpuprofile bench", "the statement raised (traceback above)", ERROR)
    print(result)
    if args.json:
        try:
            result.save(args.json)
        except OSError as e:
            return error("gpuprofile bench", f"cannot write {args.json}: {e}", ERROR)
        print(f"gpuprofile bench: result saved to {args.json}", file=sys.stderr)
    if args.csv and write_csv("gpuprofile bench", args.csv, result):
        return ERROR
    return 0


def _raised_by_options(exc: BaseException) -> bool:
    """Whether benchmark() rejected its options (before fn ever ran): its notes say where fn
    failed otherwise."""
    return not getattr(exc, "__notes__", None)


def compare_main(args) -> int:
    from .files import ResultFileError, compare_files, file_labels, load_results

    if len(args.files) < 2:
        return error("gpuprofile compare", "give at least two files (the first is the baseline)", 2)
    if not args.fail_slower >= 0:
        return error("gpuprofile compare", f"--fail-slower must be >= 0, got {args.fail_slower}", 2)
    if unwritable("gpuprofile compare", args.json, args.csv):
        return ERROR
    try:
        loaded = [load_results(path) for path in args.files]
    except ResultFileError as e:
        return error("gpuprofile compare", str(e), 2)
    try:
        comparison = compare_files(list(zip(file_labels(args.files), loaded, strict=True)), args.baseline)
    except ValueError as e:
        return error("gpuprofile compare", str(e), 2)
    print(comparison)
    print(comparison.scope_note())
    if args.json and write_json("gpuprofile compare", args.json, comparison.to_dict()):
        return ERROR
    if args.csv and write_csv("gpuprofile compare", args.csv, comparison):
        return ERROR
    slower = comparison.regressions(args.fail_slower)
    if slower:
        names = ", ".join(f"{r.name} ({r.file}, {r.ratio:.3g}x)" for r in slower)
        print(f"gpuprofile compare: {len(slower)} regression(s) beyond {args.fail_slower:g} %: {names}",
              file=sys.stderr)
        return FAILED
    return 0
