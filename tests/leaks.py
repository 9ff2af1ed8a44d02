"""Leak checks for tests marked `leak`: call something thousands of times and check that nothing
grows.

A warm-up fills caches (region objects by name, metric hosts, pools), then two equal windows of
calls are measured; the second window must not grow (where it did, a third window must not):
gc-tracked objects, pymalloc blocks (sys.getallocatedblocks: every small Python object, tracked
or not), the C heap (glibc's mallinfo2: malloc/realloc in our C code and large Python objects),
the resident set (/proc/self/statm), and, with `device`, the device's used memory. Reference counts of the
inputs must end where they started. A leak of one object or 16 bytes per call shows as
thousands of objects or tens of kilobytes per window, far above the limits below."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import sys
import warnings
from dataclasses import dataclass, fields

# Growth allowed over the second window: noise (freelists, the allocator's own bookkeeping,
# pages touched for the first time; device memory moves in 2 MiB pages), never per-call amounts.
LIMITS = {"objects": 30, "blocks": 200, "heap": 64 << 10, "rss": 1 << 20, "device": 8 << 20}


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                               "usmblks", "fsmblks", "uordblks", "fordblks",
                                               "keepcost")]


_mallinfo2 = getattr(ctypes.CDLL(None), "mallinfo2", None)
if _mallinfo2 is not None:
    _mallinfo2.restype = _MallInfo2


def heap_bytes() -> int:
    """Bytes in use by malloc (0 where glibc's mallinfo2 is missing)."""
    if _mallinfo2 is None:
        return 0
    m = _mallinfo2()
    return m.uordblks + m.hblkhd


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@dataclass
class Usage:
    objects: int
    blocks: int
    heap: int
    rss: int
    device: int

    def __sub__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))


def usage(device: int | None = None) -> Usage:
    gc.collect()
    used = 0
    if device is not None:
        from gpuprofile import _C

        _C._stream_synchronize(0)  # frees queued on the default stream have happened
        free, total = _C._mem_info(device)
        used = total - free
    return Usage(len(gc.get_objects()), sys.getallocatedblocks(), heap_bytes(), rss_bytes(), used)


# CUPTI's own C heap grows by 80 bytes per activity record it delivers while a kind is on (a
# bare ctypes client with none of our code: kernel and MEMORY2 records alike, 0 once the kind is
# off; H100, CUDA 13.0, 2026-11-25, docs/benchmarks.md). Calls that produce records pay it.
CUPTI_BYTES_PER_RECORD = 80


def check_no_growth(fn, n: int = 10_000, inputs=(), device: int | None = None,
                    warmup: int | None = None, cupti_records: int = 0):
    """Calls fn() `warmup` times (n // 5 by default), then twice n // 2 times; asserts the second
    window grew nothing beyond LIMITS (the heap's raised by CUPTI's share when each call makes
    CUPTI deliver `cupti_records` records) and the inputs' reference counts are unchanged. What
    grew past its limit in the second window is measured again over a third, and fails only if
    it grows past it there too (a one-time step does not repeat). Returns the growth of the first
    two windows (for messages and docs)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the warnings registry would grow with each message
        for _ in range(n // 5 if warmup is None else warmup):
            fn()
        refs = [sys.getrefcount(x) for x in inputs]  # after the warm-up: caches may hold some
        start = usage(device)
        for _ in range(n // 2):
            fn()
        middle = usage(device)
        for _ in range(n // 2):
            fn()
        end = usage(device)
        first, second = middle - start, end - middle
        limits = dict(LIMITS, heap=LIMITS["heap"] + CUPTI_BYTES_PER_RECORD * cupti_records * (n // 2))
        over = {k: v for k, v in vars(second).items() if v > limits[k]}
        if over:
            # A one-time step does not repeat, a leak grows every window: the kernel can fold a
            # partly used 2 MiB region into a transparent huge page (resident set +1.7 MB in one
            # window, heap +80 bytes), an interpreter cache can grow once (pymalloc blocks +217
            # over 5000 calls on Python 3.13, the window before +11), both in CI on 2026-11-26.
            # So what grew past its limit is measured over a third window, and fails only if it
            # grows past it again.
            for _ in range(n // 2):
                fn()
            third = usage(device) - end
            over = {k: [v, getattr(third, k)] for k, v in over.items()
                    if getattr(third, k) > limits[k]}
    assert not over, f"grew over {n // 2} calls, twice: {over} (first window: {first})"
    assert [sys.getrefcount(x) for x in inputs] == refs, "reference counts of the inputs changed"
    return first, second


def raising(fn, *errors):
    """fn, made to swallow the expected errors (so that the error paths can be repeated)."""
    def call():
        with contextlib.suppress(*errors):
            fn()
    return call


def tracing_left_on() -> dict:
    """What an earlier call left collecting (activity kinds, consumers, a profile, the counters):
    each would make the measured calls grow through records that nobody takes. Empty when idle."""
    from gpuprofile import _C
    from gpuprofile.tracing import activity, profile

    left = {}
    refs = {k: v for k, v in _C._activity_state()["refs"].items() if v}
    if refs:
        left["activity kinds"] = refs
    if activity._active:
        left["collectors"] = [c.what for c in activity._active]
    if profile.running() is not None:
        left["profile"] = "running"
    if _C._counters_holder() is not None:
        left["counters"] = _C._counters_holder()
    return left
