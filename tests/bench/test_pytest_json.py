"""pytest-benchmark's JSON schema (bench/pytest_json.py): the export's stats on fixed samples,
exact values; reading it back; reading pytest-benchmark's own files in `gpuprofile compare`."""

import json
import math

import pytest

from gpuprofile.bench.files import ResultFileError, load_results
from gpuprofile.bench.pytest_json import export, is_pytest_benchmark, results_of
from gpuprofile.bench.result import BenchmarkResult
from gpuprofile.cli import main


def result_dict(samples, name="t.py::test_a", inner=1):
    import gpuprofile as gp

    r = gp.benchmark(sum, [1], clock="host", warmup=0, min_time=0.005, max_noise=0.9, name=name)
    d = r.to_dict()
    ordered = sorted(samples)
    d.update(samples=list(samples), median_ms=ordered[len(samples) // 2], ci_low_ms=ordered[1],
             ci_high_ms=ordered[-2], inner=inner)  # consistent, if not a real measurement
    return d


ENTRY_SAMPLES = [1.0, 2.0, 3.0, 4.0, 10.0]  # ms


def exported(include_data=False, inner=1):
    d = result_dict(ENTRY_SAMPLES, inner=inner)
    entries = [{"name": "t.py::test_a#2", "test": "t.py::test_a", "group": "g", "result": d}]
    return d, export(entries, {"node": "box", "gpu": None}, {"id": "abc", "dirty": False},
                     "2026-11-25T10:00:00+00:00", "0.1.0", include_data)


def test_export_has_pytest_benchmarks_layout_and_exact_stats():
    d, doc = exported(inner=4)
    assert set(doc) == {"machine_info", "commit_info", "benchmarks", "datetime", "version"}
    assert is_pytest_benchmark(doc) and not is_pytest_benchmark({"results": []})
    (b,) = doc["benchmarks"]
    assert (b["group"], b["name"], b["fullname"]) == ("g", "test_a#2", "t.py::test_a#2")
    assert set(b) == {"group", "name", "fullname", "params", "param", "extra_info", "options", "stats"}
    s = b["stats"]
    assert s["min"] == 0.001 and s["max"] == 0.01 and s["median"] == 0.003
    assert s["q1"] == 0.002 and s["q3"] == 0.004 and s["iqr"] == pytest.approx(0.002)
    assert s["mean"] == pytest.approx(0.004) and s["stddev"] == pytest.approx(math.sqrt(12.5) / 1e3)
    assert s["ops"] == pytest.approx(250.0)
    assert (s["iqr_outliers"], s["stddev_outliers"], s["outliers"]) == (1, 1, "1;1")  # the 10 ms
    assert (s["ld15iqr"], s["hd15iqr"]) == (0.001, 0.004)
    assert (s["rounds"], s["iterations"]) == (5, 4) and s["total"] == pytest.approx(0.08)
    assert "data" not in s and "samples" not in b["extra_info"]["gpuprofile"]
    assert b["extra_info"]["gpuprofile"]["ci_low_ms"] == d["ci_low_ms"]
    json.dumps(doc, allow_nan=False)  # strict JSON


def test_export_reads_back_with_or_without_samples():
    d, doc = exported(include_data=True)
    assert doc["benchmarks"][0]["stats"]["data"] == [0.001, 0.002, 0.003, 0.004, 0.01]
    (back,) = results_of(doc)
    assert back["samples"] == pytest.approx(ENTRY_SAMPLES)
    assert {k: back[k] for k in ("median_ms", "ci_low_ms", "ci_high_ms", "clock")} == {
        k: d[k] for k in ("median_ms", "ci_low_ms", "ci_high_ms", "clock")}
    d, doc = exported()
    assert "samples" not in results_of(doc)[0]  # a gate still has the saved interval
    assert BenchmarkResult.from_dict(results_of(doc)[0]).ci_high_ms == d["ci_high_ms"] == 4.0


def pytest_benchmark_file(path, data=True):
    """A file as pytest-benchmark writes it (its keys; host-timer seconds)."""
    samples = [0.0010, 0.0011, 0.0012, 0.0010, 0.0013, 0.0011, 0.0012, 0.0010]
    stats = {"min": 0.001, "max": 0.0013, "mean": 0.00111, "stddev": 0.0001, "rounds": 8,
             "median": 0.0011, "iqr": 0.0002, "q1": 0.001, "q3": 0.0012, "iqr_outliers": 0,
             "stddev_outliers": 2, "outliers": "2;0", "ld15iqr": 0.001, "hd15iqr": 0.0013,
             "ops": 900.9, "total": 0.00888, "iterations": 1}
    if data:
        stats["data"] = samples
    doc = {"machine_info": {"node": "x"}, "commit_info": {"id": "abc"}, "datetime": "2026",
           "version": "5.1.0", "benchmarks": [{"group": None, "name": "test_f",
                                               "fullname": "bench.py::test_f", "params": None,
                                               "param": None, "extra_info": {}, "options": {},
                                               "stats": stats}]}
    path.write_text(json.dumps(doc))
    return path


def test_compare_reads_pytest_benchmark_files(tmp_path, capsys):
    (r,) = load_results(pytest_benchmark_file(tmp_path / "theirs.json"))
    assert isinstance(r, BenchmarkResult) and r.name == "bench.py::test_f"
    assert r.clock == "host" and r.median_ms == pytest.approx(1.1) and len(r.samples) == 8
    assert r.ci_low_ms <= r.median_ms <= r.ci_high_ms and r.iterations == 8
    pytest_benchmark_file(tmp_path / "again.json")
    assert main(["compare", str(tmp_path / "theirs.json"), str(tmp_path / "again.json"),
                 "--fail-slower", "5"]) == 0
    assert "bench.py::test_f" in capsys.readouterr().out
    with pytest.raises(ResultFileError, match="without its samples has no interval.*--benchmark-save-data"):
        load_results(pytest_benchmark_file(tmp_path / "bare.json", data=False))


def test_malformed_pytest_benchmark_files_are_named(tmp_path):
    doc = {"machine_info": {}, "benchmarks": [{"stats": {}}]}
    (tmp_path / "a.json").write_text(json.dumps(doc))
    with pytest.raises(ResultFileError, match=r"benchmarks\[0\] is not a benchmark with a name"):
        load_results(tmp_path / "a.json")
    doc["benchmarks"][0] = {"fullname": "x", "stats": {"median": "fast", "data": [0.001] * 8}}
    (tmp_path / "a.json").write_text(json.dumps(doc))
    with pytest.raises(ResultFileError, match=r"stats\['median'\] must be a number"):
        load_results(tmp_path / "a.json")


@pytest.mark.parametrize("stats, match", [
    ({"median": 10**400, "data": [0.001] * 8}, r"stats\['median'\] is too large"),
    ({"median": 0.001, "data": [0.001] * 7 + [10**400]}, r"data: stats\['x'\] is too large"),
])
def test_integers_too_large_for_a_float_are_named(tmp_path, capsys, stats, match):
    """json reads 10**400 as an int that no float holds: a clear error, not OverflowError."""
    doc = {"machine_info": {}, "benchmarks": [{"fullname": "t::x", "stats": stats}]}
    (tmp_path / "big.json").write_text(json.dumps(doc))
    with pytest.raises(ResultFileError, match="big.json: benchmarks\\[0\\].*" + match):
        load_results(tmp_path / "big.json")
    assert main(["compare", str(tmp_path / "big.json"), str(tmp_path / "big.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuprofile compare: error: ") and err.count("\n") == 1


def test_an_entry_marked_as_ours_without_its_samples_is_named(tmp_path, capsys):
    """extra_info.gpuprofile of a result read from pytest-benchmark, exported again without
    stats.data: no samples, so no interval; said so, not KeyError."""
    d, doc = exported()
    own = doc["benchmarks"][0]["extra_info"]["gpuprofile"]
    own["mode"] = "pytest-benchmark"
    own.pop("samples", None)
    (tmp_path / "ours.json").write_text(json.dumps(doc))
    with pytest.raises(ResultFileError, match="without its samples has no interval"):
        load_results(tmp_path / "ours.json")
    assert main(["compare", str(tmp_path / "ours.json"), str(tmp_path / "ours.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_saved_samples_that_are_not_a_list_are_named(tmp_path, capsys):
    from gpuprofile.bench import gate

    d = result_dict(ENTRY_SAMPLES)
    for samples in (5, 2.5, True):
        d["samples"] = samples
        assert gate.problem(d) == f"'samples' must be a list of numbers, got {type(samples).__name__}"
    d["samples"] = 5
    (tmp_path / "run.json").write_text(json.dumps({"gpuprofile_benchmark_file": 1, "results": [d]}))
    assert main(["compare", str(tmp_path / "run.json"), str(tmp_path / "run.json")]) == 2
    err = capsys.readouterr().err
    assert "run.json" in err and "samples" in err and err.count("\n") == 1
