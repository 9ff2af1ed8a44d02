"""Bundled CUDA kernels: calibration workloads of known cost (ground truth for tests and
benchmarks)."""

from __future__ import annotations

import weakref

from . import _C
from ._C import spin


class DeviceBuffer:
    """Zeroed device memory on the current device, freed by close() or when collected. A workload
    buffer for read(); `.ptr` is the raw device address (an int)."""

    def __init__(self, nbytes: int):
        if isinstance(nbytes, bool) or not isinstance(nbytes, int):
            raise TypeError(f"nbytes must be an int, got {type(nbytes).__name__}")
        if nbytes < 16:
            raise ValueError(f"nbytes must be >= 16, got {nbytes}")
        self.nbytes = nbytes
        # One more 16-byte word: the read kernel's sink, never written for zeroed data.
        self.ptr = _C._bench_alloc(nbytes + 16)
        self._finalizer = weakref.finalize(self, _C._bench_free, self.ptr)

    def close(self) -> None:
        self._finalizer()

    def __repr__(self) -> str:
        return f"<gpuprofile.kernels.DeviceBuffer {self.nbytes} bytes at {self.ptr:#x}>"


def read(buffer: DeviceBuffer, stream=None) -> None:
    """Launch one pass that reads every 16-byte word of `buffer` (all SMs, coalesced). Returns at
    once. Timed cold it runs from DRAM, timed hot from L2 when the buffer fits there."""
    if not isinstance(buffer, DeviceBuffer):
        raise TypeError(f"buffer must be a gpuprofile.kernels.DeviceBuffer, got {type(buffer).__name__}")
    if not buffer._finalizer.alive:
        raise ValueError("buffer is closed")
    _C._bench_read(buffer.ptr, buffer.nbytes, buffer.ptr + buffer.nbytes, stream)


__all__ = ["DeviceBuffer", "read", "spin"]
