"""Regions on a GPU, against ground truth: the spin kernel's requested duration."""

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import gpuprofile as gp

pytestmark = pytest.mark.gpu


def _torch_stream():
    torch = pytest.importorskip("torch")
    return torch.cuda.Stream()


@pytest.mark.parametrize("ms", [1.0, 20.0])
def test_region_around_spin_reads_requested_time(ms):
    gp.kernels.spin(int(ms * 1e6))  # warm: module load, first launch
    for _ in range(5):
        gp.kernels.spin(1_000_000)  # busy GPU: see test_region_on_second_stream_times_that_stream
        with gp.region("spin"):
            gp.kernels.spin(int(ms * 1e6))
    s = gp.stats("spin")
    assert s.clock == "gpu" and s.count == 5
    assert abs(s.median_ms - ms) / ms < 0.01, s.samples_ms
    assert np.all(np.abs(s.samples_ms - ms) / ms < 0.01), s.samples_ms


def test_exit_does_not_wait_for_the_gpu():
    gp.kernels.spin(1000)
    t0 = time.perf_counter()
    with gp.region("long"):
        gp.kernels.spin(50_000_000)
    host_s = time.perf_counter() - t0
    assert host_s < 0.005, f"region enter+exit took {host_s * 1e3:.2f} ms around a 50 ms kernel"
    assert gp.stats("long").median_ms == pytest.approx(50.0, rel=0.01)


def test_region_on_second_stream_times_that_stream():
    s = _torch_stream()
    # The GPU is kept busy before each region opens, so its start event waits in the queue and
    # host pauses (a GC pass, a slow first launch) cannot land on the GPU timeline inside it.
    gp.kernels.spin(1_000_000, stream=s)
    with gp.region("on_s", stream=s):
        gp.kernels.spin(2_000_000, stream=s)
    with gp.region("on_default"):  # legacy stream: does not wait for a non-blocking stream's work
        gp.kernels.spin(2_000_000, stream=s)
    assert gp.stats("on_s").median_ms == pytest.approx(2.0, rel=0.01)
    assert gp.stats("on_default").median_ms < 0.5
    s.synchronize()


def test_stream_objects_and_handles_agree():
    s = _torch_stream()
    for _ in range(3):
        for stream in (s, s.cuda_stream):
            gp.kernels.spin(1_000_000, stream=s)  # busy GPU: see above
            with gp.region("h", stream=stream):
                gp.kernels.spin(1_000_000, stream=s)
    st = gp.stats("h")
    assert np.allclose(st.samples_ms, 1.0, rtol=0.01), st.samples_ms


def test_nested_gpu_times_are_ordered():
    gp.kernels.spin(1_000_000)  # busy GPU: the regions' events queue behind it (see above)
    with gp.region("outer"):
        gp.kernels.spin(1_000_000)
        with gp.region("inner"):
            gp.kernels.spin(2_000_000)
    r = gp.records()
    outer, inner = r["gpu_ms"]
    assert inner == pytest.approx(2.0, rel=0.01)
    assert outer == pytest.approx(3.0, rel=0.01)


def test_100k_regions_do_not_leak_events_or_memory():
    def rss_mb():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    def run():
        for _ in range(100_000):
            with gp.region("tiny"):
                pass
        assert gp.stats("tiny").count == 100_000
        gp.reset()

    gp.records()  # earlier tests' GPU work done: the pool grows only for these regions
    run()
    before = rss_mb()
    run()
    stats = gp._C._testing.pool_stats()
    created, free, pending = (sum(v[i] for v in stats.values()) for i in range(3))
    assert pending == 0 and free == created  # every event came back
    # the pool grows while the GPU lags behind the host, never past its soft limit (+ one step)
    assert created <= 65536 + 128
    assert rss_mb() - before < 8


def test_unresolved_regions_beyond_the_pool_limit_still_resolve():
    # more regions than the pool's soft limit (32768 pairs) while the GPU is busy for longer than
    # it takes to enter them: the pool stops growing and regions wait for the oldest
    gp.kernels.spin(300_000_000)
    for _ in range(40_000):
        with gp.region("queued"):
            pass
    s = gp.stats("queued")
    assert s.count == 40_000 and s.failed == 0


def _run_child(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120)


def test_sticky_error_from_user_kernel_is_reported():
    out = _run_child("""
        import gpuprofile as gp
        gp.kernels.spin(1000)
        try:
            with gp.region("r"):
                gp._C._testing.fault(None)
            gp.records()
        except gp.CudaError as e:
            print("CudaError", e.error_name, "|", e)
        else:
            print("no error")
    """)
    assert "CudaError cudaErrorIllegalAddress" in out.stdout, out.stdout + out.stderr
    assert "sticky" in out.stdout


def test_region_after_sticky_error_raises_cuda_error():
    out = _run_child("""
        import gpuprofile as gp, time
        gp.kernels.spin(1000)
        gp._C._testing.fault(None)
        time.sleep(0.5)
        try:
            with gp.region("after"):
                pass
        except gp.CudaError as e:
            print("CudaError", e.error_name)
    """)
    assert "CudaError cudaErrorIllegalAddress" in out.stdout, out.stdout + out.stderr


def test_fork_after_cuda_use_raises_in_child():
    out = _run_child("""
        import os, gpuprofile as gp
        with gp.region("parent"):
            gp.kernels.spin(1000)
        pid = os.fork()
        if pid == 0:
            try:
                with gp.region("child"):
                    pass
                os._exit(3)
            except gp.GpuProfileError as e:
                os._exit(0 if "fork" in str(e) else 4)
        _, status = os.waitpid(pid, 0)
        print("child exit", os.waitstatus_to_exitcode(status))
    """)
    assert "child exit 0" in out.stdout, out.stdout + out.stderr


def test_device_info_is_consistent():
    info = gp.device_info(0)
    assert info.sm_count > 0 and info.l2_cache_bytes > 0 and info.peak_dram_gbps > 100
    assert info.name and "DeviceInfo" in repr(info)
