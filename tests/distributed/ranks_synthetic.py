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
    per_step = [[(0, 0, compute_end, 7), (1, ar_start, (ar_end or [50_000])[0], 13)]
                for compute_end, ar_start, *ar_end in steps]
    return kernels_profile(rank, per_step, cupti_base, wall_error, pair_uncertainty)


def kernels_profile(rank: int, per_step, cupti_base: int, wall_error: int = 0,
                    pair_uncertainty=100):
    """A stopped Profile of one rank whose step s runs the kernels per_step[s]: (name id: 0
    compute, 1 NCCL AllReduce; start, end in ns after the step's start; stream). A step starts
    at s * STEP + 1000 (true time); compute kernels belong to the step region, NCCL kernels to
    a collective() region inside it."""
    n = sum(len(ks) for ks in per_step)
    k = np.zeros(n, KERNEL_RAW)
    spec, regions, j = [], [], 0
    for s, ks in enumerate(per_step):
        base = cupti_base + s * STEP + 1000
        host = base - HOST_OFFSET
        step_record = len(spec)
        spec.append(("step", -1, host - 500, host + 45_000, False))
        for name_id, start, end, stream in ks:
            k[j]["start"], k[j]["end"] = base + start, base + end
            k[j]["name_id"], k[j]["stream"] = name_id, stream
            if name_id == 1:
                regions.append(len(spec))
                spec.append((f"collective AllReduce {NBYTES} B", step_record, host + 20_000,
                             host + 21_000, False))
            else:
                regions.append(step_record)
            j += 1
    k["correlation_id"] = np.arange(1, n + 1)
    k["device"] = rank
    k["block_x"] = k["block_y"] = k["block_z"] = 1
    _, ext = S.kernels(n, regions=regions)
    w = S.window(k, ext, names=NAMES)
    pair = {"cupti_ns": cupti_base + 10_000, "wall_ns": WALL0 + 10_000 + wall_error,
            "uncertainty_ns": pair_uncertainty}
    w = Window(t0=cupti_base, t1=cupti_base + len(per_step) * STEP + 10_000, offset_ns=HOST_OFFSET,
               offset_uncertainty_ns=20, chunk=w.chunk, clock_pair=pair)
    return Profile._from_window(w, S.region_records(spec), S.LIMITS)


def export_ranks(tmp_path, monkeypatch, per_rank, bases, errors, name="trace.json.gz",
                 make=rank_profile):
    """Export each rank's profile as that rank (RANK/WORLD_SIZE set as torchrun sets them), as
    a Chrome trace, or as Parquet when `name` ends in .parquet; returns the paths written."""
    paths = []
    world = len(per_rank)
    for r, steps in enumerate(per_rank):
        monkeypatch.setenv("RANK", str(r))
        monkeypatch.setenv("WORLD_SIZE", str(world))
        monkeypatch.setenv("LOCAL_RANK", str(r))
        p = make(r, steps, bases[r], errors[r])
        export = p.export_parquet if str(name).endswith(".parquet") else p.export_chrome_trace
        paths.append(export(tmp_path / name))
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var)
    return paths
