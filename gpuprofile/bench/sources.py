"""Where gpuprofile.benchmark's samples come from: a sample source has `run(n) -> Batch`,
`max_batch`, `gated` and `tainted`. GpuSource times batches of a _C.BenchRunner (events, behind
the gate kernel); HostSource times host calls. bench/cupti.py wraps a GpuSource to take its
times from CUPTI's records. The loop (bench/loop.py) drives any of them, fakes included."""

from __future__ import annotations

import time

from .result import Batch

GATE_TIMED_OUT = 2  # GP_GATE_TIMED_OUT in kernels/harness/bench_kernels.h
# The gate gives up after this long (or 20x the batch's expected enqueue time, if longer). A batch
# is sized to enqueue in well under it, so only a host that blocks reaches it.
GATE_TIMEOUT_S = 0.1
GATE_TIMEOUT_MAX_S = 2.0
# Iterations per gated batch. Each cold iteration queues about 3 + (fn's launches) commands behind
# the gate; CUDA's launch queue holds about a thousand before the host blocks.
MAX_BATCH = {"cold": 64, "graph": 64, "hot": 128}


class GpuSource:
    """Batches from a _C.BenchRunner: gated, with the gate switched off when it keeps timing out
    (fn blocks the host: it synchronizes, or fills the launch queue)."""

    def __init__(self, runner, mode: str):
        self.runner = runner
        self.max_batch = MAX_BATCH[mode]
        self.gated = True
        self.sync_each = False  # fn's work is on other streams: iterations between device syncs
        self.tainted = 0
        self._host_per_iter = 0.0

    def synchronize_each(self) -> None:
        """From now on, each iteration runs between device synchronizations, ungated."""
        self.sync_each, self.gated = True, False

    def run(self, n: int) -> Batch:
        import numpy as np

        timeout_ns = 0
        if self.gated:
            expected = 20 * n * self._host_per_iter
            timeout_ns = int(min(GATE_TIMEOUT_MAX_S, max(GATE_TIMEOUT_S, expected)) * 1e9)
        t0 = time.perf_counter()
        raw, host_ns, state = self.runner.batch(n, timeout_ns, self.sync_each)
        wall = time.perf_counter() - t0
        if state != GATE_TIMED_OUT:
            self._host_per_iter = host_ns / 1e9 / n  # a timed-out batch's host time includes the wait
            return Batch(np.frombuffer(raw, dtype=np.float64), wall, host_ns / 1e9)
        self.tainted += 1
        self.max_batch = max(1, self.max_batch // 4)
        if self.tainted >= 2:
            self.gated = False
        return Batch(np.empty(0), wall, host_ns / 1e9, tainted=True)


class HostSource:
    """Batches timed with the host clock (CLOCK_MONOTONIC) by _C._bench_host_batch."""

    gated = False
    tainted = 0
    max_batch = 65536

    def __init__(self, fn, args, kwargs, setup=None):
        self.fn, self.args, self.kwargs, self.setup = fn, args, kwargs or None, setup
        self.inner = 1
        self.calls = 0
        self.failed_call = -1  # index of the call that raised, as BenchRunner.failed_call

    def run(self, n: int) -> Batch:
        import numpy as np

        from .. import _C

        t0 = time.perf_counter()
        try:
            raw, total_ns = _C._bench_host_batch(self.fn, self.args, self.kwargs, n, self.inner, self.setup)
        except BaseException as e:
            index = e.__dict__.pop("_gpuprofile_call_in_batch", None)  # set by the C loop when fn raised
            if index is not None:
                self.failed_call = self.calls + index
            raise
        finally:
            wall = time.perf_counter() - t0
        self.calls += n * self.inner
        return Batch(np.frombuffer(raw, dtype=np.float64), wall, total_ns / 1e9)
