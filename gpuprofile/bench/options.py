"""gpuprofile.benchmark's options, defined once: their defaults, their checks and the Options
the measurement reads. benchmark(), do_bench(), the pytest plugin, the IPython magic and
`gpuprofile bench` all build their Options here (make_options)."""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any

MODES = ("cold", "hot", "graph")
CLOCKS = ("auto", "cupti", "gpu", "host")
PEAKS = ("fp32", "fp16_tensor")

# The options a user passes, with their defaults, in benchmark()'s order.
DEFAULTS: dict = dict(warmup=0.1, min_time=0.2, max_time=5.0, max_noise=0.005, min_iters=10,
                      max_iters=1_000_000, flush_l2=None, mode="cold", stream=None, flops=None,
                      bytes=None, name=None, clock="auto", peak=None, rounds=1)
NAMES = frozenset(DEFAULTS)


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


def make_options(*, fixed=False, warmup_iters=None, **given) -> Options:
    """Validated Options from DEFAULTS and the options given; TypeError for an unknown one,
    ValueError/TypeError naming the option for a bad value. `fixed` and `warmup_iters` are the
    pytest plugin's pedantic mode (exactly max_iters samples; a warm-up by count)."""
    unknown = set(given) - NAMES
    if unknown:
        raise TypeError(f"unknown benchmark options {sorted(unknown)}")
    o = {**DEFAULTS, **given}
    warmup, min_time, max_time, max_noise = o["warmup"], o["min_time"], o["max_time"], o["max_noise"]
    min_iters, max_iters, flush_l2, mode = o["min_iters"], o["max_iters"], o["flush_l2"], o["mode"]
    clock, stream, flops, bytes, name = o["clock"], o["stream"], o["flops"], o["bytes"], o["name"]
    peak, rounds = o["peak"], o["rounds"]
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {CLOCKS}, got {clock!r}")
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
    if not (peak is None or peak in PEAKS):
        if isinstance(peak, str):
            raise ValueError(f"peak must be one of {PEAKS}, a number of TFLOP/s or None, got {peak!r}")
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


def split_options(kwargs: dict) -> tuple[dict, dict]:
    """(benchmark options, fn's keyword arguments) from benchmark()'s **kwargs."""
    return ({k: v for k, v in kwargs.items() if k in NAMES},
            {k: v for k, v in kwargs.items() if k not in NAMES})


# benchmark(fn, *args, <options>, **kwargs): its signature, from DEFAULTS.
SIGNATURE = inspect.Signature([
    inspect.Parameter("fn", inspect.Parameter.POSITIONAL_OR_KEYWORD),
    inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
    *(inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=v) for k, v in DEFAULTS.items()),
    inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)], return_annotation="BenchmarkResult")
