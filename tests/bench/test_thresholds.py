"""--gpu-benchmark-compare-fail expressions (bench/thresholds.py) and the storage folder of
numbered runs (bench/storage.py): pure functions on fixed inputs, exact values."""

import math
import os
import shutil
import subprocess

import pytest

from gpuprofile.bench.storage import Storage, commit_info, machine_id, machine_info
from gpuprofile.bench.thresholds import Threshold, failure, parse


def test_parse_expressions_units_and_lists():
    got = parse(["median:5%,min:0.02ms", "mean:20us", "max:3", "p90:1.5s", "iqr:500ns",
                 "ops:10%", "ops:2000", " stddev : 1e-3 ms "])
    assert [(t.stat, t.value, t.percent) for t in got] == [
        ("median", 5.0, True), ("min", 0.02, False), ("mean", 0.02, False), ("max", 3.0, False),
        ("p90", 1500.0, False), ("iqr", 0.0005, False), ("ops", 10.0, True), ("ops", 2000.0, False),
        ("stddev", 0.001, False)]
    assert got[0].text == "median:5%" and parse(["median:5µs"])[0].value == 0.005
    # the micro sign (U+00B5) and the Greek mu (U+03BC, either case) both stand for the u of us
    assert [t.value for t in parse(["min:5\u00b5s", "min:5\u03bcs", "min:5\u039cS", "min:5US"])] == [0.005] * 4
    assert parse([]) == [] and parse(["", " , "]) == []


@pytest.mark.parametrize("expr, match", [
    ("median", "not STAT:N% or STAT:N\\[unit\\]"), ("median:five%", "not STAT"),
    ("median:-5%", "not STAT"), ("mode:5%", "unknown statistic 'mode'"),
    ("ops:5ms", "ops takes a percent"), ("median:5%%", "not STAT"), ("median:1e999%", "finite"),
    # letters that case-insensitive matching would take for ASCII ones: a clear error, no KeyError
    ("median:5\u017f", "unknown unit '\u017f'"), ("median:5m\u017f", "unknown unit 'm\u017f'"),
    ("median:5\u212a", "unknown unit"), ("median:5\u00b5", "unknown unit"), ("median:5ks", "unknown unit 'ks'"),
    ("\u017ftddev:5%", "unknown statistic '\u017ftddev'"), ("median:5 m", "unknown unit 'm'"),
])
def test_parse_refuses_what_is_not_an_expression(expr, match):
    with pytest.raises(ValueError, match=match):
        parse([expr])


BASE = {"median_ms": 1.0, "min_ms": 0.9, "max_ms": 2.0, "mean_ms": 1.1, "stdev_ms": 0.1,
        "iqr_ms": 0.05, "p10_ms": 0.95, "p90_ms": 1.3}


def one(expr):
    (t,) = parse([expr])
    return t


def test_plain_statistics_grow_by_percent_or_by_ms():
    now = {**BASE, "min_ms": 0.99, "mean_ms": 1.1, "stdev_ms": 0.2}
    assert failure(one("min:10%"), now, BASE) is None  # +10.0 % is not more than 10 %
    assert "min:5%: min 0.99 ms vs saved 0.9 ms, up by 10%" in failure(one("min:5%"), now, BASE)
    assert failure(one("min:0.1ms"), now, BASE) is None
    assert "up by 0.09 ms (more than 0.05 ms)" in failure(one("min:50us"), now, BASE)
    assert "stddev" in failure(one("stddev:50%"), now, BASE)
    assert failure(one("mean:0%"), now, BASE) is None  # unchanged
    zero = {**BASE, "iqr_ms": 0.0}
    assert failure(one("iqr:5%"), zero, zero) is None
    assert failure(one("iqr:5%"), BASE, zero) is not None  # from 0 to 0.05: an infinite growth


def test_ops_fail_when_they_fall():
    slower = {**BASE, "mean_ms": 1.21}  # 1000/1.21 = 826.4 ops/s vs 909.1: down 9.1 %
    assert failure(one("ops:10%"), slower, BASE) is None
    assert "down by 9.091% (more than 5%)" in failure(one("ops:5%"), slower, BASE)
    assert "ops/s" in failure(one("ops:50"), slower, BASE)
    assert failure(one("ops:5%"), {**BASE, "mean_ms": 0.5}, BASE) is None  # faster


def test_median_uses_the_confidence_intervals():
    t = one("median:5%")
    assert failure(t, BASE, BASE, interval=(1.04, 1.3)) is None  # may be within 5 %
    why = failure(t, {**BASE, "median_ms": 1.2}, BASE, interval=(1.06, 1.3))
    assert "slower by more than 5 % with 95 % confidence (at least 1.060x" in why
    assert failure(t, BASE, BASE, interval=(math.nan, math.nan)) is not None  # fails closed
    a = one("median:0.1ms")
    assert failure(a, BASE, BASE, interval=((1.2, 1.3), (1.0, 1.1))) is None  # 0.1 ms at least
    assert "at least 0.15 ms" in failure(a, BASE, BASE, interval=((1.25, 1.3), (1.0, 1.1)))
    # without intervals the median is compared plainly
    assert failure(t, {**BASE, "median_ms": 1.04}, BASE) is None
    assert failure(t, {**BASE, "median_ms": 1.06}, BASE) is not None


@pytest.mark.parametrize("bad", [None, math.nan, math.inf, -1.0, 0.0, "1", True])
def test_a_value_that_cannot_be_compared_fails(bad):
    why = failure(Threshold("min", 5.0, True, "min:5%"), {**BASE, "min_ms": bad}, BASE)
    assert why is not None and "cannot compare" in why
    assert "cannot compare" in failure(Threshold("p10", 5.0, True, "p10:5%"), BASE, {"median_ms": 1})


# ---- storage ----------------------------------------------------------------------------------

def test_machine_id_and_info_without_a_gpu_say_so():
    info = {"system": "Linux", "python_implementation": "CPython", "python_version": "3.12.4",
            "gpu": "NVIDIA H100 80GB HBM3"}
    assert machine_id(info) == "Linux-CPython-3.12-NVIDIA_H100_80GB_HBM3"
    assert machine_id({**info, "gpu": None}) == "Linux-CPython-3.12-no_gpu"
    assert machine_id({}) == "unknown-unknown-unknown-no_gpu"
    m = machine_info()
    for key in ("node", "machine", "python_version", "system", "gpu", "nvidia_driver",
                "cuda_driver", "cuda_runtime"):
        assert key in m
    assert m["cuda_runtime"].startswith("13.")  # the toolkit gpuprofile was built with


def test_runs_are_numbered_per_machine_and_found_by_number(tmp_path):
    st = Storage(f"file://{tmp_path}", "m")
    assert st.folder == os.path.join(str(tmp_path), "m") and st.runs() == []
    with pytest.raises(FileNotFoundError, match="no saved run in"):
        st.find("latest")
    commit = {"id": "abc123", "dirty": True}
    first = st.new_path(None, commit, "2026-11-25T10:15:00+00:00")
    assert os.path.basename(first) == "0001_abc123_20261125_101500_uncommitted-changes.json"
    os.makedirs(st.folder)
    open(first, "w").close()
    second = st.new_path("before fix/1", {"error": "no git"}, "2026-11-25T10:16:00+00:00")
    assert os.path.basename(second) == "0002_before_fix_1.json"
    open(second, "w").close()
    open(os.path.join(st.folder, "0002_before_fix_1.rank1.json"), "w").close()  # the same run
    open(os.path.join(st.folder, "notes.txt"), "w").close()
    assert os.path.basename(st.new_path(None, {"error": "x"}, "2026-11-25T10:17:00+00:00")) == \
        "0003_unversioned_20261125_101700.json"
    assert [n for n, _ in st.runs()] == [1, 2]
    assert st.find("latest") == second and st.find("1") == first and st.find("0002") == second
    for rank in (0, 1):  # a run of a two-rank job: one file per rank, one run
        open(os.path.join(st.folder, f"0003_job.rank{rank}.json"), "w").close()
    assert st.runs()[-1] == (3, os.path.join(st.folder, "0003_job.json"))
    assert os.path.basename(st.new_path("next", {}, "")) == "0004_next.json"
    with pytest.raises(FileNotFoundError, match="no run numbered 7"):
        st.find("7")
    with pytest.raises(FileNotFoundError, match="nope.json: no such file"):
        st.find(str(tmp_path / "nope.json"))
    assert st.find(first) == first


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_commit_info_of_a_repository_and_outside_one(tmp_path):
    assert "error" in commit_info(tmp_path)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "f.txt").write_text("a")
    subprocess.run([*git, "add", "f.txt"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "one"], cwd=tmp_path, check=True)
    info = commit_info(tmp_path)
    assert len(info["id"]) == 40 and info["dirty"] is False and info["branch"] == "main"
    assert info["project"] == tmp_path.name and info["time"].startswith("20")
    (tmp_path / "f.txt").write_text("b")
    assert commit_info(tmp_path)["dirty"] is True
