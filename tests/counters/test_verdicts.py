"""Verdicts on fixed numbers: bound from SOL, roofline placement, aggregation across kernels."""

import math

import pytest

from gpuprofile.counters.verdicts import HIGH, LOW, aggregation, bound_from_sol, combine, roofline_point


@pytest.mark.parametrize(
    "sm, mem, tensor, expected",
    [
        # The research's H100 kernels (cupti-feasibility.md, section B).
        (4.8, 85.3, None, "memory-bound"),  # 1 GiB copy
        (99.3, 0.07, None, "compute-bound"),  # FFMA chains
        (98.5, 0.31, 99.7, "compute-bound (tensor)"),  # WMMA
        (0.29, 44.0, None, "mixed"),  # pointer chase: DRAM 44 % busy, neither side high
        (0.5, 0.1, None, "latency-bound"),  # one-thread spin
        # Thresholds: >= 60 on one side, < 40 on both.
        (60.0, 10.0, None, "compute-bound"),
        (59.9, 10.0, None, "mixed"),
        (39.9, 39.9, None, "latency-bound"),
        (40.0, 0.0, None, "mixed"),
        (70.0, 75.0, None, "memory-bound"),
        (75.0, 75.0, None, "compute-bound"),
        (70.0, 10.0, 59.9, "compute-bound"),
    ],
)
def test_bound_from_sol(sm, mem, tensor, expected):
    v = bound_from_sol(sm, mem, tensor)
    assert v.bound == expected
    assert v.sm_pct == sm and v.memory_pct == mem


def test_bound_reasons_and_missing_values():
    assert str(bound_from_sol(99.3, 0.07)) == "compute-bound (SM 99.3 % of peak >= 60 %)"
    assert bound_from_sol(4.8, 85.3).reason == "memory 85.3 % of peak >= 60 %"
    assert bound_from_sol(0.5, 0.1).reason == "SM 0.5 % and memory 0.1 % both < 40 %"
    assert bound_from_sol(None, 10).bound == "unknown"
    assert bound_from_sol(float("nan"), 10).bound == "unknown"
    assert (HIGH, LOW) == (60.0, 40.0)
    assert bound_from_sol(1, 2).to_dict()["bound"] == "latency-bound"


def test_roofline_point_memory_side():
    # 1 GiB copy: no FLOPs, 2 GiB moved in 0.75 ms, peaks 60 TFLOP/s and 3 TB/s.
    p = roofline_point(0, 2 * 2**30, 0.75e-3, 60e12, 3e12)
    assert p.intensity == 0 and p.region == "memory"
    assert p.bytes_per_s == pytest.approx(2 * 2**30 / 0.75e-3)
    assert p.ridge == 20.0
    assert p.attainable_flops_per_s == 0 and math.isnan(p.efficiency)


def test_roofline_point_compute_side():
    p = roofline_point(flops=3.0e10, bytes_=1.0e6, seconds=1e-3, peak_flops_per_s=60e12,
                       peak_bytes_per_s=3e12)
    assert p.intensity == 30000.0
    assert p.region == "compute"
    assert p.attainable_flops_per_s == 60e12
    assert p.flops_per_s == pytest.approx(3e13)
    assert p.efficiency == pytest.approx(0.5)
    assert roofline_point(1.0, 0, 1.0, 1.0, 1.0).intensity == math.inf


def test_roofline_point_bad_input():
    with pytest.raises(ValueError, match="seconds must be positive"):
        roofline_point(1, 1, 0, 1, 1)
    with pytest.raises(ValueError, match="peak_bytes_per_s"):
        roofline_point(1, 1, 1, 1, float("nan"))
    with pytest.raises(ValueError, match=">= 0"):
        roofline_point(-1, 1, 1, 1, 1)


@pytest.mark.parametrize(
    "name, how",
    [
        ("dram__bytes_read.sum", "sum"),
        ("gpu__time_duration.sum", "sum"),
        ("sm__cycles_active.avg", "sum"),
        ("gpu__time_duration.max", "max"),
        ("dram__bytes_read.min", "min"),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "weighted"),
        ("lts__t_sector_hit_rate.pct", "weighted"),
        ("dram__bytes_read.sum.per_second", "weighted"),
        ("sm__warps_active.avg.per_cycle_active", "weighted"),
    ],
)
def test_aggregation(name, how):
    assert aggregation(name) == how


def test_combine():
    assert combine([1, 2, 3], [0, 0, 0], "sum") == 6
    assert combine([1, 5, 3], [1, 1, 1], "max") == 5
    assert combine([1, 5, 3], [1, 1, 1], "min") == 1
    # 90 % for 3 ns and 10 % for 1 ns: 70 % of the elapsed time.
    assert combine([90.0, 10.0], [3.0, 1.0], "weighted") == 70.0
    assert combine([90.0, 10.0], [0.0, 0.0], "weighted") == 50.0
    assert math.isnan(combine([], [], "sum"))
