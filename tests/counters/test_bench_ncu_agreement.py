"""benchmarks/bench_ncu_agreement.py's pure parts on any machine: its arguments, the case table
and the summary table (its GPU run is tests/counters/test_ncu_agreement_gpu.py and the
benchmark itself)."""

import math

import pytest
from scripts import load_benchmark

from gpuprofile.counters.metric_sets import DRAM_READ, DURATION
from gpuprofile.counters.ncu import AGREEMENT_METRICS

agreement = load_benchmark("bench_ncu_agreement")


def test_arguments_default_to_every_case_and_both_cache_states():
    args = agreement.parse_args([])
    assert args.cases == list(agreement.CASES) and args.caches == ["all", "none"]
    assert args.child is None and args.output is None
    args = agreement.parse_args(["--case", "gemm", "--case", "attention", "--cache-control", "none"])
    assert args.cases == ["gemm", "attention"] and args.caches == ["none"]
    with pytest.raises(SystemExit):
        agreement.parse_args(["--case", "conv"])


def test_the_cases_cover_the_kernel_kinds_the_issue_names():
    assert {"gemm", "elementwise", "reduction", "attention", "sequence"} <= set(agreement.CASES)
    assert all(need in (None, "torch", "numpy") for _, need, _ in agreement.CASES.values())


def test_summary_rows_show_the_worst_kernel_per_metric():
    rows = [{"kernel": k, "name": "k", "metric": m, "gpuprofile": 1.0, "ncu": 1.0,
             "rel_diff": 0.0, "ok": True} for k in (0, 1) for m in AGREEMENT_METRICS]
    rows[len(AGREEMENT_METRICS) + 1].update(rel_diff=-0.05, ok=False)  # kernel 1, second metric
    rows[2].update(rel_diff=math.nan, ok=False)
    results = [{"case": "gemm", "cache_control": "all", "rows": rows},
               {"case": "sequence", "cache_control": "none", "skipped": "needs torch"}]
    table = agreement.summary_rows(results)
    assert table[0] == ["gemm", "all", DURATION, "+0.00 %", "ok"]
    assert table[1] == ["gemm", "all", AGREEMENT_METRICS[1], "-5.00 %", "DIFFERS"]
    assert table[2] == ["gemm", "all", AGREEMENT_METRICS[2], "+nan %", "DIFFERS"]
    assert table[-1] == ["sequence", "none", "-", "-", "needs torch"]
    assert len(table) == len(AGREEMENT_METRICS) + 1 and DRAM_READ in AGREEMENT_METRICS
