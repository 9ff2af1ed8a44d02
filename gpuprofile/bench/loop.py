"""gpuprofile.benchmark's loop: the warm-up, the batch sizes and the stopping rule, over any
sample source (bench/sources.py), so the rule is tested with fake sources (tests/bench/test_bench.py).

Why the median: GPU timings are right-skewed with rare large outliers (clock changes, interrupts,
other processes, a late launch). The mean and any interval built from the standard deviation are
dragged by those outliers, so a mean-based rule converges slowly or not at all and reports the
outliers' weight. The median ignores them, and its confidence interval from order statistics
assumes no distribution at all.
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass
from typing import Any

from .options import Options

# Batches last between these, growing with the time spent so far (10 %).
MIN_BATCH_S, MAX_BATCH_S = 0.002, 0.05


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
    target = min(MAX_BATCH_S, max(MIN_BATCH_S, 0.1 * elapsed_s))
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
