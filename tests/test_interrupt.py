"""Ctrl-C (SIGINT) during a host-clock benchmark and inside nested regions, on any machine: the
KeyboardInterrupt reaches the caller and the process stays usable (tests/test_interrupt_gpu.py
does the same for the device paths)."""

import time

import pytest
from interrupts import interrupted

import gpuprofile as gp


def _usable():
    assert not gp.records()["open"].any()
    gp.reset()
    with gp.region("after"):
        pass
    assert gp.stats("after").count == 1
    assert gp.benchmark(sum, [1, 2], clock="host", warmup=0, min_time=0, max_time=0.05).median_ms > 0
    gp.reset()


@pytest.mark.parametrize("delay", [0.005, 0.05, 0.2])
def test_ctrl_c_during_host_benchmark(delay):
    assert interrupted(lambda: gp.benchmark(time.sleep, 1e-4, clock="host", max_time=5,
                                             max_noise=1e-9), delay)
    _usable()


@pytest.mark.parametrize("delay", [0.005, 0.05])
def test_ctrl_c_inside_nested_regions(delay):
    def nested():
        while True:
            with gp.region("a"), gp.region("b"):
                with gp.region("c"):
                    time.sleep(1e-4)

    assert interrupted(nested, delay)
    recs = gp.records()
    # every region the interrupt went through says so, and its enclosing ones too
    raised = recs["raised"]
    assert all(raised[p] for p in recs["parent"][raised] if p >= 0)
    _usable()
