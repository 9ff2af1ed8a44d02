"""gpuprofile.benchmark: time a callable the way a careful kernel engineer would, with the
uncertainty attached.

The C core (csrc/bench/bench.c) enqueues and times batches of iterations. The options are
bench/options.py's, the sample sources bench/sources.py's, the warm-up and the stopping rule
bench/loop.py's; this module runs a measurement (first call, graph capture, CUPTI or event
timing, warm-up, loop, rounds) and builds the BenchmarkResult.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import warnings
from datetime import datetime, timezone
from typing import Any

from .._user_code import add_note as _add_note
from .._user_code import callable_name as _fn_name
from ..distributed import rank_fields
from .loop import Collected, collect, warm_up
from .options import SIGNATURE, Options, make_options, split_options
from .result import BenchmarkResult, throughput
from .rounds import merge_rounds
from .sources import GpuSource, HostSource

# Host clock: calls per sample are grouped until a sample lasts at least this long.
_HOST_MIN_SAMPLE_S = 10e-6


# ---- results -------------------------------------------------------------------------------------


def _peaks(info, peak) -> tuple[str | None, float | None, float | None]:
    """(peak name, TFLOP/s, DRAM GB/s) for `peak`: None picks the FP16 tensor peak where the device
    has one (else FP32), a string names one, a number is a custom TFLOP/s."""
    if info is None:
        return (None, float(peak), None) if isinstance(peak, (int, float)) else (None, None, None)
    if isinstance(peak, (int, float)):
        return "custom", float(peak), info.peak_dram_gbps
    if peak is None:
        peak = "fp16_tensor" if info.peak_fp16_tensor_tflops else "fp32"
    tflops = info.peak_fp16_tensor_tflops if peak == "fp16_tensor" else info.peak_fp32_tflops
    return peak, tflops, info.peak_dram_gbps


@functools.cache
def _device_info(index: int):
    from ..device import device_info

    return device_info(index)


def _build_result(opts: Options, got: Collected, *, clock, inner, gated, flush_bytes, warmup_s,
                  first_call_ms, info, clocks, graph_nodes, name, clock_note=None,
                  event_median_ms=None) -> Any:
    from .._stats import rel_half_width, resolved_median_ci, summary
    from .._version import __version__
    from .result import BenchmarkResult, throttle_reason_names

    s = summary(got.samples)
    # the host's per-call samples divide a reading by `inner`; GPU timestamps step by 32 ns
    # (measured on the H200: docs/benchmarks.md, benchmark accuracy)
    stated = time.get_clock_info("monotonic").resolution * 1e3 / inner if clock == "host" else 32e-6
    low, high, step = resolved_median_ci(got.samples, stated)
    peak_name, peak_tflops, peak_gbps = _peaks(info, opts.peak)
    tp = throughput(got.median_ms, opts.flops, opts.bytes, peak_tflops, peak_gbps)
    start, end = clocks if clocks else (None, None)
    reasons = 0
    for c in (start, end):
        reasons |= (c or {}).get("throttle_reasons") or 0
    iterations = int(got.samples.size) * inner
    return BenchmarkResult(
        name=name, samples=got.samples, median_ms=s["median"], mean_ms=s["mean"], stdev_ms=s["stdev"],
        min_ms=s["min"], max_ms=s["max"], p10_ms=s["p10"], p90_ms=s["p90"], iqr_ms=s["iqr"],
        ci_low_ms=low, ci_high_ms=high, rel_noise=rel_half_width(low, high, s["median"]),
        resolution_ms=step, iterations=iterations,
        mode=opts.mode, clock=clock, flush_l2=opts.flush_l2 and clock != "host", l2_flush_bytes=flush_bytes,
        clock_note=clock_note, event_median_ms=event_median_ms,
        gated=gated, host_ms_per_iter=got.host_s * 1e3 / iterations if iterations else math.nan,
        wall_s=got.wall_s, warmup_s=warmup_s, first_call_ms=first_call_ms,
        converged=got.rel_noise <= opts.max_noise, stop_reason=got.stop_reason, max_noise=opts.max_noise,
        device=info.name if info else None, device_index=info.index if info else None,
        sm_clock_mhz_start=start["mhz"] if start else None, sm_clock_mhz_end=end["mhz"] if end else None,
        sm_clock_source=start["source"] if start else None, throttle_reasons=throttle_reason_names(reasons),
        flops=opts.flops, bytes=opts.bytes, peak_name=peak_name if opts.flops is not None else None,
        peak_tflops=peak_tflops, peak_gbps=peak_gbps, tainted_batches=got.tainted,
        graph_nodes=graph_nodes, inner=inner, version=__version__,
        timestamp=datetime.now(timezone.utc).isoformat(timespec="seconds"), **tp, **rank_fields(),
    )


def _warn_if_noisy(result) -> None:
    if result.converged or result.stop_reason == "fixed":
        return
    warnings.warn(
        f"gpuprofile.benchmark({result.name!r}): stopped at {result.stop_reason} after "
        f"{result.iterations} iterations and {result.wall_s:.3g} s with noise "
        f"±{result.rel_noise * 100:.3g} % (CI half-width of the median), above max_noise "
        f"{result.max_noise * 100:.3g} %. Raise max_time, or quiet the machine.",
        RuntimeWarning,
        stacklevel=4,  # the caller of benchmark()
    )


# ---- running -------------------------------------------------------------------------------------


def _where(failed_call: int) -> str:
    if failed_call < 0:
        return "(not in fn)"
    return f"when fn raised at call {failed_call} (counting from 0; call 0 is the first call)"


def _use_gpu(opts: Options) -> bool:
    from .. import _C
    from ..device import device_count

    if opts.clock == "host":
        if opts.stream is not None or opts.mode == "graph":
            raise ValueError("clock='host' times host calls: stream= and mode='graph' need clock='gpu'")
        return False
    if device_count() > 0:
        return True
    if opts.clock in ("cupti", "gpu") or opts.stream is not None or opts.mode == "graph":
        reason = _C._cuda_status()["reason"] or "no device"
        raise _C.NoDeviceError(f"gpuprofile.benchmark: the GPU clock needs a CUDA device ({reason}); "
                               "clock='host' times host callables")
    return False


def run(fn, args: tuple, kwargs: dict, opts: Options, setup=None):
    """benchmark() after validation; `setup` (pytest plugin's pedantic mode) runs untimed before
    each iteration."""
    if not callable(fn):
        raise TypeError(f"gpuprofile.benchmark: fn must be callable, got {type(fn).__name__}")
    if setup is not None and not callable(setup):
        raise TypeError(f"setup must be callable, got {type(setup).__name__}")
    if setup is not None and opts.mode != "cold":
        raise ValueError(f"setup runs between timed iterations: it needs mode='cold', not {opts.mode!r}")
    name = opts.name or _fn_name(fn)
    measure = measurer(opts)
    results = [measure(fn, args, kwargs, opts, setup, name)]
    opts = dataclasses.replace(opts, inner=results[0].inner)  # every round's samples alike
    results += [measure(fn, args, kwargs, opts, setup, name) for _ in range(opts.rounds - 1)]
    result = results[0] if opts.rounds == 1 else merge_rounds(results)
    _warn_if_noisy(result)
    return result


def measurer(opts: Options):
    """The function that takes one whole measurement (first call, warm-up, timing) under `opts`:
    measure(fn, args, kwargs, opts, setup, name) -> BenchmarkResult. Used by run() and by A/B
    rounds (bench/ab.py)."""
    return _run_gpu if _use_gpu(opts) else _run_host


def _per_sample(opts: Options, inner: int) -> Options:
    """Options counted in samples of `inner` calls: max_iters stays a number of calls."""
    if inner == 1:
        return opts
    max_samples = max(1, opts.max_iters // inner)
    return dataclasses.replace(opts, max_iters=max_samples, min_iters=min(opts.min_iters, max_samples))


def _run_host(fn, args, kwargs, opts, setup, name):
    source = HostSource(fn, args, kwargs, setup)
    phase = "the first call"
    try:
        t0 = time.perf_counter()
        source.run(1)
        first_call_s = time.perf_counter() - t0
        phase = "the warm-up"
        warmup_s, per_call = warm_up(source, opts.warmup, first_call_s, opts.warmup_iters)
        if opts.inner is not None:
            source.inner = opts.inner
        elif setup is None and not opts.fixed and 0 < per_call < _HOST_MIN_SAMPLE_S:
            room = max(1, opts.max_iters // opts.min_iters)  # keep min_iters samples possible
            source.inner = min(1000, math.ceil(_HOST_MIN_SAMPLE_S / per_call), room)
        phase = "the measurement"
        got = collect(source, _per_sample(opts, source.inner), per_call * source.inner)
    except Exception as e:
        _add_note(e, f"gpuprofile.benchmark: failed during {phase} {_where(source.failed_call)}; the "
                     "partial result was discarded")
        raise
    return _build_result(opts, got, clock="host", inner=source.inner, gated=False, flush_bytes=0,
                         warmup_s=warmup_s, first_call_ms=first_call_s * 1e3, info=None, clocks=None,
                         graph_nodes=None, name=name)


def _cupti_source(source, opts: Options):
    """(source, timer, note): `source` timed by CUPTI records where opts.clock allows and CUPTI
    can be used; otherwise the event-timed source and a note saying why."""
    from . import cupti as _bench_cupti

    if opts.clock not in ("auto", "cupti"):
        return source, None, None
    timer, note = _bench_cupti.open_timer(opts.clock)
    if timer is None:
        return source, None, note
    try:
        why = timer.learn(source)
    except BaseException:  # fn raised, or Ctrl-C: _run_gpu never saw the timer to close it
        timer.close()
        raise
    if why is None:
        note = None
        if timer.other_streams:
            if opts.mode == "graph":  # the graph replays on `stream`: its nodes cannot be elsewhere
                timer.close()
                raise _bench_cupti.TimingRefused(
                    f"mode='graph': fn's work ran on other streams ({timer.other_streams}) than "
                    "the captured graph's `stream`")
            source.synchronize_each()
            note = _bench_cupti.other_streams_note(timer.other_streams)
        return _bench_cupti.CuptiSource(source, timer), timer, note
    timer.close()
    if opts.clock == "cupti":
        raise ValueError(f"clock='cupti' cannot time fn: {why}; use clock='gpu' (CUDA events)")
    return source, None, f"CUPTI timing not used ({why}); CUDA events used"


def _run_gpu(fn, args, kwargs, opts, setup, name):
    from .. import _C

    runner = _C.BenchRunner(fn, args, kwargs or None, opts.mode, opts.stream, opts.flush_l2, setup)
    phase, timer = "the first call", None
    try:
        first_call_s = runner.first_call() / 1e9
        nodes = None
        if opts.mode == "graph":
            phase = "graph capture"
            nodes = runner.capture()
        phase = "setting up CUPTI timing"
        source, timer, clock_note = _cupti_source(GpuSource(runner, opts.mode), opts)
        phase = "the warm-up"
        warmup_s, per_iter = warm_up(source, opts.warmup, first_call_s, opts.warmup_iters)
        if timer is not None:
            source.event_samples.clear()
        start = _C._bench_sm_clock(runner.device, opts.stream)
        phase = "the measurement"
        got = collect(source, opts, per_iter)
        end = _C._bench_sm_clock(runner.device, opts.stream)
    except Exception as e:
        _add_note(e, f"gpuprofile.benchmark: failed during {phase} {_where(runner.failed_call)}; the "
                     "gate was released, the stream drained and the partial result discarded")
        if phase == "graph capture":
            _add_note(e, "graph mode: fn must launch all its GPU work on `stream` without "
                         "synchronizing; torch: run it under `with torch.cuda.stream(s):`")
        raise
    finally:
        runner.close()
        if timer is not None:
            timer.close()
    got.tainted = source.tainted  # gate timeouts in the warm-up too: the result reports them all
    event_median = None
    if timer is not None and source.event_samples:
        import numpy as np

        event_median = float(np.median(np.concatenate(source.event_samples)))
    return _build_result(opts, got, clock="cupti" if timer is not None else "gpu", inner=1,
                         gated=source.gated, flush_bytes=runner.flush_bytes, warmup_s=warmup_s,
                         first_call_ms=first_call_s * 1e3, info=_device_info(runner.device),
                         clocks=(start, end), graph_nodes=nodes, name=name, clock_note=clock_note,
                         event_median_ms=event_median)


def _named(fns) -> dict:
    """{name: callable} of A/B's callables: a dict's keys, or a list's callables' own names."""
    if isinstance(fns, dict):
        named = {str(k): v for k, v in fns.items()}
    else:
        named = {}
        for k, fn in enumerate(fns):
            name = _fn_name(fn)
            named[name if name not in named else f"{name}#{k + 1}"] = fn
    if len(named) < 2:
        raise ValueError(f"A/B needs two or more callables, got {len(named)}")
    for name, fn in named.items():
        if not callable(fn):
            raise TypeError(f"gpuprofile.benchmark: {name!r} must be callable, got {type(fn).__name__}")
    return named


def run_ab(fns, args: tuple, kwargs: dict, options: dict, threshold=None):
    """benchmark() of a dict or list of callables (bench/ab.py): each one measured once per
    round, a whole measurement each time, the rounds interleaved with the order rotated."""
    from . import ab, gate

    named = _named(fns)
    if threshold is not None:
        threshold = gate.threshold_pct(threshold)  # a bad one refused before anything runs
    given = options
    options = {**ab.AB_DEFAULTS, **options}
    if "min_time" not in given:  # a shorter max_time given alone shortens the whole round
        options["min_time"] = min(options["min_time"], options["max_time"])
    rounds, prefix = options.pop("rounds"), options.pop("name", None)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 2:
        raise ValueError(f"A/B rounds must be an int >= 2 (10 by default), got {rounds!r}")
    opts = make_options(**options)
    measure = measurer(opts)
    fixed: dict = {}  # host clock: each callable's samples group as many calls in every round

    def one(name):
        mine = fixed.get(name, opts)
        label = f"{prefix}[{name}]" if prefix else name
        r = measure(named[name], args, kwargs, dataclasses.replace(mine, name=label), None, label)
        fixed[name] = dataclasses.replace(mine, inner=r.inner)
        return r

    per_round = ab.interleave({name: functools.partial(one, name) for name in named}, rounds)
    return ab.result(per_round, threshold)


def benchmark(fn, *args, **kwargs) -> BenchmarkResult:
    """Time `fn(*args, **kwargs)` on the GPU and return a BenchmarkResult with its uncertainty.

    The first call runs on its own (JIT, lazy loading, allocator growth), then calls are repeated
    for `warmup` seconds, then timed until the 95 % confidence interval of the median is within
    ±max_noise of it (after at least `min_time` seconds and `min_iters` iterations), or until
    `max_time` / `max_iters` with a RuntimeWarning stating the noise reached.

    mode: 'cold' (default) flushes L2 before every iteration, outside the timed interval, and
    times each iteration with its own pair of events; 'hot' runs iterations back to back with
    warm caches; 'graph' captures fn once into a CUDA graph on `stream` and times replays (L2
    flushed between replays unless flush_l2=False). Iterations are enqueued in batches behind a
    gate kernel, so host launch latency does not inflate short kernels; nothing syncs per
    iteration.

    stream: where fn enqueues its work (None: the legacy default stream, also torch's default);
    events are recorded there. Anything with __cuda_stream__ or .cuda_stream, or an int handle.
    flops, bytes: work per call, for TFLOP/s, GB/s, % of peak and a memory/compute-bound verdict.
    peak: which compute peak the % refers to: 'fp16_tensor' (default where known), 'fp32', or a
    number of TFLOP/s. clock: 'auto' (with a device: CUPTI records where CUPTI is usable, else CUDA
    events; without one: the host clock), 'cupti' (each iteration's time from the first start to
    the last end of the kernels, copies and sets fn enqueued, as CUPTI recorded them: no event
    overhead), 'gpu' (a pair of CUDA events around each iteration; they add the GPU's launch
    processing, about 2.7 µs on an H200), or 'host' for CPU code. result.clock says which was
    used, result.clock_note why CUPTI was not, result.event_median_ms what events measured.
    rounds: repeat the whole measurement (first call, warm-up, timing) this many times; the result
    pools the samples and its interval also spans every round's median, so it covers the spread
    between runs, not only the noise within one (what a CI gate needs: docs/benchmark.md).
    Times (warmup, min_time, max_time) are seconds. Every other keyword goes to fn.

    A/B in one run: give a dict {name: callable} (the first is the reference) or a list of
    callables instead of fn, and each is measured once per round in `rounds` (default 10)
    interleaved rounds with the order rotated, all with the same args; returns an ABResult
    (bench/ab.py): each side's own result, the median of the paired per-round ratios with its
    95 % interval, and one verdict (slower / faster / same within `threshold` percent, default
    5 on the host clock, 2 on the device clocks, or inconclusive). Rounds default to 0.05 ..
    0.5 s each there.
    """
    if isinstance(fn, (dict, list, tuple)):
        threshold = kwargs.pop("threshold", None)
        options, fn_kwargs = split_options(kwargs)
        return run_ab(fn, args, fn_kwargs, options, threshold)
    options, fn_kwargs = split_options(kwargs)
    return run(fn, args, fn_kwargs, make_options(**options))


benchmark.__signature__ = SIGNATURE  # type: ignore[attr-defined]  # the options: options.py
