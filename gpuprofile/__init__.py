"""gpuprofile: trustworthy GPU measurements inside your Python process.

    import gpuprofile as gp
    with gp.region("attn"):          # CUDA events + NVTX on the stream; exit never syncs
        out = attn(q, k, v)
    print(gp.report())               # per-name GPU time table

Importing never touches the GPU, the driver or CUPTI; NumPy is imported on first use of results.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, overload

try:
    from . import _C  # noqa: F401  (fail early with a useful message)
except ImportError as exc:  # pragma: no cover - depends on how the package was installed
    import os as _os
    from importlib.machinery import EXTENSION_SUFFIXES as _suffixes

    _where = _os.path.dirname(__file__)
    if not any(_os.path.exists(_os.path.join(_where, "_C" + s)) for s in _suffixes):
        raise ImportError(
            f"gpuprofile's C extension (gpuprofile._C) is not built in {_where}. If that is a "
            "source checkout, install it in place with `pip install -e .` (or run Python from "
            "another directory so the installed package is imported)."
        ) from exc
    # built but not loadable (an undefined symbol, a wrong ELF): rebuilding in place would not help
    raise ImportError(
        f"gpuprofile's C extension in {_where} is there but cannot be loaded: {exc}. Reinstall "
        "gpuprofile from a complete source tree (docs/install.md); please report it if it persists."
    ) from exc

import sys as _sys

from . import kernels, nvtx
from ._C import (
    CudaError,
    CuptiError,
    GpuProfileError,
    NoDeviceError,
    disable,
    enable,
    is_enabled,
    region,
)
from ._foreign import torch_profiler_holds_cupti as _torch_profiler_holds_cupti
from ._version import __version__ as __version__
from .device import DeviceInfo, device_count, device_info
from .tracing import memory

# gp.memory is public; `import gpuprofile.memory` gives the same module as the attribute.
_sys.modules[f"{__name__}.memory"] = memory

_C._set_foreign_profiler_check(_torch_profiler_holds_cupti)


# region(name, metrics=...) calls these from C (csrc/counters/region_metrics.c); the counters
# module loads on the first such region, so `import gpuprofile` stays light.
def _region_metrics_enter(name, spec, record):
    from .counters.metrics import _region_enter

    return _region_enter(name, spec, record)


def _region_metrics_exit(record):
    from .counters.metrics import _region_exit

    return _region_exit(record)


_C._set_region_metrics_hooks(_region_metrics_enter, _region_metrics_exit)


def _time_coroutine_function(region, fn):
    """`@region(...)` on an `async def` (csrc/regions/regions.c calls this): the region spans each
    awaited call, in the task that awaits it, not just the making of the coroutine."""
    import functools

    @functools.wraps(fn)
    async def timed(*args, **kwargs):
        with region:
            return await fn(*args, **kwargs)

    timed.region = region
    return timed


_C._set_coroutine_wrapper(_time_coroutine_function)


def reset() -> None:
    """Forget every region record (GpuProfileError while regions are open). The allocation records
    kept for memory=True regions shrink to the allocations still live."""
    from .tracing.activity import compact_region_log

    _C.reset()
    compact_region_log()


def records() -> numpy.ndarray:
    """Every region instance since reset() as a NumPy structured array (see _records.records)."""
    from .regions import records as _records

    return _records()


def stats(name: str) -> RegionStats:
    """RegionStats of region `name`: count, total/mean/median/min/max/p90 ms, host time."""
    from .regions import stats as _stats

    return _stats(name)


# BEGIN generated: profile overloads (tools/init_stubs.py, from tracing/options.py's ProfileOptions)
@overload
def profile(
    kernels: bool = True,
    memcpy: bool = True,
    memset: bool = True,
    memory: bool = True,
    regions: bool = True,
    stream_attribution: bool = True,
    python_stacks: bool | str | None = False,
    region_clock: str = "cupti",
    *, schedule: None = None,
    on_trace_ready: None = None,
) -> Profile: ...
@overload
def profile(
    kernels: bool = True,
    memcpy: bool = True,
    memset: bool = True,
    memory: bool = True,
    regions: bool = True,
    stream_attribution: bool = True,
    python_stacks: bool | str | None = False,
    region_clock: str = "cupti",
    *, schedule: Schedule,
    on_trace_ready: Callable[[ScheduledProfile], object] | None = None,
) -> ScheduledProfile: ...
@overload
def profile(
    kernels: bool = True,
    memcpy: bool = True,
    memset: bool = True,
    memory: bool = True,
    regions: bool = True,
    stream_attribution: bool = True,
    python_stacks: bool | str | None = False,
    region_clock: str = "cupti",
    *, schedule: Schedule | None = None,
    on_trace_ready: Callable[[ScheduledProfile], object],
) -> ScheduledProfile: ...
# END generated
def profile(*args, schedule=None, on_trace_ready=None, **kwargs):
    """CUPTI trace of kernels, copies, sets and device memory: `with gpuprofile.profile() as p:`
    (or p.start() / p.stop()); then p.kernels, p.summary(), p.export_chrome_trace(path). See
    gpuprofile.tracing.profile.profile. With schedule=gpuprofile.schedule(wait=, warmup=,
    active=) and/or on_trace_ready=fn, as torch.profiler: a ScheduledProfile that traces the
    active steps between p.step() calls (gpuprofile.tracing.schedule)."""
    from .tracing.options import ProfileOptions

    options = ProfileOptions.of(*args, **kwargs)  # the options' one definition checks them
    if schedule is not None or on_trace_ready is not None:
        from .tracing.schedule import scheduled

        return scheduled(schedule, on_trace_ready, **vars(options))
    from .tracing.profile import profile as _profile

    return _profile(options)


def _profile_doc() -> str:
    from .tracing.options import OPTIONS_HELP  # light: no NumPy, no _C

    return f"""Trace the GPU: `with gpuprofile.profile() as p:` or p.start() / p.stop(); then
    p.kernels, p.summary(), p.export_chrome_trace(path).

    {OPTIONS_HELP}.

    schedule=gpuprofile.schedule(wait=, warmup=, active=) and/or on_trace_ready=fn, as
    torch.profiler: a ScheduledProfile that traces the active steps between p.step() calls
    (gpuprofile.tracing.schedule).

    Needs a device and CUPTI; raises CuptiError if another profiler holds CUPTI, GpuProfileError
    if a profile is already recording."""


def _profile_signature():
    """inspect.signature(gp.profile): the options of tracing/options.py, then schedule= and
    on_trace_ready=."""
    import inspect

    from .tracing.options import SIGNATURE

    extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None)
             for name in ("schedule", "on_trace_ready")]
    return SIGNATURE.replace(parameters=[*SIGNATURE.parameters.values(), *extra],
                             return_annotation="Profile | ScheduledProfile")


profile.__doc__ = _profile_doc()
profile.__signature__ = _profile_signature()  # type: ignore[attr-defined]


def report() -> Report:
    """A Report table of every region name; print() it or show it in a notebook."""
    from .regions import report as _report

    return _report()


def load_ipython_extension(ipython):
    """`%load_ext gpuprofile`: the %gpu_timeit, %%gpu_timeit and %%gpuprofile magics (see
    gpuprofile/ipython.py; IPython is imported only here)."""
    from .ipython import load_ipython_extension as _load

    _load(ipython)


# Hardware counters (gpuprofile/counters/), the benchmark helper (gpuprofile/bench/) and tracing
# (gpuprofile/tracing/, whose profile() takes the options of tracing/options.py): loaded
# on first use, so `import gpuprofile` stays fast. See docs/counters.md and docs/benchmark.md.
_LAZY = {
    "metrics": "counters.metrics", "metric_passes": "counters.metrics",
    "region_metrics": "counters.metrics", "MetricsResult": "counters.result",
    "list_metrics": "counters.catalog", "list_chips": "counters.catalog",
    "stalls": "counters.stalls", "capture_cubins": "counters.stalls",
    "release_cubins": "counters.stalls", "sample": "counters.sample",
    "ceilings": "counters.roofline", "plot_roofline": "counters.roofline",
    "benchmark": "bench.benchmark", "BenchmarkResult": "bench.result", "do_bench": "bench.do_bench",
    "Comparison": "bench.result", "compare": "bench.result", "Stream": "streams",
    "ABResult": "bench.ab",
    "schedule": "tracing.schedule", "ProfilerAction": "tracing.schedule",
    "merge_traces": "tracing.merge", "TraceFileError": "tracing.merge", "rank_info": "distributed",
}
_LAZY_MODULES = ("distributed",)  # gp.distributed: rank awareness (docs/distributed.md)


if TYPE_CHECKING:  # what the annotations in this file name
    from collections.abc import Callable

    import numpy

    from .regions import RegionStats, Report
    from .tracing.profile import Profile
    from .tracing.schedule import Schedule, ScheduledProfile

if TYPE_CHECKING:  # what __getattr__ loads, for mypy and pyright
    # BEGIN generated: lazy names (tools/init_stubs.py, from _LAZY and _LAZY_MODULES)
    from . import distributed as distributed
    from .bench.ab import ABResult as ABResult
    from .bench.benchmark import benchmark as benchmark
    from .bench.do_bench import do_bench as do_bench
    from .bench.result import BenchmarkResult as BenchmarkResult
    from .bench.result import Comparison as Comparison
    from .bench.result import compare as compare
    from .counters.catalog import list_chips as list_chips
    from .counters.catalog import list_metrics as list_metrics
    from .counters.metrics import metric_passes as metric_passes
    from .counters.metrics import metrics as metrics
    from .counters.metrics import region_metrics as region_metrics
    from .counters.result import MetricsResult as MetricsResult
    from .counters.roofline import ceilings as ceilings
    from .counters.roofline import plot_roofline as plot_roofline
    from .counters.sample import sample as sample
    from .counters.stalls import capture_cubins as capture_cubins
    from .counters.stalls import release_cubins as release_cubins
    from .counters.stalls import stalls as stalls
    from .distributed import rank_info as rank_info
    from .streams import Stream as Stream
    from .tracing.merge import TraceFileError as TraceFileError
    from .tracing.merge import merge_traces as merge_traces
    from .tracing.schedule import ProfilerAction as ProfilerAction
    from .tracing.schedule import schedule as schedule
    # END generated

def __getattr__(name: str):
    if name in _LAZY_MODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gpuprofile' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{module}", __name__), name)


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_LAZY_MODULES))


__all__ = [
    "CudaError", "CuptiError", "DeviceInfo", "GpuProfileError", "NoDeviceError", "device_count",
    "device_info", "disable", "enable", "is_enabled", "kernels", "memory", "nvtx",
    "records", "region", "report", "reset", "stats", *_LAZY, *_LAZY_MODULES,
]
