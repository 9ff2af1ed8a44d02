"""Device memory: free/total bytes, and an allocation timeline from CUPTI (MEMORY2 records), which
sees every cudaMalloc / cudaMallocAsync / cudaFree in the process, whichever library made it
(PyTorch's caching allocator, CuPy's pool, raw CUDA).

    free, total = gpuprofile.memory.info()
    with gpuprofile.memory.track() as t:
        ...
    t.peak_bytes, t.current_bytes, t.allocations, t.largest_allocation, t.timeline

    with gpuprofile.region("step", memory=True):   # per-region peak
        ...
    gpuprofile.memory.region_peaks()

Bytes in use count device allocations (device, array and static device memory) made while
tracking, minus frees: memory allocated before tracking started is not known, and freeing it
makes the count go below zero. Caching allocators (PyTorch, CuPy) call cudaMalloc only when their
pool grows, so the timeline shows the pool, not each tensor; torch's own statistics are shown
beside ours when torch is in use.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from .. import _C
from .timeline import (  # noqa: F401  (build_timeline and the others: also gpuprofile.memory's API)
    DEVICE_KINDS,
    KIND_NAMES,
    build_timeline,
    is_device_kind,
    label_regions,
    peaks_in_windows,
    region_memory,
    timeline_dtype,
)


def info(device: int = 0) -> tuple:
    """(free_bytes, total_bytes) of `device` from cudaMemGetInfo (the whole device, all
    processes). Creates the device's CUDA context if it has none."""
    return _C._mem_info(device)


def torch_memory_stats() -> dict | None:
    """A few of torch.cuda.memory_stats() when torch is imported and has used CUDA; else None.
    Never imports torch or initializes CUDA through it."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    try:
        if cuda is None or not cuda.is_initialized():
            return None
        s = cuda.memory_stats()
    except Exception:
        return None
    keys = {"allocated_bytes.all.current": "allocated_bytes",
            "allocated_bytes.all.peak": "peak_allocated_bytes",
            "reserved_bytes.all.current": "reserved_bytes",
            "reserved_bytes.all.peak": "peak_reserved_bytes",
            "num_alloc_retries": "alloc_retries"}
    return {v: int(s.get(k, 0)) for k, v in keys.items()}


@dataclass
class MemoryTrack:
    """Result of `with gpuprofile.memory.track() as t:` (filled in at exit).

    peak_bytes: the highest device bytes in use during the block (on the busiest device),
    counted from 0 at entry; current_bytes: bytes in use at exit (allocated minus freed);
    allocations: number of allocations; largest_allocation: bytes of the largest one; timeline:
    every allocation and free (NumPy structured array, see build_timeline); regions: peaks of
    memory=True regions inside the block; torch / torch_at_start: torch's allocator statistics
    (None without torch); dropped: CUPTI records lost (should be 0); partial: stopping was
    interrupted; errors: problems met while stopping."""

    peak_bytes: int = 0
    current_bytes: int = 0
    allocations: int = 0
    frees: int = 0
    largest_allocation: int = 0
    timeline: object = None
    regions: list = field(default_factory=list)
    torch: dict | None = None
    torch_at_start: dict | None = None
    dropped: int = 0
    partial: bool = False
    errors: list = field(default_factory=list)
    _collector: object = field(default=None, repr=False)

    def __enter__(self) -> MemoryTrack:
        from .activity import MEMORY, Collector

        if self._collector is not None:
            raise _C.GpuProfileError("this memory tracker was already used; create a new one")
        self.torch_at_start = torch_memory_stats()
        self._collector = Collector(MEMORY, "gpuprofile.memory.track()")
        try:
            self._collector.start()
        except BaseException:  # a Ctrl-C just after the start: no __exit__ will run
            if self._collector.running:
                self._collector.stop(wait=False)
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            self._collector.stop(wait=True)
        except Exception as stop_error:
            if exc_type is None:
                raise
            self.errors.append(f"stop after the body raised: {stop_error}")  # keep the body's
        finally:
            window = getattr(self._collector, "window", None)
            if window is not None:
                self._fill(window)
        return False

    def _fill(self, window) -> None:
        import numpy as np

        from ..regions import records
        from .activity import attribute

        chunk = window.chunk
        try:
            recs = records()
        except Exception:
            recs = None
        rec_idx = attribute(chunk.memory["correlation_id"], chunk.extcorr)
        names = recs["name"] if recs is not None else None
        self.timeline = build_timeline(chunk.memory, rec_idx, names)
        t = self.timeline
        device = is_device_kind(t["kind"])
        allocs = t[device & (t["op"] == "alloc")]
        self.allocations = len(allocs)
        self.frees = int((device & (t["op"] == "free")).sum())
        self.largest_allocation = int(allocs["bytes"].max()) if len(allocs) else 0
        self.peak_bytes = max(0, int(t["bytes_in_use"].max())) if len(t) else 0
        by_dev = {}
        for dev in np.unique(t["device"]):
            by_dev[int(dev)] = int(t["bytes_in_use"][t["device"] == dev][-1])
        self.current_bytes = max(by_dev.values(), default=0)
        self.regions = region_memory(t, recs, window.offset_ns, (window.t0, window.t1))
        self.torch = torch_memory_stats()
        self.dropped = window.chunk.dropped
        self.partial = window.partial

    def to_dict(self) -> dict:
        return {
            "peak_bytes": self.peak_bytes, "current_bytes": self.current_bytes,
            "allocations": self.allocations, "frees": self.frees,
            "largest_allocation": self.largest_allocation, "regions": self.regions,
            "torch": self.torch, "torch_at_start": self.torch_at_start, "dropped": self.dropped,
            "partial": self.partial, "errors": list(self.errors),
            "timeline": _timeline_records(self.timeline),
        }

    def _rows(self):
        mib = 2.0 ** 20
        rows = [["peak MiB", self.peak_bytes / mib], ["current MiB", self.current_bytes / mib],
                ["allocations", self.allocations], ["frees", self.frees],
                ["largest allocation MiB", self.largest_allocation / mib],
                ["dropped records", self.dropped]]
        if self.torch:
            rows += [[f"torch {k}", v] for k, v in self.torch.items()]
        return rows

    def __repr__(self) -> str:
        from .._format import text_table

        return text_table(["device memory", "value"], self._rows(), title="gpuprofile.memory.track")

    def _repr_html_(self) -> str:
        from .._format import html_table

        return html_table(["device memory", "value"], self._rows(), title="gpuprofile.memory.track")


def _timeline_records(timeline) -> list:
    if timeline is None:
        return []
    keys = ("timestamp_ns", "op", "kind", "device", "address", "bytes", "delta", "bytes_in_use",
            "region")
    return [dict(zip(keys, row, strict=True)) for row in timeline[list(keys)].tolist()]


def track() -> MemoryTrack:
    """Record every device allocation and free while the block runs:
    `with gpuprofile.memory.track() as t: ...`, then t.peak_bytes etc. Needs CUPTI and a device;
    raises CuptiError if another profiler holds CUPTI."""
    return MemoryTrack()


def region_peaks() -> list:
    """Memory peaks of every region(name, memory=True) recorded since gpuprofile.reset(), one row
    per region name (see region_memory). Collects the allocation records gathered so far."""
    from ..regions import records
    from .activity import region_memory_log

    timeline, offset = region_memory_log()
    return region_memory(timeline, records(), offset)
