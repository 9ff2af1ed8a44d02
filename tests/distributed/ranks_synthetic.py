"""Synthetic per-rank profiles for the merge tests: kernels and regions placed on a true time
line, each rank's CUPTI clock offset from it, and each rank's wall clock wrong by a known amount
(two hosts whose NTP disagree), exported with the project's own Chrome-trace writer."""

from __future__ import annotations

import numpy as np
import synthetic as S

from gpuprofile.tracing.activity import KERNEL_RAW, Window
from gpuprofile.tracing.profile import Profile

NAMES = ["gemm_kernel(float*)",
         "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"]
NBYTES = 4 << 20
WALL0 = 1_790_000_000_000_000_000  # the wall clock at true time 0
HOST_OFFSET = 500_000_000  # CUPTI minus host clock in every rank
STEP = 100_000  # steps start every 100 us (true time)


def rank_profile(rank: int, steps, cupti_base: int, wall_error: int, pair_uncertainty=100):
    """A stopped Profile of one rank. `steps`: per step (compute_end, allreduce_start[,
    allreduce_end = 50_000]), in ns after the step's start, which is k * STEP + 1000 on every
    rank. Its CUPTI clock reads true + cupti_base; its wall clock is off by
    `wall_error` ns."""
    n = len(steps)
    k = np.zeros(2 * n, KERNEL_RAW)
    spec = []
    for s, (compute_end, ar_start, *ar_end) in enumerate(steps):
        base = cupti_base + s * STEP + 1000
        k[2 * s]["start"], k[2 * s]["end"] = base, base + compute_end
        k[2 * s + 1]["start"], k[2 * s + 1]["end"] = base + ar_start, base + (ar_end or [50_000])[0]
        host = base - HOST_OFFSET
        spec += [("step", -1, host - 500, host + 45_000, False),
                 (f"collective AllReduce {NBYTES} B", 2 * s, host + 20_000, host + 21_000, False)]
    k["name_id"] = np.tile([0, 1], n)
    k["correlation_id"] = np.arange(1, 2 * n + 1)
    k["device"] = rank
    k["stream"] = np.tile([7, 13], n)
    k["block_x"] = k["block_y"] = k["block_z"] = 1
    regions = np.ravel([[2 * s, 2 * s + 1] for s in range(n)])  # compute in step, nccl in region
    _, ext = S.kernels(2 * n, regions=regions)
    w = S.window(k, ext, names=NAMES)
    pair = {"cupti_ns": cupti_base + 10_000, "wall_ns": WALL0 + 10_000 + wall_error,
            "uncertainty_ns": pair_uncertainty}
    w = Window(t0=cupti_base, t1=cupti_base + n * STEP + 10_000, offset_ns=HOST_OFFSET,
               offset_uncertainty_ns=20, chunk=w.chunk, clock_pair=pair)
    return Profile._from_window(w, S.region_records(spec), S.LIMITS)


def export_ranks(tmp_path, monkeypatch, per_rank, bases, errors, name="trace.json.gz"):
    """Export each rank's profile as that rank (RANK/WORLD_SIZE set as torchrun sets them);
    returns the paths written."""
    paths = []
    world = len(per_rank)
    for r, steps in enumerate(per_rank):
        monkeypatch.setenv("RANK", str(r))
        monkeypatch.setenv("WORLD_SIZE", str(world))
        monkeypatch.setenv("LOCAL_RANK", str(r))
        paths.append(rank_profile(r, steps, bases[r], errors[r]).export_chrome_trace(tmp_path / name))
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var)
    return paths
