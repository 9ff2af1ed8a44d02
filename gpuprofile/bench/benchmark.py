"""gpuprofile.benchmark: time a callable the way a careful kernel engineer would, with the
uncertainty attached.

The C core (csrc/bench/bench.c) enqueues and times batches of iterations. This module validates the
options, runs the first call and the warm-up, sizes the batches, applies the stopping rule and
builds the BenchmarkResult. The loop driver (`collect`) takes any *sample source* with
`run(n) -> Batch`, so the stopping rule is tested with fake sources (tests/bench/test_bench.py).

Why the median: GPU timings are right-skewed with rare large outliers (clock changes, interrupts,
other processes, a late launch). The mean and any interval built from the standard deviation are
dragged by those outliers, so a mean-based rule converges slowly or not at all and reports the
outliers' weight. The median ignores them, and its confidence interval from order statistics
assumes no distribution at all.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import math
import time
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..distributed import rank_fields
from .result import Batch, BenchmarkResult, throughput
from .rounds import merge_rounds

_MODES = ("cold", "hot", "graph")
_CLOCKS = ("auto", "cupti", "gpu", "host")
_PEAKS = ("fp32", "fp16_tensor")

_GATE_TIMED_OUT = 2  # GP_GATE_TIMED_OUT in kernels/harness/bench_kernels.h
# The gate gives up after this long (or 20x the batch's expected enqueue time, if longer). A batch
# is sized to enqueue in well under it, so only a host that blocks reaches it.
_GATE_TIMEOUT_S = 0.1
_GATE_TIMEOUT_MAX_S = 2.0
# Iterations per gated batch. Each cold iteration queues about 3 + (fn's launches) commands behind
# the gate; CUDA's launch queue holds about a thousand before the host blocks.
_MAX_BATCH = {"cold": 64, "graph": 64, "hot": 128}
# Batches last between these, growing with the time spent so far (10 %).
_MIN_BATCH_S, _MAX_BATCH_S = 0.002, 0.05
# Host clock: calls per sample are grouped until a sample lasts at least this long.
_HOST_MIN_SAMPLE_S = 10e-6


@dataclass
class Collected:
    """What collect() returns."""

    samples: Any
    wall_s: float
    host_s: float
    tainted: int
    stop_reason: str  # converged | max_time | max_iters | fixed
    rel_noise: float
    median_ms: float


@dataclass(frozen=True)
class Options:
    warmup: float
    min_time: float
    max_time: float
    max_noise: float
    min_iters: int
    max_iters: int
    flush_l2: bool
    mode: str
    clock: str
    stream: Any
    flops: float | None
    bytes: float | None
    name: str | None
    peak: Any
    fixed: bool = False  # exactly max_iters samples, no stopping rule (pytest plugin's pedantic)
    warmup_iters: int | None = None  # warm up by count instead of by time
    rounds: int = 1  # whole measurements, merged by bench/rounds.py
    inner: int | None = None  # host clock: calls per sample, when fixed (rounds after the first)


def _number(value, option, *, minimum=0.0, strict=False, allow_inf=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{option} must be a number, got {type(value).__name__}")
    if math.isnan(value) or (math.isinf(value) and not allow_inf):
        raise ValueError(f"{option} must be finite, got {value}")
    if value < minimum or (strict and value == minimum):
        raise ValueError(f"{option} must be {'>' if strict else '>='} {minimum}, got {value}")
    return float(value)


def _integer(value, option, minimum):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{option} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{option} must be >= {minimum}, got {value}")
    return value


def make_options(*, warmup, min_time, max_time, max_noise, min_iters, max_iters, flush_l2, mode,
                 clock, stream, flops, bytes, name, peak, fixed=False, warmup_iters=None,
                 rounds=1) -> Options:
    """Validated options; ValueError/TypeError naming the option otherwise."""
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
    if clock not in _CLOCKS:
        raise ValueError(f"clock must be one of {_CLOCKS}, got {clock!r}")
    warmup = _number(warmup, "warmup")
    min_time = _number(min_time, "min_time")
    max_time = _number(max_time, "max_time", strict=True, allow_inf=True)
    if max_time < min_time:
        raise ValueError(f"max_time ({max_time}) must be >= min_time ({min_time})")
    max_noise = _number(max_noise, "max_noise", strict=True)
    min_iters = _integer(min_iters, "min_iters", 1)
    max_iters = _integer(max_iters, "max_iters", 1)
    if max_iters < min_iters:
        raise ValueError(f"max_iters ({max_iters}) must be >= min_iters ({min_iters})")
    if flush_l2 is not None and not isinstance(flush_l2, bool):
        raise TypeError(f"flush_l2 must be True, False or None, got {type(flush_l2).__name__}")
    if mode == "hot" and flush_l2:
        raise ValueError("flush_l2=True contradicts mode='hot' (back-to-back iterations, warm "
                         "caches); use mode='cold' to flush before every iteration")
    flush_l2 = mode != "hot" if flush_l2 is None else flush_l2
    for option, value in (("flops", flops), ("bytes", bytes)):
        if value is not None:
            _number(value, option, strict=True)
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, got {type(name).__name__}")
    if not (peak is None or peak in _PEAKS):
        if isinstance(peak, str):
            raise ValueError(f"peak must be one of {_PEAKS}, a number of TFLOP/s or None, got {peak!r}")
        _number(peak, "peak", strict=True)
    if mode == "graph" and stream is None:
        raise ValueError(
            "mode='graph' needs stream=: a non-default stream that fn launches all its work on "
            "(CUDA cannot capture the legacy default stream). torch: s = torch.cuda.Stream(); "
            "with torch.cuda.stream(s): gpuprofile.benchmark(fn, mode='graph', stream=s). "
            "Raw CUDA: s = gpuprofile.Stream() and launch on s.cuda_stream."
        )
    if warmup_iters is not None:
        warmup_iters = _integer(warmup_iters, "warmup_iters", 0)
    return Options(warmup, min_time, max_time, max_noise, min_iters, max_iters, flush_l2, mode,
                   clock, stream, flops, bytes, name, peak, fixed, warmup_iters,
                   _integer(rounds, "rounds", 1))


# ---- sample sources ------------------------------------------------------------------------------


class GpuSource:
    """Batches from a _C.BenchRunner: gated, with the gate switched off when it keeps timing out
    (fn blocks the host: it synchronizes, or fills the launch queue)."""

    def __init__(self, runner, mode: str):
        self.runner = runner
        self.max_batch = _MAX_BATCH[mode]
        self.gated = True
        self.sync_each = False  # fn's work is on other streams: iterations between device syncs
        self.tainted = 0
        self._host_per_iter = 0.0

    def synchronize_each(self) -> None:
        """From now on, each iteration runs between device synchronizations, ungated."""
        self.sync_each, self.gated = True, False

    def run(self, n: int) -> Batch:
        import numpy as np

        timeout_ns = 0
        if self.gated:
            expected = 20 * n * self._host_per_iter
            timeout_ns = int(min(_GATE_TIMEOUT_MAX_S, max(_GATE_TIMEOUT_S, expected)) * 1e9)
        t0 = time.perf_counter()
        raw, host_ns, state = self.runner.batch(n, timeout_ns, self.sync_each)
        wall = time.perf_counter() - t0
        if state != _GATE_TIMED_OUT:
            self._host_per_iter = host_ns / 1e9 / n  # a timed-out batch's host time includes the wait
            return Batch(np.frombuffer(raw, dtype=np.float64), wall, host_ns / 1e9)
        self.tainted += 1
        self.max_batch = max(1, self.max_batch // 4)
        if self.tainted >= 2:
            self.gated = False
        return Batch(np.empty(0), wall, host_ns / 1e9, tainted=True)


class HostSource:
    """Batches timed with the host clock (CLOCK_MONOTONIC) by _C._bench_host_batch."""

    gated = False
    tainted = 0
    max_batch = 65536

    def __init__(self, fn, args, kwargs, setup=None):
        self.fn, self.args, self.kwargs, self.setup = fn, args, kwargs or None, setup
        self.inner = 1
        self.calls = 0
        self.failed_call = -1  # index of the call that raised, as BenchRunner.failed_call

    def run(self, n: int) -> Batch:
        import numpy as np

        from .. import _C

        t0 = time.perf_counter()
        try:
            raw, total_ns = _C._bench_host_batch(self.fn, self.args, self.kwargs, n, self.inner, self.setup)
        except BaseException as e:
            index = e.__dict__.pop("_gpuprofile_call_in_batch", None)  # set by the C loop when fn raised
            if index is not None:
                self.failed_call = self.calls + index
            raise
        finally:
            wall = time.perf_counter() - t0
        self.calls += n * self.inner
        return Batch(np.frombuffer(raw, dtype=np.float64), wall, total_ns / 1e9)


# ---- the loop driver -----------------------------------------------------------------------------


class _Paused:
    """Garbage collection off for one batch (as timeit does): a collection inside fn would land in
    the host time and, with no gate, in a sample."""

    def __enter__(self):
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        if self.was_enabled:
            gc.enable()


def next_batch(per_iter_s: float, elapsed_s: float, have: int, *, cap: int, max_iters: int,
               max_time: float) -> int:
    """Iterations for the next batch: about 10 % of the time spent so far (2..50 ms), within the
    source's cap, the iterations left and the time left."""
    target = min(_MAX_BATCH_S, max(_MIN_BATCH_S, 0.1 * elapsed_s))
    k = int(target / per_iter_s) if per_iter_s > 0 else cap
    k = min(k, cap, max_iters - have)
    if math.isfinite(max_time) and per_iter_s > 0:
        k = min(k, int((max_time - elapsed_s) / per_iter_s) + 1)
    return max(1, k)


def warm_up(source, seconds: float, per_call_s: float, iters: int | None = None) -> tuple[float, float]:
    """Runs batches (samples discarded) for `seconds` and until one was not tainted (so the gate's
    fate is settled before measuring), or for exactly `iters` iterations when given; returns
    (wall s, s per iteration)."""
    elapsed, k, per_iter = 0.0, 1, per_call_s
    if iters is not None:
        while iters > 0:
            k = min(iters, source.max_batch)
            with _Paused():
                b = source.run(k)
            elapsed, per_iter, iters = elapsed + b.wall_s, b.wall_s / k, iters - k
        return elapsed, per_iter
    while True:
        with _Paused():
            b = source.run(k)
        elapsed += b.wall_s
        per_iter = b.wall_s / k
        if elapsed >= seconds and not b.tainted:  # end on a batch that ran as measured ones will
            return elapsed, per_iter
        left = int((seconds - elapsed) / per_iter) + 1 if per_iter > 0 else source.max_batch
        k = max(1, min(source.max_batch, 2 * k, left))


def collect(source, opts: Options, per_iter_s: float) -> Collected:
    """The stopping rule. Runs batches until, after min_time and min_iters, the relative half-width
    of the 95 % CI of the median is <= max_noise; or until max_time or max_iters (a warning says
    the noise reached). With opts.fixed, exactly max_iters samples. Tainted batches (the gate timed
    out) are discarded."""
    import numpy as np

    from .._stats import rel_noise

    chunks, have, wall, host, tainted = [], 0, 0.0, 0.0, 0
    next_check, noise, reason = 0, math.inf, ""
    k = next_batch(per_iter_s, 0.0, 0, cap=source.max_batch, max_iters=opts.max_iters,
                   max_time=opts.max_time)
    while True:
        with _Paused():
            b = source.run(k)
        wall += b.wall_s
        if b.tainted:
            tainted += 1
        else:
            chunks.append(b.samples)
            have += len(b.samples)
            host += b.host_s
            per_iter_s = b.wall_s / max(1, len(b.samples))
        if have >= opts.max_iters:
            reason = "fixed" if opts.fixed else "max_iters"
            break
        if not opts.fixed and wall >= opts.min_time and have >= opts.min_iters and have >= next_check:
            chunks = [np.concatenate(chunks)]
            noise = rel_noise(chunks[0])
            next_check = have + max(1, have // 10)  # geometric: total check cost O(n)
            if noise <= opts.max_noise:
                reason = "converged"
                break
        if not opts.fixed and wall >= opts.max_time:
            reason = "max_time"
            break
        k = next_batch(per_iter_s, wall, have, cap=source.max_batch, max_iters=opts.max_iters,
                       max_time=math.inf if opts.fixed else opts.max_time)
    samples = np.concatenate(chunks) if chunks else np.empty(0)
    noise = rel_noise(samples)
    median = float(np.median(samples)) if samples.size else math.nan
    return Collected(samples, wall, host, tainted, reason, noise, median)


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


def _add_note(exc: BaseException, note: str) -> None:
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:  # Python 3.10: kept where 3.11's traceback would show it
        exc.__notes__ = [*getattr(exc, "__notes__", []), note]


def _where(failed_call: int) -> str:
    if failed_call < 0:
        return "(not in fn)"
    return f"when fn raised at call {failed_call} (counting from 0; call 0 is the first call)"


def _fn_name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__


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
    measure = _run_gpu if _use_gpu(opts) else _run_host
    results = [measure(fn, args, kwargs, opts, setup, name)]
    opts = dataclasses.replace(opts, inner=results[0].inner)  # every round's samples alike
    results += [measure(fn, args, kwargs, opts, setup, name) for _ in range(opts.rounds - 1)]
    result = results[0] if opts.rounds == 1 else merge_rounds(results)
    _warn_if_noisy(result)
    return result


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


def benchmark(fn, *args, warmup=0.1, min_time=0.2, max_time=5.0, max_noise=0.005, min_iters=10,
              max_iters=1_000_000, flush_l2=None, mode="cold", stream=None, flops=None, bytes=None,
              name=None, clock="auto", peak=None, rounds=1, **kwargs) -> BenchmarkResult:
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
    """
    opts = make_options(warmup=warmup, min_time=min_time, max_time=max_time, max_noise=max_noise,
                        min_iters=min_iters, max_iters=max_iters, flush_l2=flush_l2, mode=mode,
                        clock=clock, stream=stream, flops=flops, bytes=bytes, name=name, peak=peak,
                        rounds=rounds)
    return run(fn, args, kwargs, opts)
