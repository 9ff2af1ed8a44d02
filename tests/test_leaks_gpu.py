"""Leak tests on the device (markers `gpu` and `leak`): profile(), metrics(), memory.track(),
attention with DeviceArray results, regions on CUDA events and a GPU-clock benchmark, called
many times. Beyond tests/leaks.py's host measures, device memory in use (cudaMemGetInfo) must
not grow over the second window. The heavy calls (a profile starts and stops CUPTI tracing, a
metrics() call replays fn once per pass) run fewer times, as noted.

Each test runs in a fresh interpreter (marker `fresh_interpreter`, tests/conftest.py). CUPTI
grows the C heap by 80 bytes per record it delivers while a kind is on, in its own code
(measured with a bare ctypes client and none of ours, docs/benchmarks.md), and earlier tests of
a suite turn CUPTI on: run after them, a measurement would count CUPTI's state, not ours."""

import numpy as np
import pytest
from leaks import check_no_growth, tracing_left_on

import gpuprofile as gp
from gpuprofile import _C, kernels

pytestmark = [pytest.mark.gpu, pytest.mark.leak, pytest.mark.fresh_interpreter]


@pytest.fixture
def device():
    # a consumer left collecting by an earlier call would grow with every call measured here
    assert not tracing_left_on(), "an earlier call left tracing on"
    return _C._current_device()


def test_regions_on_cuda_events(device):
    stream = _C._stream_create()
    try:
        def step():
            with gp.region("leak-gpu"), gp.region("leak-gpu-stream", stream=stream):
                kernels.spin(1_000, stream=stream)
            gp.records()
            gp.reset()

        check_no_growth(step, device=device)
    finally:
        _C._stream_destroy(stream)


def test_attention_device_array_results(device):
    """10k calls, each returning new DeviceArrays from the pool that are dropped: one freed
    stream-ordered, one exported first (freed after the device)."""
    rng = np.random.default_rng(0)
    q = kernels.to_device(rng.standard_normal((1, 2, 64, 64)).astype(np.float32))

    def step():
        kernels.attention(q, q, q, impl="flash")  # freed on the free stream, no wait
        out = kernels.attention(q, q, q, impl="flash")
        _ = out.__cuda_array_interface__, out.__dlpack__()  # exports built and dropped too
        kernels.attention(q, q, q, impl="naive")  # the naive workspace comes from our pool

    check_no_growth(step, inputs=[q], device=device)


def test_attention_host_arrays(device):
    """Host arrays are staged through the pool: 2000 calls (each synchronizes)."""
    a = np.random.default_rng(0).standard_normal((1, 2, 64, 64)).astype(np.float32)
    out = np.empty_like(a)
    check_no_growth(lambda: kernels.attention(a, a, a, out=out), n=2000, inputs=[a, out], device=device)


def test_gpu_benchmark(device):
    """A GPU-clock benchmark with L2 flushes takes a few ms: 300 calls."""
    check_no_growth(lambda: gp.benchmark(kernels.spin, 2_000, clock="gpu", warmup=0, min_time=0,
                                         max_time=1, min_iters=5, max_iters=5),
                    n=300, device=device)


def test_profile(device, tmp_path):
    """Each profile starts and stops CUPTI tracing: 300 profiles."""
    path = tmp_path / "t.json"

    def step():
        with gp.profile() as p, gp.region("traced"):
            kernels.spin(1_000)
            buf = kernels.DeviceBuffer(1 << 16)
            buf.close()
        p.summary()
        p.export_chrome_trace(str(path))
        gp.reset()

    check_no_growth(step, n=300, device=device)


def test_memory_track(device):
    def step():
        with gp.memory.track() as t:
            buf = kernels.DeviceBuffer(1 << 20)
            buf.close()
        assert t.peak_bytes >= 1 << 20 and len(t.timeline)
        with gp.region("mem", memory=True):
            kernels.DeviceBuffer(1 << 16).close()
        gp.memory.region_peaks()
        gp.reset()

    # CUPTI's share: the allocation and free of each tracker (measured: exactly 160 B a step)
    check_no_growth(step, n=1000, device=device, cupti_records=2)


def test_metrics(device):
    """A metrics() call replays fn once per pass: 100 calls of a one-pass set."""
    def step():
        m = gp.metrics(kernels.spin, 2_000, metrics="gpu__time_duration.sum")
        m.to_dict()

    check_no_growth(step, n=100, device=device)
