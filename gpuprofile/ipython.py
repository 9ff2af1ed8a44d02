"""IPython magics, loaded by `%load_ext gpuprofile` (gpuprofile.load_ipython_extension):

    %gpu_timeit [options] STMT           benchmark one statement (gpuprofile.benchmark)
    %%gpu_timeit [options] [SETUP]       benchmark the cell; the rest of the first line is setup
    %%gpuprofile [--trace PATH] [--no-memory]
                                         run the cell under gpuprofile.profile(): kernel summary,
                                         the cell's regions and the device-memory peak, inline

%gpu_timeit options: -m/--mode cold|hot|graph, --flops F, --bytes B, --clock C, --max-time S,
--max-noise X, --rounds N (repeat the whole measurement; the interval spans the rounds' medians),
-n NAME, -o (return the BenchmarkResult instead of displaying it). Statements see
the notebook's names; setup runs in a copy of them, so it leaves the notebook's namespace as it
was. In graph mode `stream` is a gpuprofile.Stream to launch on. Without a CUDA device the host
clock times the statement, and the result says so.

Only this module imports IPython; `import gpuprofile` never does.
"""

from __future__ import annotations

import sys
import time

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_cell_magic, magics_class
from IPython.display import display

from . import _C
from .bench.benchmark import benchmark
from .bench.stmt import BadStatement, compile_stmt
from .device import device_count

_TIMEIT_LONG = ["mode=", "flops=", "bytes=", "clock=", "max-time=", "max-noise=", "name=", "rounds="]


def _number(opts, key: str, default=None, kind=float):
    """Option `key` converted by `kind` (float, or int for a count); `default` when absent."""
    if key not in opts:
        return default
    try:
        return kind(opts[key])
    except ValueError:
        what = "a number" if kind is float else "a whole number"
        raise UsageError(f"--{key} needs {what}, got {opts[key]!r}") from None


@magics_class
class GpuProfileMagics(Magics):
    @line_cell_magic
    def gpu_timeit(self, line: str, cell: str | None = None):
        """Benchmark a statement on the GPU with gpuprofile.benchmark (see gpuprofile.ipython)."""
        opts, rest = self.parse_options(line, "m:n:o", *_TIMEIT_LONG, posix=False, strict=False,
                                        preserve_non_opts=True)
        stmt, setup = (rest, "") if cell is None else (cell, rest)
        if not stmt.strip():
            raise UsageError("%gpu_timeit needs a statement: %gpu_timeit [options] STMT")
        mode = opts.get("m", opts.get("mode", "cold"))
        namespace = dict(self.shell.user_ns)
        if mode == "graph":
            if device_count() == 0:
                raise UsageError("--mode graph needs a CUDA device "
                                 f"({_C._cuda_status()['reason'] or 'none found'})")
            from .bench.streams import Stream

            namespace["stream"] = Stream()
        try:
            fn, _ = compile_stmt(self.shell.transform_cell(stmt), self.shell.transform_cell(setup)
                                 if setup.strip() else "", namespace, name=opts.get("n", opts.get("name")))
        except BadStatement as e:
            raise UsageError(str(e)) from None
        clock = opts.get("clock", "auto")
        if clock in ("auto", "host") and device_count() == 0:
            print(f"gpu_timeit: no CUDA device ({_C._cuda_status()['reason'] or 'none found'}): "
                  "timing with the host clock", file=sys.stderr)
        try:
            result = benchmark(fn, mode=mode, clock=clock, flops=_number(opts, "flops"),
                               bytes=_number(opts, "bytes"), max_time=_number(opts, "max-time", 5.0),
                               max_noise=_number(opts, "max-noise", 0.005),
                               stream=namespace.get("stream"), rounds=_number(opts, "rounds", 1, int))
        except (TypeError, ValueError) as e:
            if getattr(e, "__notes__", None):  # fn raised: the user's traceback
                raise
            raise UsageError(str(e)) from None
        except _C.NoDeviceError as e:  # clock='gpu' or 'cupti' here
            raise UsageError(str(e)) from None
        if "o" in opts:
            return result
        display(result)
        return None

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
