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


# ---- at scale: many ranks of many kernels, a slow rank planted in every step ----------------

KERNEL_NS, GAP_NS, TRANSFER_NS = 4_000, 1_000, 30_000


def planted(step: int, world: int) -> tuple:
    """The rank that holds the others back in `step`, why ('compute' on even steps, 'late
    launch' on odd ones) and by how many ns: the answer the merge must find."""
    return (step * 7 + 3) % world, ("compute" if step % 2 == 0 else "late launch"), 20_000 + 1_000 * (step % 7)


def scale_profile(rank: int, world: int, steps: int, per_step: int, seed: int = 0):
    """A stopped Profile of one rank of a `world`-rank job: `steps` steps of `per_step` compute
    kernels back to back, then an AllReduce that ends TRANSFER_NS after the last rank joined.
    The planted() rank of a step either runs its compute kernels slower ('compute') or launches
    its AllReduce late ('late launch'). Each rank's CUPTI clock and wall-clock error differ."""
    rng = np.random.default_rng(seed * 1_000_003 + rank)
    cupti_base = 1_000_000_000 * (rank + 1) + int(rng.integers(0, 1_000_000))
    wall_error = int(rng.integers(-50_000, 50_000))
    s = np.arange(steps, dtype=np.int64)
    who, why, late = zip(*(planted(int(k), world) for k in s), strict=True)
    mine = np.array(who) == rank
    slow = mine & (np.array(why) == "compute")
    launch = mine & (np.array(why) == "late launch")
    late = np.array(late, np.int64)
    length = np.where(slow, KERNEL_NS + late // per_step + 1, KERNEL_NS)  # per compute kernel
    normal_end = per_step * (KERNEL_NS + GAP_NS)
    compute_end = per_step * (length + GAP_NS)
    ar_start = compute_end + GAP_NS + np.where(launch, late, 0)
    joined = normal_end + GAP_NS + late  # the planted rank's start, on every rank
    period = normal_end + 3 * late.max() + TRANSFER_NS + 10_000
    step0 = cupti_base + 1000 + s * period
    j = np.arange(per_step, dtype=np.int64)
    k = np.zeros(steps * (per_step + 1), KERNEL_RAW)
    comp = (step0[:, None] + j[None, :] * (length[:, None] + GAP_NS))
    start = np.concatenate([comp, (step0 + ar_start)[:, None]], axis=1).reshape(-1)
    end = np.concatenate([comp + length[:, None], (step0 + joined + TRANSFER_NS)[:, None]],
                         axis=1).reshape(-1)
    k["start"], k["end"] = start, end
    k["name_id"] = np.tile(np.r_[np.arange(per_step) % 8 + 2, 1], steps)
    k["stream"] = np.tile(np.r_[np.full(per_step, 7), 13], steps)
    k["correlation_id"] = np.arange(1, k.size + 1)
    k["device"] = rank % 8
    k["block_x"] = 256
    k["block_y"] = k["block_z"] = k["grid_y"] = k["grid_z"] = 1
    k["grid_x"] = 1024
    regions = np.tile(np.r_[np.zeros(per_step, np.int64), 1], steps) + np.repeat(2 * s, per_step + 1)
    _, ext = S.kernels(k.size, regions=regions)
    host = step0 - HOST_OFFSET
    spec = []
    for h, a in zip(host.tolist(), ar_start.tolist(), strict=True):
        spec += [("step", -1, h - 500, h + a + 2000, False),
                 (f"collective AllReduce {NBYTES} B", len(spec), h + a - 1000, h + a + 1000, False)]
    names = NAMES + [f"compute_kernel_{i}(float*, int)" for i in range(8)]
    w = S.window(k, ext, names=names)
    pair = {"cupti_ns": cupti_base + 10_000, "wall_ns": WALL0 + 10_000 + wall_error,
            "uncertainty_ns": 100}
    w = Window(t0=cupti_base, t1=int(end.max()) + 10_000, offset_ns=HOST_OFFSET,
               offset_uncertainty_ns=20, chunk=w.chunk, clock_pair=pair)
    limits = {d: S.LIMITS[0] for d in range(8)}
    return Profile._from_window(w, S.region_records(spec), limits)


def _clock(rank: int, seed: int = 0) -> tuple:
    """(cupti_base, wall_error) of a scale_profile rank: the draws it makes first."""
    rng = np.random.default_rng(seed * 1_000_003 + rank)
    return 1_000_000_000 * (rank + 1) + int(rng.integers(0, 1_000_000)), int(rng.integers(-50_000, 50_000))


def scale_table(template, template_rank: int, rank: int, world: int, steps: int, per_step: int):
    """The Arrow table that scale_profile(rank, ...) exports as Parquet, derived from the one of
    `template_rank`, a rank planted in no step, in a fraction of the time (no Profile, no
    string columns built again): every time moves by the difference of the two ranks' CUPTI
    clocks, and the steps where `rank` is planted get its slower kernels or its late launch.
    tests/distributed/test_engines.py holds it equal to the slow path."""
    import json

    import pyarrow as pa

    from gpuprofile.tracing.columns import META_KEY

    base_t, _ = _clock(template_rank)
    base, wall_error = _clock(rank)
    start = template.column("start_ns").to_numpy() + (base - base_t)
    end = template.column("end_ns").to_numpy() + (base - base_t)
    kind = template.column("kind").to_numpy(zero_copy_only=False)
    record = template.column("record").to_numpy()
    lates = [planted(k, world)[2] for k in range(steps)]
    period = per_step * (KERNEL_NS + GAP_NS) + 3 * max(lates) + TRANSFER_NS + 10_000
    for k in range(steps):
        who, why, late = planted(k, world)
        if who != rank:
            continue
        step0 = base + 1000 + k * period
        length = KERNEL_NS + late // per_step + 1 if why == "compute" else KERNEL_NS
        a = per_step * (length + GAP_NS) + GAP_NS + (late if why == "late launch" else 0)
        first = k * (per_step + 1)
        j = np.arange(per_step, dtype=np.int64)
        start[first:first + per_step] = step0 + j * (length + GAP_NS)
        end[first:first + per_step] = start[first:first + per_step] + length
        start[first + per_step] = step0 + a
        patches = (((kind == "region") & (record == 2 * k), None, step0 + a + 2000),
                   ((kind == "region") & (record == 2 * k + 1), step0 + a - 1000, step0 + a + 1000),
                   ((kind == "region (GPU)") & (record == 2 * k + 1), step0 + a, None))
        for rows, lo, hi in patches:
            if lo is not None:
                start[rows] = lo
            if hi is not None:
                end[rows] = hi
    device = template.column("device").to_numpy().copy()
    device[(kind != "region") & (device >= 0)] = rank % 8
    cols = {"rank": pa.array(np.full(len(start), rank, np.int32)), "start_ns": pa.array(start),
            "end_ns": pa.array(end), "device": pa.array(device)}
    table = pa.Table.from_arrays([cols.get(n, template.column(n)) for n in template.column_names],
                                 names=template.column_names)
    meta = json.loads(template.schema.metadata[META_KEY])
    meta.update(rank=rank, local_rank=rank % 8, time_zero_cupti_ns=meta["time_zero_cupti_ns"] + base - base_t,
                clock_pair={"cupti_ns": base + 10_000, "wall_ns": WALL0 + 10_000 + wall_error,
                            "uncertainty_ns": 100})
    return table.replace_schema_metadata({META_KEY: json.dumps(meta).encode()})
