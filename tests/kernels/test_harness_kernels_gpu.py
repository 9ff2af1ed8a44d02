"""Every harness kernel launched once, without CUPTI, with its result checked where it has one:
the module that tools/compute_sanitizer.sh runs so that memcheck, racecheck and synccheck see
each of our kernels (the attention kernels: tests/kernels/test_attention_gpu.py)."""

import numpy as np
import pytest

import gpuprofile as gp
from gpuprofile import _C, kernels

pytestmark = pytest.mark.gpu


def _sync():
    _C._stream_synchronize(0)


def test_spin_and_empty_kernels():
    kernels.spin(20_000)
    _C._testing.launch_empty(1000)
    _sync()


def test_probe_kernel_shapes():
    for grid, block, smem in (((1, 1, 1), (32, 1, 1), 0), ((7, 3, 1), (128, 2, 1), 4096),
                              ((64, 1, 1), (1024, 1, 1), 32 * 1024)):  # + 4 KiB static: under 48
        _C._testing.probe_launch(grid, block, dynamic_smem=smem)
    _sync()


@pytest.mark.parametrize("kind", ["copy", "ffma", "mma", "chase"])
def test_workloads(kind):
    w = _C.Workload(kind, **({"bytes": 1 << 22} if kind in ("copy", "chase") else {}))
    try:
        w.launch()
        times = w.time(repeats=2)
        assert len(times) == 2 and all(t > 0 for t in times)
    finally:
        w.close()


def test_read_flush_and_gate_kernels_through_benchmark():
    """cold: gate, L2 flush and read kernels; hot: gate and read; graph: read captured on s."""
    buf = kernels.DeviceBuffer(1 << 22)
    try:
        with gp.Stream() as s:
            for mode in ("cold", "hot", "graph"):
                r = gp.benchmark(kernels.read, buf, s, clock="gpu", mode=mode, stream=s, warmup=0,
                                 min_time=0, max_time=0.2, min_iters=5, max_iters=20)
                assert r.iterations >= 5 and r.median_ms > 0
    finally:
        buf.close()


def test_sm_clock_probe_kernel():
    info = _C._bench_sm_clock(_C._current_device(), probe=True)
    assert isinstance(info, dict)


def test_device_array_copies():
    a = np.arange(2 * 3 * 16 * 64, dtype=np.float32).reshape(2, 3, 16, 64)
    d = kernels.to_device(a)
    out = kernels.attention(d, d, d, impl="naive")
    _sync()
    assert out.shape == a.shape


@pytest.mark.skipif(gp.device_count() < 2, reason="needs two devices")
def test_workload_of_another_device_leaves_the_callers_device_current():
    torch = pytest.importorskip("torch")
    with torch.cuda.device(1):
        w = _C.Workload("copy", bytes=1 << 22)
    assert w.info["device"] == 1 and _C._current_device() == 0
    w.launch()
    assert _C._current_device() == 0
    (ms,) = w.time(repeats=1)
    assert ms > 0 and _C._current_device() == 0
    w.close()
