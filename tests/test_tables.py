"""Tables out (gpuprofile/_tables.py): to_pandas() and to_csv() of every table-like result, on
results built from known numbers, and the CLI's --csv. pandas is in the test extra; the tests
that need it skip without it, and one checks the message without it."""

import builtins
import csv
import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import pytest
import synthetic as S

import gpuprofile as gp
from gpuprofile._tables import Tabular, frame, require_pandas, write_csv
from gpuprofile.bench.files import FileComparison, FileRow
from gpuprofile.counters.stalls import KernelStalls, StallReport
from gpuprofile.tracing.merge import MergeResult
from gpuprofile.tracing.profile import Profile
from gpuprofile.tracing.pylines import LineTable
from gpuprofile.tracing.straggler import StragglerTable

pd = pytest.importorskip("pandas")


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def bench_result():
    r = gp.benchmark(lambda: None, clock="host", max_time=0.3, max_noise=0.5)
    return dataclasses.replace(r, name="op", median_ms=2.0, ci_low_ms=1.5, ci_high_ms=2.5,
                               round_medians_ms=[1.9, 2.1], rounds=2)


def test_region_report_and_stats():
    for name in ("a", "a", "b"):
        with gp.region(name):
            pass
    df = gp.report().to_pandas()
    assert list(df["region"]) == ["a", "b"] or list(df["region"]) == ["b", "a"]
    assert dict(zip(df["region"], df["count"], strict=True)) == {"a": 2, "b": 1}
    assert list(df.columns[:3]) == ["region", "count", "clock"] and "samples_ms" not in df.columns
    one = gp.stats("a").to_pandas()
    # RegionStats' fields without the samples, gpu_clock and no_gpu_work included
    assert one.shape == (1, 16) and one.loc[0, "region"] == "a" and one.loc[0, "count"] == 2
    assert {"gpu_clock", "no_gpu_work"} <= set(one.columns) and one.loc[0, "no_gpu_work"] == 0
    assert one.loc[0, "total_ms"] == gp.stats("a").total_ms


def test_benchmark_result_is_one_row_without_samples(bench_result, tmp_path):
    df = bench_result.to_pandas()
    assert df.shape[0] == 1 and df.loc[0, "name"] == "op" and df.loc[0, "median_ms"] == 2.0
    assert "samples" not in df.columns and df.loc[0, "round_medians_ms"] == [1.9, 2.1]
    rows = read_csv(bench_result.to_csv(tmp_path / "r.csv"))
    head, row = rows
    cell = dict(zip(head, row, strict=True))
    assert cell["median_ms"] == "2.0" and cell["round_medians_ms"] == "[1.9, 2.1]"
    assert cell["device"] == ""  # None: an empty cell


def test_comparisons(bench_result):
    slower = dataclasses.replace(bench_result, name="op", median_ms=4.0, ci_low_ms=3.9, ci_high_ms=4.1)
    cmp = gp.compare([bench_result, slower])
    df = cmp.to_pandas()
    assert list(df.columns) == ["name", "median_ms", "rel_noise", "ratio", "ratio_low",
                                "ratio_high", "verdict", "why"]
    assert list(df["verdict"]) == [r.verdict for r in cmp.rows] and df.loc[1, "ratio"] == 2.0
    assert df.loc[0, "verdict"] == "baseline" and list(df["median_ms"]) == [2.0, 4.0]
    rows = [FileRow("op", "a.json", 2.0, 0.01, 1.0, 1.0, 1.0, "baseline"),
            FileRow("op", "b.json", 3.0, 0.01, 1.5, 1.4, 1.6, "slower", rounds=3)]
    files = FileComparison("a.json", ["a.json", "b.json"], rows, []).to_pandas()
    assert list(files["file"]) == ["a.json", "b.json"] and list(files["rounds"]) == [1, 3]


def _profile():
    k, ext = S.kernels(6, regions=[1, 1, 0, 0, -1, -1])
    recs = S.region_records([("step", -1, 0, 10**9, False), ("attn", 0, 10, 10**8, False)])
    return Profile._from_window(S.window(k, ext), recs, S.LIMITS)


def test_profile_record_tables_and_summary():
    p = _profile()
    kernels = p.to_pandas()
    assert len(kernels) == 6 and list(kernels.columns) == list(p.kernels.dtype.names)
    assert (kernels["duration_ns"] == 1000).all() and list(kernels["name"]) == list(p.kernels["name"])
    assert len(p.to_pandas("memcpy")) == 0 and list(p.to_pandas("memset").columns) == list(p.memset.dtype.names)
    with pytest.raises(ValueError, match="table must be one of"):
        p.to_pandas("kernel")
    s = p.summary()
    by_kernel = s.to_pandas()
    assert list(by_kernel["kernel"]) == [r.key for r in s.by_kernel] and (by_kernel["calls"] == 2).all()
    by_region = s.to_pandas(by="region").set_index("region")
    assert by_region.loc["attn", "kernels"] == 2 and by_region.loc["(no region)", "kernels"] == 2
    assert len(s.to_pandas(by="memory")) == 0
    with pytest.raises(ValueError, match="by must be one of"):
        s.to_pandas(by="stream")


def test_line_table():
    rows = [{"line": "a.py:3", "source": "x()", "rows": 2, "kernels": 2, "gpu_ms": 1.5,
             "share": 0.75, "mean_us": 750.0},
            {"line": "b.py:9", "source": "y()", "rows": 1, "kernels": 1, "gpu_ms": 0.5,
             "share": 0.25, "mean_us": 500.0}]
    table = LineTable(rows, "line", 2.0)
    df = table.to_pandas()  # the printed headers' names, share in percent as printed
    assert list(df.columns) == ["line", "backward", "rows", "kernels", "gpu_ms", "share_pct",
                                "mean_us", "source", "function"]
    assert list(df["line"]) == ["a.py:3", "b.py:9"] and list(df["gpu_ms"]) == [1.5, 0.5]
    assert list(df["share_pct"]) == [75.0, 25.0] and "75.0" in str(table) and "share %" in str(table)


def test_stall_report_missing_reasons_are_nan_and_empty(tmp_path):
    report = StallReport([KernelStalls("flash", 10, {"wait": 7, "barrier": 3}, {}),
                          KernelStalls("gemm", 5, {"math": 5}, {})], {"total_samples": 15}, 6, [])
    df = report.to_pandas()
    assert list(df.columns) == ["kernel", "samples", "wait", "barrier", "math"]
    assert df.loc[0, "wait"] == 7 and math.isnan(df.loc[1, "wait"]) and df.loc[1, "math"] == 5
    assert read_csv(report.to_csv(tmp_path / "s.csv")) == [
        ["kernel", "samples", "wait", "barrier", "math"], ["flash", "10", "7", "3", ""],
        ["gemm", "5", "", "", "5"]]


def test_straggler_and_merge_tables():
    rows = [{"step": 0, "rank": 0, "compute_ns": 10, "collective_ns": 5, "wait_ns": 1},
            {"step": 0, "rank": 1, "compute_ns": 12, "collective_ns": 4, "wait_ns": 0}]
    table = StragglerTable("step", 2, rows, [1])
    df = table.to_pandas()
    assert list(df.columns) == ["step", "rank", "compute_ms", "collective_ms", "wait_ms", "arrived_last"]
    assert list(df["arrived_last"]) == [False, True] and list(df["compute_ms"]) == [1e-5, 1.2e-5]
    merged = MergeResult("m.json", [], {}, [{"op": "AllReduce", "bytes": 64, "transfer_ns": 9,
                                             "busbw_gbps": None}], table)
    assert merged.to_pandas().loc[0, "op"] == "AllReduce" and len(merged.straggler.to_pandas()) == 2


def test_csv_is_written_atomically_and_keeps_the_old_file_on_error(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("old\n")

    class Boom:
        def __str__(self):
            raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        write_csv(path, [{"a": 1}, {"a": Boom()}])
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["t.csv"]
    write_csv(path, [{"a": 1, "b": float("nan")}, {"b": [1.0, float("inf")], "c": {"k": None}}])
    assert read_csv(path) == [["a", "b", "c"], ["1", "", ""], ["", "[1.0, null]", '{"k": null}']]


def test_frame_of_rows_with_an_index():
    df = frame([{"k": "x", "v": 1}, {"k": "y", "v": 2}], index="k")
    assert df.loc["y", "v"] == 2 and list(df.columns) == ["v"]
    assert frame([]).empty


def test_without_pandas_the_error_says_what_to_do(monkeypatch):
    real = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas":
            raise ImportError("No module named 'pandas'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(ImportError, match=r"to_pandas\(\) needs pandas.*pip install pandas"):
        require_pandas()


def test_every_tabular_result_defines_its_rows():
    import importlib

    for module in ("regions", "bench.result", "bench.files", "counters.result", "counters.stalls",
                   "tracing.pylines", "tracing.straggler", "tracing.merge"):
        importlib.import_module(f"gpuprofile.{module}")
    kinds = {c.__name__ for c in _subclasses(Tabular)}
    assert kinds >= {"RegionStats", "Report", "BenchmarkResult", "Comparison", "FileComparison",
                     "MetricsResult", "StallReport", "LineTable", "StragglerTable", "MergeResult"}
    for c in _subclasses(Tabular):
        assert c.table_rows is not Tabular.table_rows, c


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


# ---- the CLI's --csv --------------------------------------------------------------------------


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "gpuprofile", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def test_cli_bench_and_compare_write_csv(tmp_path):
    out = _cli("bench", "--clock", "host", "--max-time", "0.3", "--max-noise", "0.5", "--name", "s",
               "--json", "a.json", "--csv", "a.csv", "sum(range(10))", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "gpuprofile bench: table written to a.csv" in out.stderr
    head, row = read_csv(tmp_path / "a.csv")
    saved = json.loads((tmp_path / "a.json").read_text())
    cell = dict(zip(head, row, strict=True))
    assert cell["name"] == "s" and float(cell["median_ms"]) == saved["median_ms"]
    out = _cli("compare", "a.json", "a.json", "--csv", "c.csv", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = read_csv(tmp_path / "c.csv")
    assert rows[0] == ["name", "file", "median_ms", "rel_noise", "ratio", "ratio_low", "ratio_high",
                       "verdict", "rounds", "why"]
    assert [r[0] for r in rows[1:]] == ["s", "s"] and rows[1][7] == "baseline"


def test_cli_refuses_an_unwritable_csv_before_measuring(tmp_path):
    out = _cli("bench", "--csv", str(tmp_path), "1 + 1", cwd=tmp_path)
    assert out.returncode == 2 and f"gpuprofile bench: error: cannot write {tmp_path}: " in out.stderr
    script = tmp_path / "s.py"
    script.write_text("raise SystemExit('must not run')\n")
    for command in ("metrics", "stalls"):
        out = _cli(command, "--csv", str(tmp_path), str(script), cwd=tmp_path)
        assert out.returncode == 2, out.stderr
        assert f"gpuprofile {command}: error: cannot write {tmp_path}: " in out.stderr
        assert "must not run" not in out.stderr


def test_records_array_frame_keeps_every_field():
    arr = np.zeros(2, dtype=[("a", "i8"), ("b", "f8", (2,))])
    arr["b"][1] = [1.5, 2.5]
    from gpuprofile._tables import array_frame

    df = array_frame(arr)
    assert list(df.columns) == ["a", "b"] and list(df.loc[1, "b"]) == [1.5, 2.5]


def test_column_formatters_write_what_the_one_value_formatters_write():
    import math
    import random

    from gpuprofile._format import fmt, fmt_column
    from gpuprofile.bench.result import fmt_time, fmt_times

    rng = random.Random(7)
    values = [0.0, -0.0, 1.0, 1e-3, 0.999999999, 9999.4, 9999.5, 1e4, -1e4, 999.95, 999.9999, 1e3,
              math.nan, math.inf, -math.inf, None, True, 3, -2.5, 1e-300, 1e300, "x"]
    values += [rng.choice([-1, 1]) * 10 ** rng.uniform(-12, 12) for _ in range(5000)]
    for digits in (3, 4, 6):
        assert fmt_column(values, digits) == [fmt(v, digits) for v in values]
    durations = [v for v in values if not isinstance(v, str) and not isinstance(v, bool)]
    assert fmt_times(durations) == [fmt_time(v) for v in durations]
