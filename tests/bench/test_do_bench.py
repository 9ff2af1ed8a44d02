"""gp.do_bench: Triton's signature and return values. The budgets, the conversion to ms, the
quantiles and modes are checked on a stand-in measurement with known samples; one real run on
the host clock checks the whole path."""

import math
import time

import numpy as np
import pytest

import gpuprofile as gp
from gpuprofile.bench import do_bench as module

SAMPLES = [4.0, 1.0, 3.0, 2.0, 10.0]  # ms


@pytest.fixture
def measured(monkeypatch):
    """Replaces the measurement: records its options and setup, returns SAMPLES."""
    seen = {}

    class Result:
        samples = np.array(SAMPLES)

    def fake_run(fn, args, kwargs, opts, setup=None):
        seen.update(fn=fn, args=args, kwargs=kwargs, opts=opts, setup=setup)
        return Result()

    monkeypatch.setattr(module, "run", fake_run)
    return seen


def test_budgets_are_milliseconds_and_the_l2_is_flushed(measured):
    fn = lambda: None  # noqa: E731
    assert gp.do_bench(fn) == 4.0  # the mean
    opts = measured["opts"]
    assert measured["fn"] is fn and measured["args"] == () and measured["setup"] is None
    assert opts.warmup == 0.025 and opts.min_time == 0.1 and opts.max_time == 0.1
    assert opts.mode == "cold" and opts.flush_l2 and opts.min_iters == 1
    gp.do_bench(fn, warmup=0, rep=7)
    assert measured["opts"].warmup == 0.0 and measured["opts"].max_time == 0.007


@pytest.mark.parametrize("mode, expected", [("mean", 4.0), ("median", 3.0), ("min", 1.0),
                                            ("max", 10.0), ("all", SAMPLES)])
def test_return_modes(measured, mode, expected):
    got = gp.do_bench(lambda: None, return_mode=mode)
    assert got == expected and type(got) is type(expected)


def test_quantiles_interpolate_linearly_and_one_is_a_float(measured):
    assert gp.do_bench(lambda: None, quantiles=[0.5, 0.2, 0.875]) == [3.0, 1.8, 7.0]
    assert gp.do_bench(lambda: None, quantiles=[0.25]) == 2.0
    assert gp.do_bench(lambda: None, quantiles=(0.0, 1.0), return_mode="min") == [1.0, 10.0]


def test_grad_to_none_resets_grads_before_each_call(measured):
    class Tensor:
        grad = "old"

    a, b = Tensor(), Tensor()
    gp.do_bench(lambda: None, grad_to_none=[a, b])
    assert a.grad == "old"
    measured["setup"]()
    assert a.grad is None and b.grad is None


@pytest.mark.parametrize("kwargs, error, match", [
    ({"return_mode": "avg"}, ValueError, "return_mode must be one of"),
    ({"rep": 0}, ValueError, "rep must be a finite number of milliseconds > 0"),
    ({"rep": math.nan}, ValueError, "rep must be"),
    ({"warmup": -1}, ValueError, "warmup must be a finite number of milliseconds >= 0"),
    ({"warmup": "25"}, TypeError, "warmup must be a number of milliseconds, got str"),
    ({"quantiles": [0.5, 2]}, ValueError, r"quantiles must be a non-empty list of numbers in \[0, 1\]"),
    ({"quantiles": []}, ValueError, "quantiles must be a non-empty list"),
    ({"quantiles": 0.5}, TypeError, "quantiles must be a list of numbers"),
])
def test_bad_arguments(measured, kwargs, error, match):
    with pytest.raises(error, match=match):
        gp.do_bench(lambda: None, **kwargs)
    assert "opts" not in measured  # refused before measuring


def test_fn_must_be_callable():
    with pytest.raises(TypeError, match="fn must be callable, got int"):
        gp.do_bench(3)


@pytest.mark.skipif(gp.device_count() > 0, reason="the host clock times fn without a device")
def test_a_real_run_on_the_host_clock_takes_the_budget_and_returns_ms(recwarn):
    calls = []

    def sleepy():
        calls.append(1)
        time.sleep(0.002)

    t0 = time.perf_counter()
    times = gp.do_bench(sleepy, warmup=5, rep=30, return_mode="all")
    wall_ms = (time.perf_counter() - t0) * 1e3
    # do_bench's own estimate sizes warm-up and repetitions (2 ms calls: about 15 in 30 ms, fewer
    # on a loaded machine); the warm-up calls come before the timed ones
    assert 30 <= wall_ms < 200 and 5 <= len(times) <= 15 and len(calls) > len(times)
    assert all(2.0 <= t < 10.0 for t in times)  # ms, not s
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    grads = [type("T", (), {"grad": 1})()]
    assert 2.0 <= gp.do_bench(sleepy, warmup=0, rep=10, grad_to_none=grads) < 10.0
    assert grads[0].grad is None
