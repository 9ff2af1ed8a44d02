"""`gpuprofile bench` (timeit for the GPU) and `gpuprofile compare` (saved results against a
baseline, with an exit code for CI). gpuprofile/cli.py dispatches here."""

from __future__ import annotations

import math
import sys
import traceback

from .._cli_common import ERROR, FAILED, STRICT, error, unwritable, write_csv, write_json

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
its 95 % bounds come from the two medians' confidence intervals. The rule (docs/benchmark.md,
"The gate's rule"): 'slower' only when the whole interval is beyond --fail-slower percent (default
5) AND both results were measured in 3 or more rounds (bench --rounds, pytest
--gpu-benchmark-rounds), so that their intervals span the spread between runs; one run's interval
cannot tell a change from drift between runs, and a difference it shows is 'inconclusive'.
Each compared result gets one line saying what its verdict rests on. Exit status: 0 no regression
(an 'inconclusive' verdict included), 1 a result is 'slower', 2 bad arguments, an unreadable file,
an output that cannot be written (checked before comparing), or a result a gate cannot trust (a number that is not finite, an interval that is not its
samples'), 3 with --strict: a verdict is 'inconclusive' or a result was not compared.
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
    p.add_argument("--max-time", type=float, default=None, metavar="SECONDS",
                   help="stop measuring after this long (default 5; --ab: 0.5 a round)")
    p.add_argument("--max-noise", type=float, default=0.005, metavar="FRACTION",
                   help="stop once the median's 95%% CI half-width is within this (default 0.005)")
    p.add_argument("--rounds", type=int, default=None, metavar="N",
                   help="repeat the whole measurement N times; the interval then spans the "
                        "rounds' medians (the spread between runs: use 5 for a CI gate; "
                        "--ab: interleaved rounds, default 10)")
    p.add_argument("--name", default=None, help="the result's name (default: STMT's first line)")
    p.add_argument("--ab", action="store_true",
                   help="A/B in one run: each STMT is its own statement, the first the reference, "
                        "timed in interleaved rounds (--rounds, default 10) with the order rotated; "
                        "prints the paired ratio, its 95%% interval and the verdict")
    p.add_argument("--threshold", type=float, default=None, metavar="PCT",
                   help="with --ab: the minimum effect for 'slower'/'faster' (default 5)")
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
    p.add_argument("--fail-slower", type=float, default=None, metavar="PCT",
                   help="the minimum effect: exit 1 only for results slower by more than PCT %% "
                        "with 95 %% confidence over rounds (default 5 on the host clock, 2 on the "
                        "device clocks)")
    p.add_argument("--strict", action="store_true",
                   help="exit 3 when a verdict is 'inconclusive' or a baseline result was not "
                        "compared (renamed, missing, or nothing in common)")
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
    if args.ab:
        return _bench_ab(args, namespace)
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
                           max_time=5.0 if args.max_time is None else args.max_time,
                           max_noise=args.max_noise, stream=namespace.get("stream"),
                           rounds=1 if args.rounds is None else args.rounds)
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


def _bench_ab(args, namespace) -> int:
    """bench --ab: the statements against the first, A/B in one run (bench/ab.py)."""
    from .. import _C
    from .benchmark import run_ab
    from .stmt import BadStatement, compile_stmt

    prog = "gpuprofile bench --ab"
    if len(args.stmt) < 2:
        return error(prog, "give two or more statements (the first is the reference)", 2)
    try:
        fns = {s: compile_stmt(s, "\n".join(args.setup), namespace, name=s)[0] for s in args.stmt}
    except BadStatement as e:
        return error(prog, str(e), 2)
    except Exception:
        traceback.print_exc()
        return error(prog, "the setup raised (traceback above)", ERROR)
    if len(fns) < len(args.stmt):
        return error(prog, "the statements must differ", 2)
    options = dict(mode=args.mode, flops=args.flops, bytes=args.bytes, clock=args.clock,
                   max_noise=args.max_noise, stream=namespace.get("stream"))
    for key in ("max_time", "rounds"):  # else A/B's shorter rounds, 10 of them
        if getattr(args, key) is not None:
            options[key] = getattr(args, key)
    try:
        ab = run_ab(fns, (), {}, options, args.threshold)
    except (TypeError, ValueError) as e:
        if _raised_by_options(e):
            return error(prog, str(e), 2)
        traceback.print_exc()
        return error(prog, "a statement raised (traceback above)", ERROR)
    except _C.NoDeviceError as e:
        return error(prog, str(e), ERROR)
    except Exception:
        traceback.print_exc()
        return error(prog, "a statement raised (traceback above)", ERROR)
    print(repr(ab))
    if args.json and write_json(prog, args.json, ab.to_dict()):
        return ERROR
    if args.csv and write_csv(prog, args.csv, ab):
        return ERROR
    return 0


def _raised_by_options(exc: BaseException) -> bool:
    """Whether benchmark() rejected its options (before fn ever ran): its notes say where fn
    failed otherwise."""
    return not getattr(exc, "__notes__", None)


def compare_main(args) -> int:
    from .files import collector_paused

    with collector_paused():  # 400k results in a compare of 200k pairs, none in a cycle
        return _compare(args)


def _compare(args) -> int:
    from .files import ResultFileError, compare_files, file_labels, load_results

    if len(args.files) < 2:
        return error("gpuprofile compare", "give at least two files (the first is the baseline)", 2)
    if args.fail_slower is not None and not (0 <= args.fail_slower < math.inf):
        return error("gpuprofile compare", f"--fail-slower must be >= 0 and finite, got {args.fail_slower}", 2)
    if unwritable("gpuprofile compare", args.json, args.csv):
        return ERROR
    try:
        loaded = [load_results(path) for path in args.files]
    except ResultFileError as e:
        return error("gpuprofile compare", str(e), 2)
    try:
        comparison = compare_files(list(zip(file_labels(args.files), loaded, strict=True)), args.baseline,
                                   args.fail_slower)
    except ValueError as e:
        return error("gpuprofile compare", str(e), 2)
    print(comparison)
    print(comparison.scope_note())
    if args.json and write_json("gpuprofile compare", args.json, comparison.to_dict()):
        return ERROR
    if args.csv and write_csv("gpuprofile compare", args.csv, comparison):
        return ERROR
    return _gate_exit(comparison, args.fail_slower, args.strict)


def _gate_exit(comparison, threshold, strict: bool) -> int:
    """Print each compared result's gate line (stdout) and the outcome (stderr); the exit status."""
    compared = [r for r in comparison.rows if r.verdict not in ("baseline", "new")]
    if compared:  # one print: 200k print calls cost more than the lines
        print("\n".join([f"gate: {r.name} ({r.file}): {r.why}" for r in compared]))
    limit = "the threshold" if threshold is None else f"{threshold:g} %"  # the gate lines say which
    slower = [r for r in compared if r.verdict == "slower"]
    if slower:
        names = ", ".join(f"{r.name} ({r.file}, {r.ratio:.3g}x)" for r in slower)
        print(f"gpuprofile compare: FAIL: {len(slower)} regression(s) beyond {limit}: {names}",
              file=sys.stderr)
        return FAILED
    unsure = [r for r in compared if r.verdict == "inconclusive"]
    unmatched = [f"{n} (not in {f})" for n, f in comparison.missing]
    unmatched += [f"{r.name} (new in {r.file})" for r in comparison.rows if r.verdict == "new"]
    if not compared:
        print("gpuprofile compare: nothing compared: no result of the baseline has a counterpart "
              "of its name", file=sys.stderr)
    elif unmatched:
        print(f"gpuprofile compare: not compared: {', '.join(unmatched)}", file=sys.stderr)
    if unsure:
        print(f"gpuprofile compare: {len(unsure)} inconclusive verdict(s) (they pass; --strict "
              "fails them): measure both sides with --rounds 5", file=sys.stderr)
    if strict and (unsure or unmatched or not compared):
        print("gpuprofile compare: FAIL (--strict): inconclusive or not compared", file=sys.stderr)
        return STRICT
    print(f"gpuprofile compare: PASS: {len(compared)} compared, none slower beyond {limit}",
          file=sys.stderr)
    return 0
