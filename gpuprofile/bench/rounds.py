"""benchmark(rounds=N): N whole measurements merged into one BenchmarkResult.

One run's interval of the median covers the noise within that run only. What moves between runs
(clock and power state, other load, where the allocator put the buffers) shifts a run's median
as a whole, and two runs of unchanged code then differ by more than either interval allows: a
gate comparing them cries wolf. Repeating the measurement exposes that spread, and the merged
interval spans it: it is the hull of the pooled samples' interval and every round's median.

Why the hull of the round medians: for a gate comparing two files of R rounds each to call the
second slower, all R of its round medians must exceed all R of the first's. If the 2R runs are
exchangeable (unchanged code, same machine), that happens with probability 1 / C(2R, R): 5 % for
R = 3, 0.4 % for R = 5, whatever the distribution. (Runs on different machines or days are not
exchangeable with each other; rounds cannot see what did not vary while they ran.)
"""

from __future__ import annotations

import dataclasses

from .. import _stats
from .result import throughput


def merge_rounds(results: list):
    """One BenchmarkResult from the BenchmarkResults of several rounds of the same measurement:
    samples pooled, statistics recomputed, the interval widened to span the rounds' medians,
    counts and times summed, converged only if every round converged."""
    import numpy as np

    first, last = results[0], results[-1]
    samples = np.concatenate([r.samples for r in results])
    s = _stats.summary(samples)
    medians = [float(r.median_ms) for r in results]
    # each round's resolution_ms is its own widening (>= the clock's step, more where its samples
    # were sparse): the smallest is the closest to the clock's; resolve() adds the pooled gaps
    resolution = min((r.resolution_ms or 0.0) for r in results)
    low, high, step = _stats.resolve(samples, *_stats.median_ci(samples), resolution)
    if low == low and high == high:  # not NaN: the hull of that interval and the round medians
        low, high = min(low, *medians), max(high, *medians)
    iterations = sum(r.iterations for r in results)
    not_converged = [r for r in results if not r.converged]
    reasons = list(dict.fromkeys(x for r in results for x in r.throttle_reasons))
    clocks = list(dict.fromkeys(r.clock for r in results))
    notes = [r.clock_note for r in results if r.clock_note]
    if len(clocks) > 1:
        notes.insert(0, f"rounds were timed by different clocks ({', '.join(clocks)})")
    events = [r.event_median_ms for r in results if r.event_median_ms is not None]
    return dataclasses.replace(
        first, samples=samples, median_ms=s["median"], mean_ms=s["mean"], stdev_ms=s["stdev"],
        min_ms=s["min"], max_ms=s["max"], p10_ms=s["p10"], p90_ms=s["p90"], iqr_ms=s["iqr"],
        ci_low_ms=low, ci_high_ms=high, rel_noise=_stats.rel_half_width(low, high, s["median"]),
        resolution_ms=step, rounds=len(results), round_medians_ms=medians, iterations=iterations,
        host_ms_per_iter=sum(r.host_ms_per_iter * r.iterations for r in results) / iterations,
        wall_s=sum(r.wall_s for r in results), warmup_s=sum(r.warmup_s for r in results),
        converged=not not_converged,
        stop_reason=not_converged[0].stop_reason if not_converged else first.stop_reason,
        sm_clock_mhz_end=last.sm_clock_mhz_end, throttle_reasons=reasons,
        tainted_batches=sum(r.tainted_batches for r in results),
        clock_note="; ".join(notes) if notes else None,
        event_median_ms=float(np.median(events)) if len(events) == len(results) else None,
        **throughput(s["median"], first.flops, first.bytes, first.peak_tflops, first.peak_gbps),
    )
