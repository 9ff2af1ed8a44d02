"""IPython magics, loaded by `%load_ext gpuprofile` (gpuprofile.load_ipython_extension):

    %gpu_timeit [options] STMT           benchmark one statement (gpuprofile.benchmark)
    %%gpu_timeit [options] [SETUP]       benchmark the cell; the rest of the first line is setup
    %%gpuprofile [--trace PATH] [--no-memory]
                                         run the cell under gpuprofile.profile(): kernel summary,
                                         the cell's regions and the device-memory peak, inline

%gpu_timeit reads its options as %timeit does: -n N (timed calls per round; without it the noise
decides when to stop), -r R (rounds; --rounds is the same), -q (print nothing), -p P (significant
digits), -o (return the result: a BenchmarkResult that also has %timeit's TimeitResult attributes,
in seconds per call: average, stdev, best, worst, timings, all_runs, loops, repeat,
compile_time), -h (this help), and prints one line:

    16.6 µs ± 0.1 µs per call (median ± 95 % CI, CUPTI, 735 calls)

-v shows the whole result (text and HTML) instead. `%%gpu_timeit --ab [SETUP]` times each line
of the cell as its own statement, A/B in one run (the first line the reference: bench/ab.py).
Beyond %timeit: -m/--mode cold|hot|graph,
--flops F, --bytes B, --clock C, --max-time S, --max-noise X, --name NAME. `%gpu_timeit?` shows
them all. Options end at the first word that is not one (or at `--`); the rest of the line is
the statement, verbatim. Statements see the notebook's names; setup runs in a copy of them, so it
leaves the notebook's namespace as it was. In graph mode `stream` is a gpuprofile.Stream to
launch on. Without a CUDA device the host clock times the statement, and the result says so.

Only this module imports IPython; `import gpuprofile` never does.
"""

from __future__ import annotations

import math
import re
import sys
import time
from dataclasses import fields

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display

from . import _C
from ._format import fmt
from .bench.benchmark import run
from .bench.options import make_options
from .bench.result import BenchmarkResult
from .bench.stmt import BadStatement, compile_stmt
from .device import device_count

_CLOCK_NAMES = {"cupti": "CUPTI", "gpu": "CUDA events", "host": "host clock"}
_WORD = re.compile(r"\s*(\S+)")


class GpuTimeitResult(BenchmarkResult):
    """What `%gpu_timeit -o` returns: the BenchmarkResult, with the attributes of IPython's
    TimeitResult (what `%timeit -o` returns) in its units, seconds: `timings` per call of each
    timed sample, `all_runs` per sample (`loops` calls each), `repeat` samples, their `average`,
    `stdev` (of the population, as %timeit), `best` and `worst`; `compile_time` is the seconds
    taken to compile the statement."""

    compile_time: float = 0.0
    _precision: int = 4

    @classmethod
    def of(cls, result: BenchmarkResult, compile_time: float, precision: int) -> GpuTimeitResult:
        out = cls(**{f.name: getattr(result, f.name) for f in fields(result)})
        out.compile_time, out._precision = compile_time, precision
        return out

    @property
    def loops(self) -> int:
        return int(self.inner)

    @property
    def repeat(self) -> int:
        return len(self.samples)

    @property
    def timings(self) -> list:
        return [float(x) / 1e3 for x in self.samples]

    @property
    def all_runs(self) -> list:
        return [t * self.loops for t in self.timings]

    @property
    def best(self) -> float:
        return min(self.timings, default=math.nan)

    @property
    def worst(self) -> float:
        return max(self.timings, default=math.nan)

    @property
    def average(self) -> float:
        t = self.timings
        return math.fsum(t) / len(t) if t else math.nan

    @property
    def stdev(self) -> float:
        t, mean = self.timings, self.average
        return (math.fsum((x - mean) ** 2 for x in t) / len(t)) ** 0.5 if t else math.nan


def summary_line(result, digits: int = 4) -> str:
    """The one line %gpu_timeit prints, %timeit's shape: median ± the 95 % CI's half-width, to
    `digits` significant digits (-p)."""
    half = (result.ci_high_ms - result.ci_low_ms) / 2
    how = [_CLOCK_NAMES.get(result.clock, result.clock)]
    if result.mode != "cold":
        how.append(result.mode)
    calls = result.iterations * result.inner
    how.append(f"{calls} call{'s' if calls != 1 else ''}")
    if result.rounds > 1:
        how.append(f"{result.rounds} rounds")
    scale, unit = _unit(result.median_ms)
    return (f"{fmt(result.median_ms / scale, digits)} {unit} ± {fmt(half / scale, digits)} {unit} per call "
            f"(median ± 95 % CI, {', '.join(how)})")


def _unit(ms: float) -> tuple[float, str]:
    """(ms per unit, unit) that reads best for `ms`; both halves of the line share it."""
    for scale, unit in ((1e3, "s"), (1.0, "ms"), (1e-3, "µs")):
        if abs(ms) >= scale:
            return scale, unit
    return 1e-6, "ns"


def split_options(parser, line: str) -> tuple[list[str], str]:
    """(the leading option words of `line`, the rest of it verbatim): options end at the first
    word that does not start with '-', or after `--`. A value may be the next word (`-n 100`),
    attached (`-n100`, `--rounds=3`), and short flags combine (`-qo`)."""
    takes_value = {opt: action.nargs != 0 for action in parser._actions
                   for opt in action.option_strings}
    words, pos = [], 0
    while (m := _WORD.match(line, pos)) is not None:
        word = m.group(1)
        if word == "--":
            return words, line[m.end():]
        if not word.startswith("-") or word == "-":
            break
        words.append(word)
        pos = m.end()
        if _needs_next(word, takes_value):
            nxt = _WORD.match(line, pos)
            if nxt is None:
                raise UsageError(f"option {word} needs a value")
            words.append(nxt.group(1))
            pos = nxt.end()
    return words, line[pos:]


def _needs_next(word: str, takes_value: dict) -> bool:
    """Whether option word `word` takes the next word as its value."""
    if word.startswith("--"):
        key = word.split("=", 1)[0]
        if key not in takes_value:
            raise UsageError(f"unknown option {key} (see %gpu_timeit?); end the options with "
                             "`--` if the statement starts with '-'")
        return takes_value[key] and "=" not in word
    for i, letter in enumerate(word[1:], 1):
        key = "-" + letter
        if key not in takes_value:
            raise UsageError(f"unknown option {key} (see %gpu_timeit?); end the options with "
                             "`--` if the statement starts with '-'")
        if takes_value[key]:
            return i == len(word) - 1  # the value is attached unless the letter ends the word
    return False


@magics_class
class GpuProfileMagics(Magics):
    @magic_arguments()
    @argument("-n", "--number", type=int, metavar="N",
              help="timed calls per round (%%timeit's loops); default: until the 95 %% CI of the "
                   "median is within --max-noise, or --max-time")
    @argument("-r", "--repeat", "--rounds", dest="rounds", type=int, default=1, metavar="R",
              help="rounds: repeat the whole measurement; the interval spans the rounds' medians")
    @argument("-q", "--quiet", action="store_true", help="print nothing")
    @argument("-o", "--output", action="store_true",
              help="return the result (a BenchmarkResult with %%timeit's TimeitResult attributes)")
    @argument("-p", "--precision", type=int, default=4, metavar="P",
              help="significant digits of the printed line (default: 4)")
    @argument("-h", "--help", action="store_true", help="show this help and return")
    @argument("-v", "--verbose", action="store_true",
              help="show the whole result (text and HTML) instead of one line")
    @argument("-m", "--mode", default="cold", help="cold (L2 flushed, default), hot or graph")
    @argument("--clock", default="auto", help="auto, cupti, gpu or host")
    @argument("--flops", type=float, help="floating-point operations per call (TFLOP/s, roofline)")
    @argument("--bytes", type=float, help="bytes moved per call (GB/s, roofline)")
    @argument("--max-time", type=float, default=5.0, metavar="S", help="seconds per round at most")
    @argument("--max-noise", type=float, default=0.005, metavar="X",
              help="stop once the CI's half-width is within this fraction of the median")
    @argument("--name", help="the result's name (default: the statement)")
    @argument("--ab", action="store_true",
              help="A/B in one run: %%%%gpu_timeit --ab [SETUP], one statement per cell line, the "
                   "first the reference; interleaved rounds (-r, default 10), paired ratios")
    @line_cell_magic
    def gpu_timeit(self, line: str, cell: str | None = None):
        """Benchmark a statement on the GPU with gpuprofile.benchmark, the way %timeit reads:

            %gpu_timeit [options] STMT
            %%gpu_timeit [options] [SETUP]
            STMT...

        Prints `median ± CI half-width per call (median ± 95 % CI, clock, calls)`.
        """
        parser = self.gpu_timeit.parser
        words, rest = split_options(parser, line)
        args = parser.parse_args(words)
        if args.help:  # as %timeit -h; IPython's own parser leaves -h out
            print(parser.format_help())
            return None
        if args.precision < 1:
            raise UsageError(f"-p needs a number of digits >= 1, got {args.precision}")
        stmt, setup = (rest, "") if cell is None else (cell, rest)
        if not stmt.strip():
            raise UsageError("%gpu_timeit needs a statement: %gpu_timeit [options] STMT")
        if args.number is not None and args.number < 1:
            raise UsageError(f"-n needs a count >= 1, got {args.number}")
        namespace = dict(self.shell.user_ns)
        if args.mode == "graph":
            if device_count() == 0:
                raise UsageError("--mode graph needs a CUDA device "
                                 f"({_C._cuda_status()['reason'] or 'none found'})")
            from .streams import Stream

            namespace["stream"] = Stream()
        if args.ab:
            return self._ab(stmt if cell is not None else None, setup, namespace, args)
        t0 = time.perf_counter()
        try:
            fn, _ = compile_stmt(self.shell.transform_cell(stmt), self.shell.transform_cell(setup)
                                 if setup.strip() else "", namespace, name=args.name)
        except BadStatement as e:
            raise UsageError(str(e)) from None
        if args.clock in ("auto", "host") and device_count() == 0 and not args.quiet:
            print(f"gpu_timeit: no CUDA device ({_C._cuda_status()['reason'] or 'none found'}): "
                  "timing with the host clock", file=sys.stderr)
        compile_time = time.perf_counter() - t0
        result = GpuTimeitResult.of(self._measure(fn, args, namespace.get("stream")), compile_time,
                                    args.precision)
        if args.verbose and not args.quiet:
            display(result)
        elif not args.quiet:
            print(summary_line(result, args.precision))
        return result if args.output else None

    def _ab(self, cell, setup, namespace, args):
        """--ab: each line of the cell is a statement, the first the reference (bench/ab.py)."""
        from .bench.benchmark import run_ab

        stmts = [line.strip() for line in (cell or "").splitlines() if line.strip()]
        if len(stmts) < 2:
            raise UsageError("--ab compares the lines of a cell: %%gpu_timeit --ab [SETUP], then "
                             "one statement per line, the first the reference")
        setup = self.shell.transform_cell(setup) if setup.strip() else ""
        try:
            fns = {s: compile_stmt(self.shell.transform_cell(s), setup, namespace, name=s)[0]
                   for s in stmts}
        except BadStatement as e:
            raise UsageError(str(e)) from None
        options = dict(max_noise=args.max_noise, mode=args.mode, clock=args.clock,
                       stream=namespace.get("stream"), flops=args.flops, bytes=args.bytes)
        if args.max_time != 5.0:  # the single-statement default; A/B rounds are shorter
            options["max_time"] = args.max_time
        if args.rounds != 1:
            options["rounds"] = args.rounds
        try:
            ab = run_ab(fns, (), {}, options)
        except (TypeError, ValueError) as e:
            if getattr(e, "__notes__", None):
                raise
            raise UsageError(str(e)) from None
        if args.verbose and not args.quiet:
            display(ab)
        elif not args.quiet:
            print(repr(ab))
        return ab if args.output else None

    @staticmethod
    def _measure(fn, args, stream):
        count = {} if args.number is None else dict(
            min_iters=args.number, max_iters=args.number, min_time=0.0, max_time=math.inf,
            fixed=True)
        try:
            opts = make_options(**{**dict(max_time=args.max_time, max_noise=args.max_noise,
                                          mode=args.mode, clock=args.clock, stream=stream,
                                          flops=args.flops, bytes=args.bytes,
                                          rounds=args.rounds), **count})
            return run(fn, (), {}, opts)
        except (TypeError, ValueError) as e:
            if getattr(e, "__notes__", None):  # fn raised: the user's traceback
                raise
            raise UsageError(str(e)) from None
        except _C.NoDeviceError as e:  # clock='gpu' or 'cupti' here
            raise UsageError(str(e)) from None

    @cell_magic
    def gpuprofile(self, line: str, cell: str):
        """Run the cell under gpuprofile.profile() and show the kernel summary, the regions entered
        in the cell and the device-memory peak (see gpuprofile.ipython)."""
        from .notebook import CellReport, memory_peak
        from .regions import report

        opts, rest = self.parse_options(line, "", "trace=", "no-memory", posix=False)
        if rest.strip():
            raise UsageError(f"%%gpuprofile takes only --trace PATH and --no-memory, got {rest!r}")
        memory = "no-memory" not in opts
        profile, note = self._start_profile(memory)
        since = time.monotonic_ns()
        try:
            self.shell.run_cell(cell, store_history=False)
        finally:
            if profile is not None:
                profile.stop()
        summary = peak = trace = None
        if profile is not None:
            summary = profile.summary()
            peak = memory_peak(profile.memory) if memory else None
            if "trace" in opts:
                trace = profile.export_chrome_trace(opts["trace"])
        elif "trace" in opts:
            note += "; no trace written"
        display(CellReport(summary, report(since_ns=since), peak, note, trace))

    @staticmethod
    def _start_profile(memory: bool):
        """(started profile, None), or (None, why there is no trace)."""
        from .tracing.profile import profile

        if device_count() == 0:
            return None, (f"no CUDA device ({_C._cuda_status()['reason'] or 'none found'}): no kernel "
                          "trace or device memory; regions are timed with the host clock")
        p = profile(memory=memory)
        try:
            p.start()
        except _C.GpuProfileError as e:
            return None, f"no kernel trace: {e}"
        return p, None


def load_ipython_extension(ipython) -> None:
    ipython.register_magics(GpuProfileMagics)
