"""Synthetic CUPTI records for CPU tests of profiles, summaries and traces: what the C store
would hand over after tracing, built with NumPy."""

from __future__ import annotations

import numpy as np

from gpuprofile.regions import RECORD_DTYPE
from gpuprofile.tracing.activity import (
    EXTCORR_RAW,
    KERNEL_RAW,
    MEMCPY_RAW,
    MEMORY_RAW,
    MEMSET_RAW,
    Chunk,
    Window,
)
from gpuprofile.tracing.occupancy import ARCH_LIMITS

T0 = 1_000_000_000  # CUPTI clock at profile start (ns)
OFFSET = 500_000_000  # CUPTI clock minus host clock


def kernels(n: int, names: int = 3, streams: int = 2, gap: int = 500, duration: int = 1000,
            regions=None) -> tuple:
    """n kernels, back to back per stream (`gap` ns apart), cycling through `names` names and
    `streams` streams; correlation ids 1..n. Returns (raw kernel records, external correlation
    records mapping kernel i to region record regions[i] when given)."""
    k = np.zeros(n, KERNEL_RAW)
    i = np.arange(n, dtype=np.int64)
    stream = i % streams
    slot = i // streams
    k["start"] = T0 + 1000 + slot * (duration + gap)
    k["end"] = k["start"] + duration
    k["correlation_id"] = i + 1
    k["name_id"] = i % names
    k["device"] = 0
    k["context"] = 1
    k["stream"] = 7 + stream
    k["grid_x"], k["grid_y"], k["grid_z"] = 128, 1, 1
    k["block_x"], k["block_y"], k["block_z"] = 256, 1, 1
    k["registers_per_thread"] = 32
    k["static_smem"] = 4096
    k["dynamic_smem"] = 0
    ext = np.zeros(0, EXTCORR_RAW)
    if regions is not None:
        regions = np.asarray(regions, np.int64)
        has = regions >= 0
        ext = np.zeros(int(has.sum()), EXTCORR_RAW)
        ext["correlation_id"] = k["correlation_id"][has]
        ext["external_id"] = regions[has] + 1
    return k, ext


def memory_events(events) -> np.ndarray:
    """[(timestamp, op 'alloc'/'free', bytes, address)] on device 0 as MEMORY2 records."""
    m = np.zeros(len(events), MEMORY_RAW)
    for j, (ts, op, nbytes, addr) in enumerate(events):
        m[j]["timestamp"] = ts
        m[j]["operation"] = 1 if op == "alloc" else 2
        m[j]["bytes"] = nbytes
        m[j]["address"] = addr
        m[j]["memory_kind"] = 3
        m[j]["correlation_id"] = 10_000 + j
    return m


def region_records(spec) -> np.ndarray:
    """gpuprofile.records()-shaped array from [(name, parent, host_start, host_end, memory)]
    (host clock, ns)."""
    r = np.zeros(len(spec), RECORD_DTYPE)
    for j, (name, parent, start, end, memory) in enumerate(spec):
        depth = 0 if parent < 0 else r[parent]["depth"] + 1
        r[j] = (name, depth, parent, 4242, 0, "gpu", start, end, (end - start) / 1e6, np.nan,
                False, False, False, memory, "events", False)
    return r


def window(k=None, ext=None, memcpy=None, memset=None, memory=None, names=None, t1=None,
           dropped=0) -> Window:
    k = np.zeros(0, KERNEL_RAW) if k is None else k
    chunk = Chunk(
        kernels=k, memcpy=np.zeros(0, MEMCPY_RAW) if memcpy is None else memcpy,
        memset=np.zeros(0, MEMSET_RAW) if memset is None else memset,
        memory=np.zeros(0, MEMORY_RAW) if memory is None else memory,
        extcorr=np.zeros(0, EXTCORR_RAW) if ext is None else ext,
        names=names if names is not None else [f"kernel_{j}(float*)" for j in range(3)],
        dropped=dropped,
    )
    end = t1 if t1 is not None else (int(k["end"].max()) + 1000 if len(k) else T0 + 10_000)
    return Window(t0=T0, t1=end, offset_ns=OFFSET, offset_uncertainty_ns=20, chunk=chunk)


LIMITS = {0: ARCH_LIMITS[(9, 0)]}
