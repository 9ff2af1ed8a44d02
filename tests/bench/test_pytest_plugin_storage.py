"""The gpu_benchmark plugin at pytest-benchmark's level, driven through pytester: the storage
folder of numbered runs, autosave, compare with the newest run / a number / a path,
compare-fail expressions, only/skip, the pytest-benchmark JSON export read by `gpuprofile
compare`, samples on request, histograms, and host-clock rows without a mode. The benchmarks use
the host clock, so these tests behave the same with and without a GPU."""

import json
import os

import numpy  # noqa: F401  (inline pytester runs drop modules they import; numpy cannot load twice)
import pytest

from gpuprofile.bench.files import load_results
from gpuprofile.bench.storage import machine_id, machine_info
from gpuprofile.cli import main

pytest_plugins = ["pytester"]

QUICK = "clock='host', warmup=0, min_time=0.01, max_time=0.5, max_noise=0.5"

TESTS = f"""
import time
import pytest

def work(x):
    time.sleep(0.0005)
    return x * 2

@pytest.mark.gpu_benchmark(group="sleepers", {QUICK})
def test_bench(gpu_benchmark):
    assert gpu_benchmark(work, 21) == 42

@pytest.mark.gpu_benchmark({QUICK})
def test_bench_sum(gpu_benchmark):
    gpu_benchmark(sum, range(10))

def test_plain():
    assert work(1) == 2
"""


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(test_suite=TESTS)
    return pytester


def machine_folder(pytester):
    (folder,) = (pytester.path / ".gpu_benchmarks").iterdir()
    return folder


def saved(path):
    with open(path) as f:
        return json.load(f)


def scale_saved(path, scale):
    """Make a saved run `scale` times as fast as measured (every time statistic)."""
    data = saved(path)
    for r in data["results"]:
        for key in ("median_ms", "ci_low_ms", "ci_high_ms", "mean_ms", "min_ms", "max_ms",
                    "p10_ms", "p90_ms", "stdev_ms", "iqr_ms"):
            r[key] *= scale
        r["round_medians_ms"] = [m * scale for m in r.get("round_medians_ms") or []]
        r.pop("samples", None)
    path.write_text(json.dumps(data))


def test_autosave_numbers_runs_per_machine_and_compare_finds_them(suite):
    suite.runpytest("--gpu-benchmark-autosave").assert_outcomes(passed=3)
    suite.runpytest("--gpu-benchmark-save=tuned").assert_outcomes(passed=3)
    folder = machine_folder(suite)
    names = sorted(os.listdir(folder))
    assert names[0].startswith("0001_unversioned_") and names[1] == "0002_tuned.json"
    assert folder.name == machine_id(machine_info())  # .gpu_benchmarks/Linux-CPython-3.11-no_gpu
    data = saved(folder / names[0])
    assert set(data["machine_info"]) >= {"node", "gpu", "nvidia_driver", "cuda_driver", "cuda_runtime"}
    assert "error" in data["commit_info"] and data["datetime"].endswith("+00:00")
    assert all("samples" not in r for r in data["results"])
    latest = suite.runpytest("--gpu-benchmark-compare")
    latest.assert_outcomes(passed=3)
    latest.stdout.fnmatch_lines(["*saved*ratio*verdict*", f"compared with {folder / names[1]}"])
    first = suite.runpytest("--gpu-benchmark-compare=1")
    first.stdout.fnmatch_lines([f"compared with {folder / names[0]}"])
    missing = suite.runpytest("--gpu-benchmark-compare=7")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*--gpu-benchmark-compare=7: no run numbered 7 in*"])


def test_compare_with_an_empty_storage_says_so_and_passes(suite):
    result = suite.runpytest("--gpu-benchmark-compare", "--gpu-benchmark-compare-fail=median:5%")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*nothing compared: no saved run in*"])


def test_compare_fail_expressions_per_statistic(suite):
    base = suite.path / "base.json"
    # rounds on both sides: the median's interval spans runs, so the gate may call it slower
    suite.runpytest(f"--gpu-benchmark-save={base}", "--gpu-benchmark-rounds=3").assert_outcomes(passed=3)
    scale_saved(base, 0.1)  # the saved run was 10x faster
    result = suite.runpytest(f"--gpu-benchmark-compare={base}", "--gpu-benchmark-rounds=3",
                             "--gpu-benchmark-compare-fail=min:50%,median:5%",
                             "--gpu-benchmark-compare-fail=ops:20%")
    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines([
        "*test_bench_sum: min:50%: min * ms vs saved * ms, up by *% (more than 50%); median:5%: slower: "
        "*x (95 % * .. *) over 3+ rounds a side, host clock, threshold ±5 %: the whole interval is "
        "slower by more than the threshold; ops:20%: * ops/s vs saved * ops/s, down by*"])
    # 2x slower passes thresholds far above it (not max's: one preempted call moves it). In
    # milliseconds, not percent: a 136 ns host-clock sum under ASan on a loaded machine moved by
    # more than 2x between two runs, and once by more than the 2000 % this used to allow (CI,
    # 2026-11-26); no run of it grows by a second
    scale_saved(base, 5)  # now half the time measured first
    loose = suite.runpytest(f"--gpu-benchmark-compare={base}",
                            "--gpu-benchmark-compare-fail=median:1000ms,mean:1000ms")
    loose.assert_outcomes(passed=3)


@pytest.mark.parametrize("args, message", [
    (["--gpu-benchmark-compare-fail=median:5%"],
     "--gpu-benchmark-compare-fail needs --gpu-benchmark-compare*"),
    (["--gpu-benchmark-compare=base.json", "--gpu-benchmark-compare-fail=speed:5%"],
     "*--gpu-benchmark-compare-fail: 'speed:5%': unknown statistic 'speed'*"),
    (["--gpu-benchmark-only", "--gpu-benchmark-skip"], "*exclude each other*"),
    (["--gpu-benchmark-only", "--gpu-benchmark-disable"], "*exclude each other*"),
])
def test_usage_errors(suite, args, message):
    (suite.path / "base.json").write_text('{"results": []}')
    result = suite.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}"])


def test_only_and_skip_split_benchmarks_from_unit_tests(suite):
    only = suite.runpytest("--gpu-benchmark-only", "-rs")
    only.assert_outcomes(passed=2, skipped=1)
    only.stdout.fnmatch_lines(["*not a gpu_benchmark test (--gpu-benchmark-only)*"])
    skip = suite.runpytest("--gpu-benchmark-skip", "-rs")
    skip.assert_outcomes(passed=1, skipped=2)
    skip.stdout.fnmatch_lines(["*a gpu_benchmark test (--gpu-benchmark-skip)*"])


def test_json_export_with_samples_is_read_by_gpuprofile_compare(suite, capsys):
    out, base = suite.path / "out.json", suite.path / "base.json"
    result = suite.runpytest(f"--gpu-benchmark-json={out}", f"--gpu-benchmark-save={base}",
                             "--gpu-benchmark-save-data")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([f"saved 2 result(s) to {base}", f"wrote pytest-benchmark JSON to {out}"])
    doc = saved(out)
    assert [b["fullname"] for b in doc["benchmarks"]] == ["test_suite.py::test_bench",
                                                          "test_suite.py::test_bench_sum"]
    b = doc["benchmarks"][0]
    assert b["group"] == "sleepers" and b["name"] == "test_bench"
    assert b["stats"]["rounds"] == len(b["stats"]["data"]) and 4e-4 < b["stats"]["median"] < 0.05
    assert b["stats"]["ops"] == pytest.approx(1 / b["stats"]["mean"])
    assert len(saved(base)["results"][0]["samples"]) == saved(base)["results"][0]["iterations"]
    assert [r.name for r in load_results(out)] == [r.name for r in load_results(base)]
    assert main(["compare", str(base), str(out), "--fail-slower", "1"]) == 0  # the same run
    assert "test_suite.py::test_bench_sum" in capsys.readouterr().out


def test_histogram_svg_per_group_and_host_rows_without_mode(suite):
    prefix = suite.path / "plots" / "h"
    result = suite.runpytest(f"--gpu-benchmark-histogram={prefix}")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([f"wrote histogram {prefix}.svg", f"wrote histogram {prefix}-sleepers.svg"])
    for path in (f"{prefix}.svg", f"{prefix}-sleepers.svg"):
        with open(path) as f:
            assert "<svg" in f.read(2000)
    leftovers = [n for n in os.listdir(prefix.parent) if n.endswith(".tmp")]
    assert leftovers == []  # written through a temporary file and renamed
    # host-clock rows: the mode column says "-", never "cold"
    result.stdout.fnmatch_lines(["name*median*noise*iterations*mode*clock",
                                 "test_suite.py::test_bench_sum * -*host"])
    assert "cold" not in result.stdout.str()


def test_each_rank_saves_its_file_of_a_numbered_run_and_compares_with_it(suite, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    suite.runpytest("--gpu-benchmark-autosave").assert_outcomes(passed=3)
    (run,) = machine_folder(suite).iterdir()
    assert run.name.startswith("0001_") and run.name.endswith(".rank1.json")
    assert saved(run)["rank"] == 1
    again = suite.runpytest("--gpu-benchmark-compare", "--gpu-benchmark-autosave")
    again.assert_outcomes(passed=3)
    again.stdout.fnmatch_lines([f"compared with {run}", "saved 2 result(s) to *0002_*.rank1.json"])


def test_columns_and_sort_of_the_summary(suite):
    result = suite.runpytest("--gpu-benchmark-columns=min,ops,rounds", "--gpu-benchmark-sort=min",
                             "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["name*min*ops*rounds", "test_suite.py::test_bench_sum * 1"])
    assert "median" not in result.stdout.str().split("gpu benchmarks")[1].split("note:")[0]
    bad = suite.runpytest("--gpu-benchmark-columns=median,speed")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--gpu-benchmark-columns: unknown column(s) [[]'speed'[]]: choose from*"])


def test_summary_rows_follow_the_sort():
    from gpuprofile.bench.suite_summary import summary_lines

    def entry(name, median, noise):
        return {"name": name, "group": None, "result": {
            "median_ms": median, "min_ms": median, "mean_ms": median, "rel_noise": noise,
            "iterations": 10, "mode": "cold", "clock": "cupti", "rounds": 1}}

    entries = [entry("a", 3.0, 0.01), entry("b", 1.0, 0.03), entry("c", 2.0, float("nan"))]
    def names(**kw):
        return [line.split()[0] for line in summary_lines(entries, **kw)[2:5]]
    assert names() == ["a", "b", "c"]
    assert names(sort="median") == ["b", "c", "a"]
    assert names(sort="noise") == ["a", "b", "c"]  # NaN last
    assert names(sort="ops") == ["a", "c", "b"]  # fewest operations per second first
    lines = summary_lines(entries, columns=("median", "ops"))
    assert lines[0].split() == ["name", "median", "ops"] and lines[2].split() == ["a", "3", "ms", "333.3"]


def test_a_saved_run_of_another_gpu_is_noted(suite):
    base = suite.path / "base.json"
    suite.runpytest(f"--gpu-benchmark-save={base}").assert_outcomes(passed=3)
    data = saved(base)
    data["machine_info"]["gpu"], data["machine_info"]["nvidia_driver"] = "Other GPU", "999.1"
    base.write_text(json.dumps(data))
    result = suite.runpytest(f"--gpu-benchmark-compare={base}")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["note: the saved run was measured with gpu Other GPU, nvidia_driver "
                                 "999.1, *; this run with gpu *"])
    suite.runpytest(f"--gpu-benchmark-save={base}").assert_outcomes(passed=3)
    same = suite.runpytest(f"--gpu-benchmark-compare={base}")
    assert "note: the saved run was measured with" not in same.stdout.str()


SLOW_SUITE = f"""
import time
import pytest

@pytest.mark.gpu_benchmark({QUICK})
def test_bench(gpu_benchmark):
    time.sleep(1.0)  # the runs overlap: each reserves its number while the others measure
    gpu_benchmark(sum, range(10))
"""


def test_concurrent_autosave_runs_each_get_their_own_number(pytester):
    """Four pytest processes started at once into one storage folder: four runs, numbered 1 to
    4, none overwritten, and --gpu-benchmark-compare=N then finds each."""
    import subprocess
    import sys

    pytester.makepyfile(test_slow=SLOW_SUITE)
    storage = pytester.path / "store"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           "test_slow.py", "--gpu-benchmark-autosave", f"--gpu-benchmark-storage={storage}"]
    runs = [subprocess.Popen(cmd, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True) for _ in range(4)]
    outputs = [p.communicate(timeout=300)[0] for p in runs]
    assert [p.returncode for p in runs] == [0] * 4, outputs
    (folder,) = storage.iterdir()
    names = sorted(os.listdir(folder))
    assert [n[:5] for n in names] == ["0001_", "0002_", "0003_", "0004_"], names  # no reservation left
    assert all(len(saved(folder / n)["results"]) == 1 for n in names)
    for number in "1234":
        found = pytester.runpytest_subprocess(  # what failed before: "several runs numbered 1"
            "test_slow.py", f"--gpu-benchmark-storage={storage}", f"--gpu-benchmark-compare={number}",
            "--gpu-benchmark-only", "-k", "nothing")
        assert found.ret == pytest.ExitCode.NO_TESTS_COLLECTED, found.stderr.str()


def test_reservations_hold_numbers_and_stale_ones_go(tmp_path):
    from gpuprofile.bench.storage import Storage

    st = Storage(tmp_path, "m")
    a, held_a = st.reserve(None, {"id": "c1"}, "2026-12-04T10:00:00")
    b, held_b = st.reserve("named", {}, "")
    assert os.path.basename(a).startswith("0001_c1_") and os.path.basename(b) == "0002_named.json"
    assert os.path.basename(held_a) == ".0001.reserved" and st.runs() == []  # not a run
    os.remove(held_a)  # run 1 saved nothing; 2 is still held: the next is 3
    c, held_c = st.reserve("x", {}, "")
    assert os.path.basename(c) == "0003_x.json"
    os.remove(held_c)
    with open(held_b, "w") as f:  # a run killed outright: its process is gone
        f.write("999999999")
    r0, _ = st.reserve("job", {}, "", rank_tag=".rank0")
    r1, _ = st.reserve("job", {}, "", rank_tag=".rank1")  # the ranks of one job share a number
    assert os.path.basename(r0) == os.path.basename(r1) == "0001_job.json"
    assert not os.path.exists(held_b)


@pytest.mark.parametrize("where", ["a_file/h", "a_folder"])
def test_a_histogram_path_that_cannot_be_written_is_a_usage_error_before_any_test(suite, where):
    (suite.path / "a_file").write_text("")
    (suite.path / "a_folder.svg").mkdir()  # PREFIX.svg is a folder
    result = suite.runpytest(f"--gpu-benchmark-histogram={suite.path / where}", "--gpu-benchmark-autosave")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpu-benchmark-histogram: cannot write *"])
    assert "passed" not in result.stdout.str() and "INTERNALERROR" not in result.stderr.str()
    leftovers = list((suite.path / ".gpu_benchmarks").rglob("*"))  # the reserved number given back
    assert [p for p in leftovers if p.is_file()] == []


def test_a_saved_run_whose_samples_are_a_number_is_a_usage_error(suite):
    suite.runpytest("--gpu-benchmark-autosave", "--gpu-benchmark-save-data").assert_outcomes(passed=3)
    (run,) = machine_folder(suite).iterdir()
    data = saved(run)
    data["results"][0]["samples"] = 5
    run.write_text(json.dumps(data))
    result = suite.runpytest("--gpu-benchmark-compare")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "INTERNALERROR" not in result.stderr.str()
    result.stderr.fnmatch_lines(["*--gpu-benchmark-compare: cannot read *: results[[]0[]] *"
                                 "'samples' must be a list of numbers, got int*"])
