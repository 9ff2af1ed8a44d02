"""Statistics behind gpuprofile.benchmark, on fixed samples with exact expected values."""

import math

import numpy as np
import pytest

from gpuprofile import _stats
from gpuprofile.bench.benchmark import throughput
from gpuprofile.bench.result import throttle_reason_names


@pytest.mark.parametrize(
    "n, ranks",
    [
        (5, None),  # 2 * 2**-5 = 6.25 % > 5 %: no interval reaches 95 %
        (6, (1, 6)),  # coverage 1 - 2/64 = 96.9 %
        (10, (2, 9)),  # 1 - 2 * 11/1024 = 97.9 %
        (20, (6, 15)),
        (100, (40, 61)),
    ],
)
def test_median_ci_ranks_match_binomial_tables(n, ranks):
    assert _stats.median_ci_ranks(n) == ranks


def test_median_ci_ranks_coverage_is_the_largest_below_alpha():
    n, (low, _) = 37, _stats.median_ci_ranks(37)
    tail = sum(math.comb(n, k) for k in range(low)) / 2**n
    tail_next = sum(math.comb(n, k) for k in range(low + 1)) / 2**n
    assert tail <= 0.025 < tail_next


def test_median_ci_ranks_normal_approximation_continues_the_exact_ranks():
    exact = _stats.median_ci_ranks(5000)
    approx = _stats.median_ci_ranks(5001)
    assert approx[0] - exact[0] in (0, 1)
    assert approx == (2431, 2571)


def test_median_ci_on_fixed_samples():
    samples = [7.0, 1.0, 10.0, 3.0, 5.0, 2.0, 9.0, 4.0, 6.0, 8.0]
    assert _stats.median_ci(samples) == (2.0, 9.0)
    assert math.isnan(_stats.median_ci([1.0, 2.0, 3.0])[0])


def test_rel_noise_on_fixed_samples():
    # median 5.5, CI [2, 9]: half-width 3.5
    assert _stats.rel_noise(np.arange(1.0, 11.0)) == pytest.approx(3.5 / 5.5, abs=0, rel=1e-15)
    assert _stats.rel_noise([1.0] * 10) == 0.0
    assert _stats.rel_noise([1.0, 2.0]) == math.inf


def test_rel_half_width_edge_cases():
    assert _stats.rel_half_width(9.0, 11.0, 10.0) == 0.1
    assert _stats.rel_half_width(0.0, 0.0, 0.0) == 0.0
    assert _stats.rel_half_width(0.0, 1.0, 0.0) == math.inf
    assert _stats.rel_half_width(math.nan, 1.0, 1.0) == math.inf


def test_ratio_interval_is_conservative():
    assert _stats.ratio_interval(2.0, 4.0, 1.0, 2.0) == (1.0, 4.0)
    # a low end of 0 (an interval widened by a clock's resolution) makes that side 0 or inf
    assert _stats.ratio_interval(0.0, 1.0, 1.0, 2.0) == (0.0, 1.0)
    assert _stats.ratio_interval(1.0, 2.0, 0.0, 2.0) == (0.5, math.inf)
    for bad in ((-1.0, 1.0, 1.0, 2.0), (1.0, 0.0, 1.0, 2.0), (1.0, 2.0, math.nan, 2.0)):
        assert all(map(math.isnan, _stats.ratio_interval(*bad)))


def test_throughput_exact_values():
    got = throughput(1.0, flops=2e9, nbytes=1e9, peak_tflops=100.0, peak_gbps=1000.0)
    assert got == dict(tflops=2.0, gbps=1000.0, pct_peak_flops=2.0, pct_peak_bw=100.0,
                       arithmetic_intensity=2.0, ridge_point=100.0, bound="memory")
    compute = throughput(0.5, flops=1e12, nbytes=1e9, peak_tflops=100.0, peak_gbps=1000.0)
    assert compute["tflops"] == 2000.0 and compute["bound"] == "compute"


def test_throughput_without_peaks_or_bytes():
    got = throughput(2.0, flops=4e9, nbytes=None, peak_tflops=None, peak_gbps=None)
    assert got["tflops"] == 2.0 and got["pct_peak_flops"] is None and got["bound"] is None
    assert throughput(0.0, flops=1.0, nbytes=1.0, peak_tflops=1.0, peak_gbps=1.0)["tflops"] is None


def test_throttle_reason_names():
    assert throttle_reason_names(None) == []
    assert throttle_reason_names(0x1) == []  # idle is what a between-batches sample always sees
    assert throttle_reason_names(0x4 | 0x40 | 0x1) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert throttle_reason_names(0x1000) == ["0x1000"]
