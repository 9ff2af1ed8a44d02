"""`gpuprofile metrics script.py` and `gpuprofile stalls script.py`: the in-process answer to
`ncu --set ... python script.py`. The script runs in this process (as `gpuprofile run` runs it)
under gpuprofile.metrics() or gpuprofile.stalls(); the same tables as the Python API go to
stdout, the script's own output to stderr. gpuprofile/cli.py dispatches here."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from .._cli_common import ERROR, error, unwritable, write_csv, write_json

METRICS_EXAMPLE = """\
examples:
  gpuprofile metrics train.py --epochs 1                     # speed of light of every kernel
  gpuprofile metrics --set roofline --kernel flash --json m.json bench.py
  gpuprofile metrics --metrics dram__bytes_read.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed app.py
  gpuprofile metrics --cache-control none --kernel "regex:^nvjet_" train.py   # warm caches, cuBLAS only

gpuprofile's options come before the script; everything after it goes to the script. A set that
needs N passes runs the whole script N times (plus one warm-up run): each run must launch the
same kernels on the same data, as under `ncu --replay-mode application`. Caches are flushed
before each kernel (--cache-control all, as ncu's default); clocks are not locked (as ncu
--clock-control none). Every kernel is profiled; --kernel picks the ones shown and written (a
regular expression or plain text searched in the full and the short demangled names, as ncu's
-k regex:), and the total is recombined over them. Exit status: 0 measured; the script's own
status when it exited non-zero; 2 bad arguments, unknown metric names, more passes or kernels
than --max-passes or --max-kernels allow, no device, counters not permitted, CUPTI busy, runs that
launched different kernels, --kernel matched no kernel (the kernels there were are listed), or an
output that cannot be written.
"""

STALLS_EXAMPLE = """\
examples:
  gpuprofile stalls train.py --epochs 1
  gpuprofile stalls --kernel "flash_fwd" --json stalls.json bench.py

The script runs once under CUPTI PC sampling; each kernel's warp-stall reasons are printed
(largest first), with source lines where the kernels were built with -lineinfo. --kernel and the
exit status as for `gpuprofile metrics`.
"""


def add_parsers(sub, formatter) -> None:
    from .metric_sets import SETS
    from .result import CACHE_CONTROL

    p = sub.add_parser("metrics", help="hardware counters of a script's kernels (like ncu --set)",
                       description="Run a Python script under gpuprofile.metrics() and print its "
                                   "kernels' hardware counters.",
                       epilog=METRICS_EXAMPLE, formatter_class=formatter)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--set", choices=sorted(SETS), default=None,
                       help="a named metric set (default: sol; docs/counters.md explains them)")
    which.add_argument("--metrics", default=None, metavar="A,B,...",
                       help="metric names and set names, comma-separated")
    p.add_argument("--per", choices=("kernel", "call"), default="kernel",
                   help="one range per kernel (default), or one around the whole script")
    p.add_argument("--max-passes", type=int, default=None, metavar="N",
                   help="refuse a collection that would run the script more than N times")
    p.add_argument("--max-kernels", type=int, default=None, metavar="N",
                   help="kernels per run to make room for (default: as many as the warm-up run "
                        "launched)")
    p.add_argument("--cache-control", choices=sorted(CACHE_CONTROL), default="all",
                   help="all: flush L2 before each kernel and pass, outside the counted range (as "
                        "ncu's default); none: caches as the script left them")
    _common(p)
    p.set_defaults(func=metrics_main)

    p = sub.add_parser("stalls", help="warp-stall reasons of a script's kernels (PC sampling)",
                       description="Run a Python script once under gpuprofile.stalls() and print "
                                   "where its kernels' warps wait.",
                       epilog=STALLS_EXAMPLE, formatter_class=formatter)
    p.add_argument("--period", type=int, default=None, metavar="N",
                   help="sample every 2^N SM cycles (5..31; default CUPTI's)")
    _common(p)
    p.set_defaults(func=stalls_main)


def _common(p) -> None:
    p.add_argument("--kernel", default=None, metavar="PATTERN",
                   help="show only the kernels PATTERN matches: a regular expression (ncu's "
                        "regex: prefix allowed) or text, in the full or the short name")
    p.add_argument("--json", default=None, metavar="PATH", help="write the result's to_dict() as JSON")
    p.add_argument("--csv", default=None, metavar="PATH",
                   help="write the printed table as CSV (the result's to_csv())")
    p.add_argument("script", metavar="script.py")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="...", help="the script's arguments")


class ScriptFailed(Exception):
    """The script exited with a non-zero status (the status is `code`)."""

    def __init__(self, code: int):
        super().__init__(f"the script exited with status {code}")
        self.code = code


def script_callable(script: str, args: list, prog: str):
    """A function that runs the script once, its stdout sent to stderr; ScriptFailed when it
    exits non-zero."""
    from .._script import run_script

    def run():
        with contextlib.redirect_stdout(sys.stderr):
            code = run_script(script, args, prog)
        if code:
            raise ScriptFailed(code)

    run.__qualname__ = run.__name__ = os.path.basename(script)
    return run


def check_args(args, prog: str) -> str | None:
    """A usage error's message, or None."""
    if not os.path.isfile(args.script):
        return f"no such script: {args.script}"
    if args.kernel is not None:
        from .kernel_filter import compile_pattern

        try:
            compile_pattern(args.kernel)
        except ValueError as e:
            return f"--kernel: {e}"
    return None


def metric_spec(args):
    """What to pass as metrics=: a set name, or a list of names from --metrics."""
    if args.metrics is not None:
        names = [m.strip() for m in args.metrics.split(",") if m.strip()]
        if not names:
            raise ValueError("--metrics is empty")
        return names
    return args.set or "sol"


def metrics_main(args) -> int:
    prog = "gpuprofile metrics"
    problem = check_args(args, prog)
    if problem is None and args.kernel is not None and args.per == "call":
        problem = "--kernel needs --per kernel (one range per kernel)"
    for option, value in (("--max-passes", args.max_passes), ("--max-kernels", args.max_kernels)):
        if problem is None and value is not None and value < 1:
            problem = f"{option} must be >= 1, got {value}"
    try:
        spec = metric_spec(args) if problem is None else None
    except ValueError as e:
        problem = str(e)
    if problem is not None:
        return error(prog, problem, 2)
    if unwritable(prog, args.json, args.csv):
        return 2
    from .metrics import metrics

    def collect():
        return metrics(script_callable(args.script, args.args, prog), metrics=spec, per=args.per,
                       max_passes=args.max_passes, max_kernels=args.max_kernels,
                       cache_control=args.cache_control)

    return _report(prog, collect, args)


def stalls_main(args) -> int:
    prog = "gpuprofile stalls"
    problem = check_args(args, prog)
    if problem is None and args.period is not None and not 5 <= args.period <= 31:
        problem = f"--period must be within 5..31, got {args.period}"
    if problem is not None:
        return error(prog, problem, 2)
    if unwritable(prog, args.json, args.csv):
        return 2
    from .stalls import stalls

    return _report(prog, lambda: stalls(script_callable(args.script, args.args, prog),
                                        period=args.period), args)


def _report(prog: str, collect, args) -> int:
    """Runs collect(), prints the (selected) result and writes its JSON; the exit status."""
    from .. import _C

    try:
        result = collect()
    except ScriptFailed as e:
        return error(prog, f"{e} (its output is above); nothing measured", e.code)
    except _C.NoDeviceError as e:
        return error(prog, f"needs a CUDA device: {e}", 2)
    except _C.GpuProfileError as e:
        hint = (" (the script runs once per pass: every run must launch the same kernels)"
                if "replayable" in str(e) else "")
        return error(prog, f"{e}{hint}", 2)
    except ValueError as e:  # unknown metric names (with suggestions), past --max-passes/--max-kernels
        hint = " (on this command line: --max-kernels N)" if "max_kernels=" in str(e) else ""
        return error(prog, f"{e}{hint}", 2)
    if args.kernel is not None:
        selected = result.select(args.kernel)
        if not selected.kernels:
            from .kernel_filter import no_match_message

            return error(prog, no_match_message(args.kernel, [k.name for k in result.kernels]), ERROR)
        result = selected
    print(result)
    if args.json:
        if write_json(prog, args.json, result.to_dict()):
            return 2
        print(f"{prog}: written to {args.json}", file=sys.stderr)
    if args.csv and write_csv(prog, args.csv, result):
        return 2
    return 0
