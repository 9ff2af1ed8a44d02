"""NCCL kernel names, NCCL's bandwidth conventions and the clock-alignment maths, exactly."""

import numpy as np
import pytest

from gpuprofile.tracing import nccl
from gpuprofile.tracing.align import collective_corrections, wall_shifts
from gpuprofile.tracing.analyses import covered, runs


@pytest.mark.parametrize("name, op, algo, proto", [
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "AllReduce", "RING", "LL"),
    ("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "AllGather", "RING", "LL"),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL128(ncclDevKernelArgsStorage<4096ul>)", "ReduceScatter", "RING", "LL128"),
    ("ncclDevKernel_Broadcast_RING_SIMPLE(ncclDevKernelArgsStorage<4096ul>)", "Broadcast", "RING", "SIMPLE"),
    ("ncclDevKernel_AllReduce_Sum_f16_TREE_LL128(x)", "AllReduce", "TREE", "LL128"),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "SendRecv", "", ""),
    ("void ncclKernel_Reduce_RING_LL_Sum_float(ncclDevComm*)", "Reduce", "RING", "LL"),
])
def test_parse_nccl_kernel(name, op, algo, proto):
    assert nccl.parse_kernel(name) == {"op": op, "algorithm": algo, "protocol": proto}


@pytest.mark.parametrize("name", ["gemm(float*)", "my_ncclDevKernel_AllReduce", "nccl_helper"])
def test_other_kernels_are_not_nccl(name):
    assert nccl.parse_kernel(name) is None


def test_canonical_op_from_torch_names():
    assert [nccl.canonical_op(x) for x in ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor",
                                           "broadcast", "all_to_all_single", "barrier")] == \
        ["AllReduce", "AllGather", "ReduceScatter", "Broadcast", "AllToAll", "barrier"]


def test_bus_factors_follow_nccl_tests():
    assert nccl.bus_factor("AllReduce", 2) == 1.0
    assert nccl.bus_factor("AllReduce", 4) == 1.5
    assert nccl.bus_factor("AllReduce", 8) == 1.75
    assert nccl.bus_factor("AllGather", 4) == nccl.bus_factor("ReduceScatter", 4) == 0.75
    assert nccl.bus_factor("Broadcast", 4) == nccl.bus_factor("Reduce", 8) == 1.0
    assert nccl.bus_factor("SendRecv", 2) == 1.0
    assert nccl.bus_factor("Generic", 2) is None
    with pytest.raises(ValueError):
        nccl.bus_factor("AllReduce", 0)


def test_bandwidth():
    assert nccl.bandwidth("AllReduce", 1_000_000, 1_000, 4) == (1000.0, 1500.0)  # GB/s
    assert nccl.bandwidth("AllGather", 800, 100, 8) == (8.0, 7.0)
    assert nccl.bandwidth("AllReduce", None, 100, 2) == (None, None)
    assert nccl.bandwidth("AllReduce", 100, 0, 2) == (None, None)
    assert nccl.bandwidth("Generic", 100, 10, 2) == (10.0, None)


def test_wall_shifts_and_their_bound():
    pairs = [{"cupti_ns": 100, "wall_ns": 10_000, "uncertainty_ns": 50},
             {"cupti_ns": 5_000, "wall_ns": 10_300, "uncertainty_ns": 80},
             {"cupti_ns": 0, "wall_ns": 9_000, "uncertainty_ns": 10}]
    shifts, bound = wall_shifts([0, 4_000, 0], pairs)
    # wall at each trace's zero: 9900, 9300, 9000
    assert shifts == [900, 300, 0]
    assert bound == 130
    assert wall_shifts([5], [pairs[0]]) == ([0], 0)


def test_collective_corrections_recover_offsets_with_jitter():
    rng = np.random.default_rng(7)
    true_end = np.cumsum(rng.integers(10_000, 90_000, 200))
    skew = np.array([0, 40_000, -15_000, 7_000])
    jitter = rng.integers(-300, 301, (4, 200))  # ranks leave a collective within 0.6 us
    ends = true_end[None, :] + skew[:, None] + jitter
    corr, spread_med, spread_max = collective_corrections(ends)
    recovered = np.array(corr) + skew
    assert np.ptp(recovered) <= 100  # the relative offsets are found to within the jitter's median
    assert 0 < spread_med <= spread_max <= 1_200 + 2 * 100


def test_collective_corrections_without_collectives():
    assert collective_corrections(np.empty((3, 0))) == ([0, 0, 0], None, None)


def _union(start, end, lo=-(2**62), hi=2**62):
    return int(covered(runs(start, end), [lo], [hi])[0])


def test_union_of_intervals_inside_windows():
    assert _union([0, 5, 20], [10, 15, 30]) == 25
    assert _union([0, 5, 20], [10, 15, 30], lo=8, hi=25) == 12
    assert _union([0, 0], [10, 10]) == 10
    assert _union([], []) == 0
    assert _union([5], [3]) == 0
    # many windows at once, edges inside runs, between runs and beyond both ends
    r = runs([20, 0, 5, 40], [30, 10, 15, 41])  # runs [0, 15), [20, 30), [40, 41)
    assert covered(r, [-5, 3, 15, 25, 29, 50, 7], [2, 22, 20, 45, 29, 60, 7]).tolist() == [
        2, 14, 0, 6, 0, 0, 0]


def test_region_bytes_only_from_a_plain_size_of_the_same_collective():
    from gpuprofile.tracing.nccl import region_bytes

    assert region_bytes("collective AllReduce 4096 B", "AllReduce") == 4096
    assert region_bytes("collective all_reduce 4096 B", "AllReduce") == 4096
    assert region_bytes("collective AllGather 4096 B", "AllReduce") is None
    assert region_bytes("collective AllReduce 4096 KB", "AllReduce") is None
    assert region_bytes("step", "AllReduce") is None
    assert region_bytes("collective AllReduce \u00b2 B", "AllReduce") is None  # a digit, not ASCII
    assert region_bytes("collective AllReduce " + "9" * 30 + " B", "AllReduce") is None  # > int64
