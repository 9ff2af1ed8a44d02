"""to_pandas() frames as pandas users read them: numbers in numeric columns (a None among them
is NaN, not an object column), booleans as booleans, the columns named as the printed headers
(column_name), and to_pandas typed as returning pandas.DataFrame."""

import math
import re

import pytest
import synthetic as S

import gpuprofile as gp
from gpuprofile._tables import column_name, frame
from gpuprofile.regions import _HEADERS as REGION_HEADERS
from gpuprofile.tracing.profile import Profile
from gpuprofile.tracing.summary import _KERNEL_HEADERS, _REGION_HEADERS

pd = pytest.importorskip("pandas")


def test_column_names_of_headers():
    assert [column_name(h) for h in ("total ms", "% busy", "occupancy %", "GPU idle before us",
                                     "others' idle us", "no GPU work", "region")] == [
        "total_ms", "pct_busy", "occupancy_pct", "gpu_idle_before_us", "others_idle_us",
        "no_gpu_work", "region"]


def test_numbers_with_missing_values_are_numeric_and_booleans_boolean():
    df = frame([{"a": 1, "b": None, "c": True, "d": "x", "e": [1]},
                {"a": None, "b": 2.5, "c": None, "d": None, "e": None}])
    assert df["a"].dtype == "float64" and math.isnan(df.loc[1, "a"]) and df.loc[0, "a"] == 1.0
    assert df["b"].dtype == "float64" and df.loc[1, "b"] == 2.5
    assert str(df["c"].dtype) == "boolean" and df.loc[0, "c"] and df["c"].isna()[1]
    assert df["d"].dtype.kind not in "fib" and df["e"].dtype == object  # text and lists stay
    assert frame([{"x": None}, {"x": None}])["x"].dtype == "float64"  # nothing: NaN, as read_csv


def test_a_benchmark_results_numbers_are_numeric():
    r = gp.benchmark(lambda: None, clock="host", max_time=0.2, max_noise=0.5)
    df = r.to_pandas()
    objects = [c for c in df.columns if df[c].dtype.kind == "O"]
    for c in objects:  # what stays an object column is text or a list, never a number
        assert all(isinstance(v, (str, list)) or v is None for v in df[c]), c
    for c in df.columns:
        if re.search(r"_(ms|s|us|ns|mhz|gbps|tflops)$", c) and not isinstance(df.loc[0, c], list):
            assert df[c].dtype.kind in "fi", (c, df[c].dtype)


def test_summary_and_region_columns_are_the_printed_headers():
    k, ext = S.kernels(6, regions=[1, 1, 0, 0, -1, -1])
    recs = S.region_records([("step", -1, 0, 10**9, False), ("attn", 0, 10, 10**8, False)])
    s = Profile._from_window(S.window(k, ext), recs, S.LIMITS).summary()
    for headers, df in ((_KERNEL_HEADERS, s.to_pandas()), (_REGION_HEADERS, s.to_pandas(by="region"))):
        assert {column_name(h) for h in headers} <= set(df.columns), headers
    with gp.region("a"):
        pass
    assert {column_name(h) for h in REGION_HEADERS} <= set(gp.report().to_pandas().columns)


def test_to_pandas_is_typed():
    """Annotated pandas.DataFrame (imported under TYPE_CHECKING: pandas stays optional), so mypy
    with pandas' stubs types a frame's use; the Tabular results inherit it."""
    import inspect

    from gpuprofile._tables import Tabular
    from gpuprofile.tracing.summary import Summary

    for method in (Tabular.to_pandas, Summary.to_pandas, frame):
        assert inspect.signature(method).return_annotation == "pandas.DataFrame", method


def test_the_memory_table_is_in_mib_as_printed():
    from gpuprofile.tracing.summary import _MEMORY_HEADERS, Summary

    mib = 2**20
    s = Summary([], [], [dict(region="fwd", instances=2, peak_bytes=264 * mib,
                              peak_above_entry_bytes=256 * mib, allocations=1,
                              allocated_bytes=mib // 2)], 0, 0.0, 0.0, 0.0, 0, False)
    df = s.to_pandas(by="memory")
    assert list(df.columns) == [column_name(h) for h in _MEMORY_HEADERS] == [
        "region", "instances", "peak_mib", "peak_above_entry_mib", "allocations", "allocated_mib"]
    assert df.loc[0].tolist() == ["fwd", 2, 264.0, 256.0, 1, 0.5]
