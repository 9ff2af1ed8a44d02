"""MetricsResult.to_pandas()/to_csv() on a result built from known numbers. Here, not in
tests/test_tables.py: validating metric names loads CUPTI's perfworks host library, which the
ASan build cannot load (tools/sanitize.sh runs tests/counters under UBSan alone)."""

import csv

import pytest

from gpuprofile.counters import catalog as _catalog
from gpuprofile.counters.metric_sets import DURATION, SETS
from gpuprofile.counters.result import build

pd = pytest.importorskip("pandas")


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_metrics_result_has_a_row_per_metric_and_a_column_per_kernel(tmp_path):
    sol = list(SETS["sol"].metrics)
    infos = _catalog.validate(sol, "GH100")
    ranges = [("0", (100.0, 10.0, 80.0, 70.0, 1.9e9)), ("1", (300.0, 90.0, 5.0, 1.0, 1.9e9))]
    m = build("work.py", "kernel", sol, infos, ranges, ["flash(P)", "gemm(float*)"], passes=5,
              replay="user", range_mode="auto", calls=6, cost_s=1.0, setup_s=0.1, chip="GH100",
              sets=["sol"], notes=[], counter_data_bytes=1)
    df = m.to_pandas().set_index("metric")
    assert list(df.index) == sol
    assert list(df.columns) == ["unit", "aggregation", "total", "0: flash(P)", "1: gemm(float*)"]
    assert df.loc[DURATION, "total"] == 400.0 and df.loc[DURATION, "1: gemm(float*)"] == 300.0
    assert df.loc[DURATION, "aggregation"] == "sum"
    head, *body = read_csv(m.to_csv(tmp_path / "m.csv"))
    assert head[:3] == ["metric", "unit", "aggregation"] and len(body) == len(sol)
