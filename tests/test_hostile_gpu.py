"""Hostile inputs with a device behind them (issue 23): the cases of tests/test_hostile.py whose
failure needs a GPU to show (on an H200, `kernels.empty((2**62, 4), "float32")` once returned an
array with nbytes == 0, and str-subclass region names aborted the GPU build)."""

import numpy as np
import pytest
from test_hostile import export_while_names_enter_regions

import gpuprofile as gp
from gpuprofile import _C

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("shape, dtype, dims", [
    ((2**62, 4), "float32", "(4611686018427387904, 4)"),
    ((2**31, 2**31, 4), "float16", "(2147483648, 2147483648, 4)"),
    ((2**61, 2**3), "bfloat16", "(2305843009213693952, 8)"),
])
def test_empty_size_beyond_64_bits_on_a_device(shape, dtype, dims):
    with pytest.raises(ValueError) as info:
        gp.kernels.empty(shape, dtype)
    assert str(info.value) == (f"shape {dims} of {dtype} is too large: its size in bytes does not "
                               "fit 64 bits")


@pytest.mark.parametrize("shape, dtype, nbytes", [
    ((3, 5), "float16", 30), ((2, 3, 4), "float32", 96), ((0, 7), "bfloat16", 0), ((), "float32", 4),
])
def test_empty_nbytes_is_the_exact_product(shape, dtype, nbytes):
    a = gp.kernels.empty(shape, dtype)
    assert a.shape == shape and a.nbytes == nbytes


def test_to_device_round_trip_after_refused_sizes():
    with pytest.raises(ValueError):
        gp.kernels.empty((2**62, 4), "float32")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert np.array_equal(gp.kernels.to_device(x).numpy(), x)


def test_records_with_hostile_names_on_device_events():
    raw = export_while_names_enter_regions()
    assert (raw["device"] >= 0).all() and np.isfinite(raw["gpu_ms"]).all()
    assert np.isfinite(gp.records()["gpu_ms"]).all()


def _runner(action):
    holder = {}

    def fn():
        return action(holder["runner"])

    holder["runner"] = _C.BenchRunner(fn, (), None, "cold", None, False, None)
    return holder["runner"]


@pytest.mark.parametrize("action, what", [
    (lambda r: r.batch(2, 0), "batch"),
    (lambda r: r.close(), "close"),
    (lambda r: r.first_call(), "first_call"),
])
def test_bench_runner_refuses_reentry_from_fn(action, what):
    runner = _runner(action)
    with pytest.raises(gp.GpuProfileError,
                       match=rf"BenchRunner.{what}\(\) called from inside fn or setup"):
        runner.batch(3, 0)
    with pytest.raises(gp.GpuProfileError, match="called from inside fn or setup"):
        runner.first_call()
    runner.close()
    with pytest.raises(gp.GpuProfileError, match="BenchRunner is closed"):
        runner.batch(1, 0)
