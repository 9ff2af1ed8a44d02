"""Ctrl-C (SIGINT) in the middle of benchmark(), metrics() and profile() (marker `gpu`): the
KeyboardInterrupt reaches the caller, and afterwards the process is fully usable: no region
left open, the counters free, no CUPTI subscription left behind, and the same call works again.

The signal is sent to this process by a timer thread after a delay; several delays land in
different phases (warm-up, batches, passes, buffer flushes)."""

import pytest
from interrupts import interrupted
from leaks import tracing_left_on

import gpuprofile as gp
from gpuprofile import _C, kernels

pytestmark = pytest.mark.gpu
DELAYS = [0.005, 0.05, 0.3]


def _spinning(n=100_000):
    def fn():
        kernels.spin(n)
    return fn


def _usable():
    """What an interrupted call must not have broken."""
    assert not tracing_left_on()
    assert not gp.records()["open"].any()
    gp.reset()
    with gp.region("after"):
        kernels.spin(1_000)
    assert gp.stats("after").count == 1
    r = gp.benchmark(kernels.spin, 10_000, clock="gpu", max_time=0.2)
    assert r.median_ms > 0
    with gp.profile() as p:
        kernels.spin(10_000)
    assert len(p.kernels) >= 1
    gp.reset()


@pytest.mark.parametrize("delay", DELAYS)
@pytest.mark.parametrize("clock", ["auto", "gpu"])
def test_ctrl_c_during_benchmark(delay, clock):
    interrupted(lambda: gp.benchmark(_spinning(), clock=clock, max_time=5, max_noise=1e-9), delay)
    _usable()


@pytest.mark.parametrize("delay", DELAYS)
def test_ctrl_c_during_metrics(delay):
    interrupted(lambda: gp.metrics(_spinning(1_000_000), metrics="sol"), delay)
    _usable()
    assert gp.metrics(_spinning(10_000), metrics="gpu__time_duration.sum") is not None


@pytest.mark.parametrize("delay", DELAYS)
def test_ctrl_c_during_profile(delay):
    def traced():
        with gp.profile(), gp.region("loop"):
            for _ in range(100_000):
                kernels.spin(10_000)

    interrupted(traced, delay)
    _usable()


@pytest.mark.parametrize("delay", DELAYS)
def test_ctrl_c_while_reading_results(delay):
    """records() waits for pending GPU work with the GIL released; the signal arrives after."""
    def read():
        for _ in range(20):
            with gp.region("long"):
                kernels.spin(20_000_000)
        gp.records()

    interrupted(read, delay)
    _C._stream_synchronize(0)
    _usable()


@pytest.mark.parametrize("wait", ["device", "stream"])
def test_ctrl_c_while_waiting_for_the_gpu(wait):
    """_C._synchronize() and gp.Stream.synchronize() wait through core/gpu_wait.c: on 2 s of GPU
    work they answer Ctrl-C within a poll interval (50 ms), not when the work ends, and a second
    wait then returns once it has."""
    import time

    with gp.Stream() as stream:
        kernels.spin(2_000_000_000, stream=stream if wait == "stream" else None)
        call = stream.synchronize if wait == "stream" else _C._synchronize
        t0 = time.perf_counter()
        assert interrupted(call, 0.1)
        assert time.perf_counter() - t0 < 1.0
        call()
        assert time.perf_counter() - t0 >= 1.9
    _usable()
