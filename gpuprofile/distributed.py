"""Rank awareness for multi-process (torch.distributed) jobs: which rank this process is, per-rank
file names, the clock pair that lets `gpuprofile merge` align ranks, and a region that names a
collective and its size. See docs/distributed.md.

A shared helper beside device.py rather than part of one wing: regions, profile(), benchmark()
and the pytest plugin all ask it which rank they run as. It never imports torch: it asks
torch.distributed only when the program has imported it already.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from typing import NamedTuple

from . import _C
from .tracing.nccl import canonical_op


class RankInfo(NamedTuple):
    rank: int
    world_size: int
    local_rank: int
    source: str  # "torch.distributed", "env" or "single"


def _env_int(name: str):
    value = os.environ.get(name, "").strip()
    try:
        return int(value) if value else None
    except ValueError:
        return None


def rank_info() -> RankInfo:
    """(rank, world_size, local_rank, source): from torch.distributed when the program imported
    it and initialised a process group, else from RANK / WORLD_SIZE / LOCAL_RANK (torchrun, SLURM
    launchers that export them), else (0, 1, 0, 'single')."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None:
        try:
            if dist.is_available() and dist.is_initialized():
                local = _env_int("LOCAL_RANK")
                return RankInfo(int(dist.get_rank()), int(dist.get_world_size()),
                                local if local is not None else int(dist.get_rank()),
                                "torch.distributed")
        except Exception:  # a half-initialised or torn-down group: fall back to the environment
            pass
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    if rank is not None and world is not None and world >= 1 and 0 <= rank < world:
        local = _env_int("LOCAL_RANK")
        return RankInfo(rank, world, local if local is not None else rank, "env")
    return RankInfo(0, 1, 0, "single")


def rank_path(path, info: RankInfo | None = None) -> str:
    """`path` for this rank: a `{rank}` placeholder is filled in; otherwise, when the job has
    more than one rank, `.rank{r}` goes before the extension (trace.json.gz ->
    trace.rank1.json.gz, results.json -> results.rank1.json). Single-process paths are kept.
    A folder named by the placeholder is made (job/rank={rank}/trace.parquet: the partitioned
    layout of docs/distributed.md)."""
    path = os.fspath(path)
    info = info or rank_info()
    if "{rank}" in path:
        head = os.path.dirname(path)
        if "{rank}" in head:
            os.makedirs(head.replace("{rank}", str(info.rank)), exist_ok=True)
        return path.replace("{rank}", str(info.rank))
    if info.world_size <= 1:
        return path
    root, ext = os.path.splitext(path)
    if ext in _COMPRESSED:  # trace.json.gz: the rank goes before .json
        root, inner = os.path.splitext(root)
        ext = inner + ext
    return f"{root}.rank{info.rank}{ext}"


_COMPRESSED = (".gz", ".bz2", ".xz", ".zst")


def rank_fields(info: RankInfo | None = None) -> dict:
    """{'rank': r, 'world_size': n} when the job has several ranks, else {} (single-process
    results stay as they were)."""
    info = info or rank_info()
    return {"rank": info.rank, "world_size": info.world_size} if info.world_size > 1 else {}


def clock_pair(offset_ns: int, offset_uncertainty_ns: int) -> dict:
    """A (CUPTI ns, wall-clock ns) pair for aligning this process's trace with other ranks'.

    CUPTI's clock is tied to the host clock of gpuprofile.records() (time.monotonic_ns) by the
    profile's measured offset; the wall clock (time.time_ns, which NTP/PTP keep in step across
    hosts) is read between two monotonic readings. The uncertainty adds half that bracket to the
    offset's own uncertainty."""
    best = None
    for _ in range(5):  # keep the tightest bracket: a preemption between readings widens it
        before = time.monotonic_ns()
        wall = time.time_ns()
        after = time.monotonic_ns()
        if best is None or after - before < best[2] - best[0]:
            best = (before, wall, after)
    before, wall, after = best
    mono = (before + after) // 2
    return {"cupti_ns": mono + int(offset_ns), "wall_ns": wall,
            "uncertainty_ns": int(offset_uncertainty_ns) + (after - before + 1) // 2}


def trace_metadata(pair: dict) -> dict:
    """What a Chrome trace's otherData says about the rank that wrote it, with the profile's
    clock pair (gpuprofile merge reads both)."""
    info = rank_info()
    return {"rank": info.rank, "world_size": info.world_size, "local_rank": info.local_rank,
            "rank_source": info.source, "hostname": socket.gethostname(), "clock_pair": pair}


COLLECTIVE_PREFIX = "collective "


def collective_region_name(op: str, nbytes: int) -> str:
    """The region name that carries a collective's kind and size: 'collective AllReduce 4096 B'."""
    nbytes = int(nbytes)
    if nbytes < 0:
        raise ValueError(f"collective(): nbytes must be >= 0, got {nbytes}")
    return f"{COLLECTIVE_PREFIX}{canonical_op(op)} {nbytes} B"


@contextlib.contextmanager
def collective(op: str, nbytes: int):
    """A region around one collective call, naming its kind and size, so that a trace's NCCL
    kernels get their bytes and bus bandwidth:

        with gp.distributed.collective("all_reduce", t.numel() * t.element_size()):
            dist.all_reduce(t)

    `nbytes` follows nccl-tests' "size": the buffer for AllReduce, Broadcast and Reduce, the
    whole gathered buffer for AllGather and ReduceScatter, the bytes sent for SendRecv."""
    with _C.region(collective_region_name(op, nbytes)):
        yield


def allreduce_hook(process_group, bucket):
    """A DDP communication hook: DDP's own allreduce of each gradient bucket, inside a
    collective() region (model.register_comm_hook(None, gp.distributed.allreduce_hook))."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    buffer = bucket.buffer()
    with collective("AllReduce", buffer.numel() * buffer.element_size()):
        return default_hooks.allreduce_hook(process_group, bucket)
