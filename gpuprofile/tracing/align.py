"""Clock alignment of per-rank traces (gpuprofile merge), as pure functions.

Each rank's trace is on its own CUPTI clock, with time zero at `time_zero_cupti_ns`. Two steps
put the ranks on one time line:

1. **Wall clock.** Each trace's otherData holds a pair (cupti_ns, wall_ns) read together, with
   its uncertainty. A trace time t (ns from the trace's zero) is at wall time
   zero + t - cupti_ns + wall_ns. On one host that is as good as the pairs (microseconds); across
   hosts it is as good as NTP/PTP keeps the hosts' wall clocks, which the pairs cannot tell.
2. **Collectives** (when the ranks ran NCCL collectives): every rank leaves a collective at
   nearly the same moment, because none can finish before the last one's data arrived. The
   median, over matched collectives, of each rank's end time minus the median end of all ranks
   is that rank's remaining clock error; it is subtracted. The spread of the corrected end times
   (largest minus smallest, per collective) is the measured alignment error.
"""

from __future__ import annotations

import numpy as np


def wall_shifts(zeros, pairs) -> tuple:
    """Per rank, the ns to add to trace times (ns from that trace's zero) to put them on a common
    time line starting at the earliest rank's zero; and the bound on the error between any two
    ranks (the two largest pair uncertainties added). `zeros`: time_zero_cupti_ns per rank;
    `pairs`: {'cupti_ns', 'wall_ns', 'uncertainty_ns'} per rank."""
    walls = [int(z) - int(p["cupti_ns"]) + int(p["wall_ns"]) for z, p in zip(zeros, pairs, strict=True)]
    origin = min(walls)
    uncertainties = sorted((int(p.get("uncertainty_ns", 0)) for p in pairs), reverse=True)
    bound = sum(uncertainties[:2]) if len(uncertainties) > 1 else 0
    return [w - origin for w in walls], bound


def collective_corrections(ends) -> tuple:
    """`ends`: (ranks x collectives) end times of matched collectives on the wall-aligned time
    line. Returns (correction per rank, ns to add; the median spread; the largest spread) where
    a spread is one collective's largest minus smallest corrected end. With no collective the
    corrections are 0 and the spreads None."""
    e = np.asarray(ends, dtype=np.int64)
    if e.ndim != 2 or e.shape[1] == 0:
        ranks = e.shape[0] if e.ndim == 2 else 0
        return [0] * ranks, None, None
    deviation = e - np.median(e, axis=0)
    correction = -np.rint(np.median(deviation, axis=1)).astype(np.int64)
    corrected = e + correction[:, None]
    spread = corrected.max(axis=0) - corrected.min(axis=0)
    return [int(c) for c in correction], int(np.median(spread)), int(spread.max())
