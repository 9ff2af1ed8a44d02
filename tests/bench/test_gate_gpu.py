"""The gate's guarantees on a GPU (marker `gpu`): GPU samples, quantised by 32 ns timestamps, never
claim a zero-width interval; rounds on the GPU clock merge into one trustworthy result; a saved
GPU result survives the round trip and is accepted by the gate."""

import pytest

import gpuprofile as gp
from gpuprofile import kernels
from gpuprofile.bench import gate
from gpuprofile.bench.result import BenchmarkResult

pytestmark = pytest.mark.gpu


def test_gpu_intervals_include_the_timestamp_step():
    r = gp.benchmark(kernels.spin, 50_000)
    assert r.resolution_ms >= 32e-6 and r.rel_noise > 0, repr(r)
    assert r.ci_low_ms < r.median_ms < r.ci_high_ms and gate.problem(r) is None, repr(r)
    assert r.converged, repr(r)  # the stopping rule is not held up by the clock's steps


def test_gpu_rounds(tmp_path):
    r = gp.benchmark(kernels.spin, 5_000, rounds=3, max_time=1)
    assert r.rounds == 3 and len(r.round_medians_ms) == 3 and r.clock in ("cupti", "gpu"), repr(r)
    assert r.ci_low_ms <= min(r.round_medians_ms) and r.ci_high_ms >= max(r.round_medians_ms)
    assert gate.problem(r) is None and 0.004 < r.median_ms < 0.008, repr(r)
    assert r.sm_clock_mhz_end is not None and r.first_call_ms > 0
    back = BenchmarkResult.load(r.save(tmp_path / "r.json"))
    assert back == r and gate.problem(back) is None
