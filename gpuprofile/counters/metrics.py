"""Hardware counters of a Python callable (gpuprofile.metrics) or a `with` block
(gpuprofile.region(name, metrics=...)), through CUPTI's range profiler.

The replay contract of metrics(): a metric set that needs N passes runs `fn` N times under the
profiler (user replay), plus once before as a warm-up (warmup=True). Every pass must launch the
same kernels on the same data, or the counters of different passes describe different work.
If `fn` is not idempotent (it updates its inputs in place, steps an optimizer...), pass
`setup=`, a callable run before every pass that restores the state. A pass count is known
before anything runs: gpuprofile.metric_passes(metrics), result.passes, and an INFO line on
the "gpuprofile" logger.

A region with metrics cannot be re-run, so a one-pass set is collected directly with a user
range around the block, and a multi-pass set through kernel replay: CUPTI replays each kernel
in the block N times, saving and restoring its memory (exact, but ~16 ms per kernel on H100:
fine for a few kernels, not for hundreds). The cost is in the result.

Cache and clock state, as Nsight Compute's --cache-control and --clock-control: with
cache_control="all" (the default, as ncu's) L2 is flushed before each counted kernel (per-kernel
ranges) or before each pass (one range for the call, a region with a one-pass set), always
outside the counted range: the device is idle, the flush reads twice the L2 (the buffer
gpuprofile.benchmark flushes with), the device is idle again, then the range opens or the
kernel launches. L1 and the texture cache are not flushed separately: they are invalidated for
global data at every kernel boundary, so each kernel starts with them cold either way. With
"none" the caches hold what ran before (earlier kernels of fn, the previous pass), as the
program would see them. Clocks are never locked (ncu's --clock-control none): the counters
describe the clocks the GPU chose. Every result records both (cache_control, clock_control).
"""

from __future__ import annotations

import logging
import time
import warnings
from collections import deque
from dataclasses import dataclass

from .. import _C
from .._progress import progress
from .._user_code import add_note
from .._user_code import callable_name as _label
from . import catalog as _catalog
from .metric_sets import DURATION, expand, sets_in
from .result import CACHE_CONTROL, MetricsResult, build

log = logging.getLogger("gpuprofile")

# Kernels one region with a multi-pass set may launch (the counter data image holds this many
# ranges, ~1 MB each for a SOL-sized set). More kernels fail the region's result, never
# silently: raise this before entering such a region.
REGION_MAX_KERNELS = 64
# Range capacity of metrics(per="kernel") when the warm-up could not count the kernels.
DEFAULT_MAX_KERNELS = 256

# CUPTI's own kernel launched around user-replay ranges; never the user's.
_CUPTI_INTERNAL = ("WaitNs",)

def _check_cache_control(value) -> str:
    if value not in CACHE_CONTROL:
        raise ValueError(f"cache_control must be one of {sorted(CACHE_CONTROL)}, got {value!r}")
    return value


def _is_flush(name: str) -> bool:
    return name.startswith(_C._L2_FLUSH_KERNEL)


def _count(names: list) -> int:
    """Kernels launched, the L2 flushes gpuprofile launched before them left out."""
    return sum(not _is_flush(n) for n in names)


def _drop_flushes(ranges: list, names: list | None) -> tuple:
    """(ranges, names) without the L2 flushes launched before each kernel: each flush is logged
    under _C._L2_FLUSH_KERNEL and has an auto range of its own, never inside a kernel's range."""
    if names is None or len(names) != len(ranges):
        raise _C.GpuProfileError(
            "cache_control='all' flushes L2 before each kernel and needs the launch log to tell "
            "the flushes' ranges from the kernels' "
            f"({'no log' if names is None else f'{len(names)} launches for {len(ranges)} ranges'}"
            "): use cache_control='none', or per='call'")
    kept = [i for i, n in enumerate(names) if not _is_flush(n)]
    return [ranges[i] for i in kept], [names[i] for i in kept]


@dataclass
class _Plan:
    names: list
    infos: dict
    config: bytes
    passes: int
    chip: str
    host: object
    sets: list
    setup_s: float


_PLANS: dict = {}


def _names(spec) -> list:
    names = expand(spec)
    return [DURATION] + [n for n in names if n != DURATION]


def _plan(spec) -> _Plan:
    """Validated names, config image and pass count for the current device (cached)."""
    t0 = time.perf_counter()
    names = _names(spec)
    chip, avail = _catalog.device_chip("range")
    key = (chip, avail, tuple(names))
    plan = _PLANS.get(key)
    if plan is None:
        infos = _catalog.validate(names, chip, "range", avail)
        config, passes = _catalog.configure(names, chip, "range", avail)
        plan = _Plan(names, infos, config, passes, chip, _catalog.host(chip, "range", avail),
                     sets_in(spec), 0.0)
        plan.setup_s = time.perf_counter() - t0
        _PLANS[key] = plan
        return plan
    return _Plan(**{**plan.__dict__, "setup_s": 0.0})


def metric_passes(metrics="sol", chip: str | None = None) -> int:
    """How many passes (runs of fn, or replays of each kernel) `metrics` needs; offline when
    `chip` is given (e.g. "GH100"), else for the current device."""
    names = _names(metrics)
    chip, avail = _catalog.chip_or_device(chip, "range")
    _catalog.validate(names, chip, "range", avail)
    return _catalog.configure(names, chip, "range", avail)[1]


# ---- the launch log (names for auto ranges) -------------------------------------------------


def _log_start(notes: list) -> bool:
    try:
        _C._launch_log_start()
        return True
    except _C.CuptiError as e:
        notes.append(f"kernel names unavailable: {e}")
        return False


def _log_take() -> list:
    names, complete = _C._launch_log_take()
    names = [n for n in names if not any(n.startswith(c) for c in _CUPTI_INTERNAL)]
    return names if complete else None


def _cleanup(rp, log_on: bool) -> list:
    """Closes what is open; returns the errors as messages (never raises)."""
    errors = []
    if rp is not None:
        try:
            rp.close()
        except Exception as e:  # noqa: BLE001 - reported to the caller
            errors.append(f"closing the range profiler: {e}")
    if log_on:
        try:
            _C._launch_log_stop()
        except Exception as e:  # noqa: BLE001
            errors.append(f"stopping the launch log: {e}")
    return errors


def _annotate(exc: BaseException, errors: list) -> None:
    for msg in errors:
        add_note(exc, f"gpuprofile cleanup: {msg}")


# ---- metrics() --------------------------------------------------------------------------------


def metrics(fn, *args, metrics="sol", per: str = "kernel", max_passes: int | None = None,
            setup=None, warmup: bool = True, max_kernels: int | None = None,
            cache_control: str = "all", **kwargs) -> MetricsResult:
    """Hardware counters of fn(*args, **kwargs).

    metrics: a set name ("sol", "roofline", "occupancy", "tensor", "memory", "stalls"; see
        gpuprofile.counters.metric_sets), a metric name, or a list of either. Unknown names raise
        ValueError with close matches.
    per: "kernel" (one range per kernel, in launch order, plus combined totals) or "call" (one
        range around the whole call: exact totals).
    max_passes: refuse (ValueError, before running anything) a set needing more passes.
    setup: called before every run of fn, to restore state for a non-idempotent fn.
    warmup: run fn once before profiling (compilation, autotuning, caches) and count its
        kernels to size the counter data.
    max_kernels: kernels per pass to make room for (per="kernel"); default: the warm-up count.
    cache_control: "all" (flush L2 before each counted kernel and each pass, outside the counted
        range, as ncu's default) or "none" (no flush). Clocks are never locked (ncu's
        --clock-control none). See the module docstring.

    Runs fn `passes` (+1 warm-up) times; see the module docstring for the replay contract.
    """
    if not callable(fn):
        raise TypeError(f"metrics(fn): fn must be callable, got {type(fn).__name__}")
    if setup is not None and not callable(setup):
        raise TypeError(f"metrics(setup=...): setup must be callable, got {type(setup).__name__}")
    if per not in ("kernel", "call"):
        raise ValueError(f"per must be 'kernel' or 'call', got {per!r}")
    _check_cache_control(cache_control)
    for what, v in (("max_passes", max_passes), ("max_kernels", max_kernels)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise ValueError(f"{what} must be a positive int, got {v!r}")
    _catalog.require_counters_free("gpuprofile.metrics()")
    plan = _plan(metrics)
    if max_passes is not None and plan.passes > max_passes:
        raise ValueError(
            f"the {len(plan.names)} metrics need {plan.passes} passes (fn would run "
            f"{plan.passes} times) but max_passes={max_passes}: collect fewer metrics, or allow "
            f"more passes")
    label = _label(fn)
    log.info("gpuprofile.metrics(%s): %d metrics need %d pass%s: fn runs %d time%s%s", label,
             len(plan.names), plan.passes, "es" if plan.passes != 1 else "", plan.passes,
             "s" if plan.passes != 1 else "", " after a warm-up run" if warmup else "")
    # Multi-pass replays of a slow fn take a while: a progress display after a couple of seconds.
    with progress(plan.passes + (1 if warmup else 0), f"gpuprofile.metrics({label}): runs") as bar:
        return _collect(bar.wrap(fn), args, kwargs, plan, label, per, setup, warmup, max_kernels,
                        cache_control)


def _run(setup, fn, args, kwargs):
    if setup is not None:
        setup()
    fn(*args, **kwargs)


def _without_kernels(setup, fn, args, kwargs) -> str:
    """What fn did on the GPU instead of kernels (one more call, traced), for the error."""
    from ..tracing import activity

    collector = activity.Collector(activity.MEMCPY | activity.MEMSET, "gpuprofile.metrics")
    try:
        collector.start()
    except _C.GpuProfileError:  # CUPTI held elsewhere: nothing more to say
        return "hardware counters here count kernels"
    try:
        _run(setup, fn, args, kwargs)
    finally:
        chunk = collector.stop().chunk
    copies, sets = chunk.memcpy, chunk.memset
    if not len(copies) and not len(sets):
        return "it enqueued no copy or set either (host work only?)"
    did = [f"{n} {what} of {int(b.sum()) / 2**20:.4g} MiB in all" for n, what, b in
           ((len(copies), "copies", copies["bytes"]), (len(sets), "sets", sets["bytes"])) if n]
    return (f"it ran {' and '.join(did)} on the copy engine (not a kernel: the counters here count "
            "kernels); time it with gpuprofile.benchmark(fn, bytes=...) for its bandwidth")


def _pass_loop(rp, fn, args, kwargs, plan, label, per, setup, log_on, flush_pass):
    """Runs passes until CUPTI has them all; returns (runs, kernel names of the first pass).
    flush_pass: flush L2 after setup and before the pass starts (outside its range)."""
    first, runs = None, 0
    while True:
        if setup is not None:
            setup()
            if log_on:  # setup's kernels run outside the pass: not the pass's launches
                _C._synchronize()
                _log_take()
        if flush_pass:
            _C._l2_flush()
        rp.start()
        if per == "call":
            rp.push(label)
        fn(*args, **kwargs)
        runs += 1
        _C._synchronize()
        if log_on:  # checked before stop(), so CUPTI never sees a mismatched pass
            launched = _log_take()
            if first is None:
                first = launched
            elif launched is not None and len(launched) != len(first):
                raise _C.GpuProfileError(
                    f"fn is not replayable: it launched {_count(first)} kernels in pass 1 and "
                    f"{_count(launched)} in pass {runs}; make every run launch the same work (pass "
                    f"setup= to restore state between runs)")
        if per == "call":
            rp.pop()
        done = rp.stop()
        if done:
            return runs, first
        if runs > plan.passes:
            raise _C.GpuProfileError(f"CUPTI asked for more than the {plan.passes} passes the "
                                     f"configuration needs")


def _collect(fn, args, kwargs, plan, label, per, setup, warmup, max_kernels,
             cache_control) -> MetricsResult:
    notes: list = []
    t0 = time.perf_counter()
    # log_on is True before the start: a Ctrl-C raised just after the C start returns leaves it
    # True, so _cleanup stops the log (stopping a log that never started does nothing)
    rp, log_on, calls = None, True, 0
    try:
        log_on = _log_start(notes)
        warm = None
        if warmup:
            if setup is not None:
                setup()
                _C._synchronize()
                if log_on:  # the kernel count sizes the ranges: fn's launches only
                    _log_take()
            fn(*args, **kwargs)
            calls += 1
            _C._synchronize()
            warm = _log_take() if log_on else None
        if per == "kernel" and warm is not None and len(warm) == 0:
            # no kernel to give a range: the counters would be NaN with no word. A user range
            # around a lone copy-engine copy crashed inside CUPTI's range profiler on an H200
            # (2026-11-25, cuptiRangeProfilerStop), so no range is tried: say what fn did instead
            raise ValueError("gpuprofile.metrics: fn launched no kernel, so there is nothing to "
                             "count per kernel; " + _without_kernels(setup, fn, args, kwargs))
        # per kernel, the flush before each kernel is a launch of its own with its own range
        flush_kernels = cache_control == "all" and per == "kernel"
        if flush_kernels and not log_on:
            raise _C.CuptiError(  # CUPTI held by another tool: the error class says so
                "cache_control='all' per kernel flushes L2 from CUPTI's launch callbacks, which "
                f"are unavailable ({notes[-1]}): use cache_control='none', or per='call'")
        if per == "call":
            kernels_room = 1
        else:
            # without a warm-up count, the default holds DEFAULT_MAX_KERNELS ranges in all (each
            # ~1 MB of host memory for a SOL-sized set), flushes' included
            kernels_room = max_kernels or (max(len(warm), 1) if warm is not None else
                                           DEFAULT_MAX_KERNELS // (2 if flush_kernels else 1))
        capacity = kernels_room * (2 if flush_kernels else 1)  # ranges: a flush's own as well
        rp = _C.RangeProfiler(plan.config, plan.names, range="user" if per == "call" else "auto",
                              replay="user", max_ranges=capacity)
        if flush_kernels:
            _C._launch_log_flush(True)
        runs, kernel_names = _pass_loop(rp, fn, args, kwargs, plan, label, per, setup, log_on,
                                        flush_pass=cache_control == "all" and per == "call")
        calls += runs
        dropped = rp.decode()
        if per == "kernel" and kernel_names and len(kernel_names) > capacity:
            # CUPTI may drop auto ranges beyond its capacity without counting them
            dropped = max(dropped, len(kernel_names) - capacity)
        if dropped:
            dropped = -(-dropped // 2) if flush_kernels else dropped
            raise ValueError(f"fn launched more kernels than the {kernels_room} profiled per "
                             f"pass ({dropped} not profiled): pass max_kernels=")
        ranges = rp.evaluate(plan.host)
        if flush_kernels:
            ranges, kernel_names = _drop_flushes(ranges, kernel_names)
        counter_bytes = rp.counter_data_bytes
        if per == "kernel" and not ranges:
            raise ValueError("gpuprofile.metrics: fn launched no kernel that CUPTI profiled, so "
                             "there is nothing to count per kernel; per='call' counts the whole "
                             "call (copy-engine copies and sets included)")
    except BaseException as e:
        _annotate(e, _cleanup(rp, log_on))
        raise
    errors = _cleanup(rp, log_on)
    if errors:
        raise _C.CuptiError("; ".join(errors))
    return build(label, per, plan.names, plan.infos, ranges, kernel_names, passes=runs,
                 replay="user", range_mode="user" if per == "call" else "auto", calls=calls,
                 cost_s=time.perf_counter() - t0, setup_s=plan.setup_s, chip=plan.chip,
                 sets=plan.sets, notes=notes, counter_data_bytes=counter_bytes,
                 cache_control=cache_control)


# ---- region(name, metrics=...) ---------------------------------------------------------------


@dataclass
class _Open:
    name: str
    plan: _Plan
    rp: object
    log_on: bool
    user_range: bool
    t0: float
    notes: list
    cache_control: str


_OPEN: dict = {}
_RESULTS: dict = {}
_KEEP = 100  # results kept per region name


def region_spec(spec) -> tuple:
    """(metrics, cache_control) of a region's metrics=: a set or metric name, a list of them, or
    a dict {"metrics": ..., "cache_control": "all" | "none"} (default "all", as metrics())."""
    if isinstance(spec, dict):
        unknown = sorted(set(spec) - {"metrics", "cache_control"})
        if unknown or "metrics" not in spec:
            raise ValueError("region(metrics={...}) takes the keys 'metrics' (required) and "
                             f"'cache_control'; got {sorted(spec)}")
        return spec["metrics"], _check_cache_control(spec.get("cache_control", "all"))
    return spec, "all"


def _region_enter(name, spec, record):
    t0 = time.perf_counter()
    _catalog.require_counters_free(f"region {name!r} with metrics")
    spec, cache_control = region_spec(spec)
    plan = _plan(spec)
    notes: list = []
    user_range = plan.passes == 1
    flush = cache_control == "all"
    rp, log_on = None, not user_range  # True before the start, as in _collect
    try:
        if not user_range:
            log_on = _log_start(notes)
            if flush and not log_on:
                raise _C.GpuProfileError(
                    "cache_control='all' flushes L2 before each kernel from CUPTI's launch "
                    f"callbacks, which are unavailable ({notes[-1]}): pass "
                    "metrics={'metrics': ..., 'cache_control': 'none'}")
        rp = _C.RangeProfiler(plan.config, plan.names, range="user" if user_range else "auto",
                              replay="user" if user_range else "kernel",
                              max_ranges=1 if user_range else REGION_MAX_KERNELS * (2 if flush else 1))
        if flush and user_range:
            _C._l2_flush()  # before the range opens: the flush is not counted
        elif flush:
            _C._launch_log_flush(True)
            notes.append("kernel replay: L2 is flushed before each kernel's first replay; CUPTI "
                         "replays it inside the launch, and later replays see the caches as "
                         "CUPTI's restore of its memory leaves them")
        rp.start()
        if user_range:
            rp.push(name)
    except BaseException as e:
        _annotate(e, _cleanup(rp, log_on))
        raise
    _OPEN[record] = _Open(name, plan, rp, log_on, user_range, t0, notes, cache_control)


def _region_finish(st: _Open) -> MetricsResult:
    _C._synchronize()
    if st.user_range:
        st.rp.pop()
    if not st.rp.stop():
        raise _C.GpuProfileError("CUPTI wants another pass, but a region runs once")
    dropped = st.rp.decode()
    if dropped and st.cache_control == "all" and not st.user_range:
        dropped = -(-dropped // 2)  # ranges: each kernel's and its flush's
    if dropped:
        raise _C.GpuProfileError(
            f"region {st.name!r} launched more than {REGION_MAX_KERNELS} kernels ({dropped} not "
            f"profiled): raise gpuprofile.counters.REGION_MAX_KERNELS")
    ranges = st.rp.evaluate(st.plan.host)
    names = _log_take() if st.log_on else None
    if st.cache_control == "all" and not st.user_range:
        ranges, names = _drop_flushes(ranges, names)
    counter_bytes = st.rp.counter_data_bytes
    errors = _cleanup(st.rp, st.log_on)
    st.rp, st.log_on = None, False
    if errors:
        raise _C.CuptiError("; ".join(errors))
    p = st.plan
    return build(st.name, "region", p.names, p.infos, ranges, names, passes=p.passes,
                 replay="user" if st.user_range else "kernel",
                 range_mode="user" if st.user_range else "auto", calls=1,
                 cost_s=time.perf_counter() - st.t0, setup_s=p.setup_s, chip=p.chip, sets=p.sets,
                 notes=st.notes, counter_data_bytes=counter_bytes, cache_control=st.cache_control)


def _region_exit(record):
    st = _OPEN.pop(record, None)
    if st is None:
        return
    try:
        outcome = _region_finish(st)
    except Exception as e:  # noqa: BLE001 - stored, raised by region_metrics()
        _annotate(e, _cleanup(st.rp, st.log_on))
        outcome = e
        warnings.warn(f"gpuprofile: counters of region {st.name!r} failed: {e}", RuntimeWarning,
                      stacklevel=3)
    _RESULTS.setdefault(st.name, deque(maxlen=_KEEP)).append(outcome)


def region_metrics(name: str, all: bool = False):  # noqa: A002 - mirrors the docs
    """The MetricsResult of the last `region(name, metrics=...)` block (or, with all=True, of
    each of the last 100). Raises the collection's error if it failed, KeyError if none ran."""
    if not isinstance(name, str):
        raise TypeError(f"region_metrics(name): name must be a str, got {type(name).__name__}")
    outcomes = _RESULTS.get(name)
    if not outcomes:
        known = ", ".join(sorted(_RESULTS)) or "none"
        raise KeyError(f"no region named {name!r} collected metrics (regions with metrics: {known})")
    chosen = list(outcomes) if all else [outcomes[-1]]
    for o in chosen:
        if isinstance(o, BaseException):
            raise _C.GpuProfileError(f"collecting the counters of region {name!r} failed: {o}") from o
    return chosen if all else chosen[0]

