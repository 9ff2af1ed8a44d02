"""Bundled CUDA kernels: calibration workloads of known cost (ground truth for tests and
benchmarks)."""

from __future__ import annotations

from ._C import spin

__all__ = ["spin"]
