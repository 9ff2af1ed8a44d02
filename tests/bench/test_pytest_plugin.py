"""The gpu_benchmark pytest plugin, driven through pytester: save, compare (pass and fail),
disable, pedantic, usage errors and pytest-xdist. The benchmarked functions use the host clock, so
these tests behave the same with and without a GPU."""

import json
import subprocess
import sys

import numpy  # noqa: F401  (inline pytester runs drop modules they import; numpy cannot load twice)
import pytest

pytest_plugins = ["pytester"]

QUICK = "clock='host', warmup=0, min_time=0.01, max_time=0.5, max_noise=0.5"

TESTS = f"""
import time
import pytest

def work(x):
    time.sleep(0.0005)
    return x * 2

@pytest.mark.gpu_benchmark(group="sleepers", {QUICK})
def test_one(gpu_benchmark):
    assert gpu_benchmark(work, 21) == 42
    assert gpu_benchmark.result is None or gpu_benchmark.result.median_ms >= 0.5

@pytest.mark.gpu_benchmark({QUICK})
def test_two(gpu_benchmark):
    gpu_benchmark(work, 1)
    gpu_benchmark(work, x=2)
    assert [r.name for r in gpu_benchmark.results] == [
        "test_bench_file.py::test_two", "test_bench_file.py::test_two#2"]
"""


@pytest.fixture
def bench_file(pytester):
    return pytester.makepyfile(test_bench_file=TESTS)


def saved(path):
    with open(path) as f:
        return json.load(f)


def test_save_writes_every_result_and_prints_a_summary(pytester, bench_file):
    out = pytester.path / "base.json"
    result = pytester.runpytest(f"--gpu-benchmark-save={out}")
    result.assert_outcomes(passed=2)
    data = saved(out)
    names = [r["name"] for r in data["results"]]
    assert names == ["test_bench_file.py::test_one", "test_bench_file.py::test_two",
                     "test_bench_file.py::test_two#2"]
    assert data["results"][0]["group"] == "sleepers" and data["results"][0]["clock"] == "host"
    assert "samples" not in data["results"][0]  # only on request (--gpu-benchmark-save-data)
    assert data["machine_info"]["python_version"] and "commit_info" in data and data["datetime"]
    result.stdout.fnmatch_lines(["*gpu benchmarks*", "group: sleepers", "*test_one*",
                                 f"saved 3 result(s) to {out}"])


def rewrite_baseline(path, scale, spread=None):
    """Scale the saved medians by `scale`; with `spread`, set each CI to [median/spread,
    median*spread], else scale it too."""
    data = saved(path)
    for r in data["results"]:
        if "samples" in r:
            r["samples"] = [x * scale for x in r["samples"]]  # the median stays its samples'
        for key in ("min_ms", "max_ms", "mean_ms", "p10_ms", "p90_ms", "resolution_ms"):
            r[key] *= scale  # the gate checks the interval against them (bench/gate.py)
        r["round_medians_ms"] = [x * scale for x in r.get("round_medians_ms") or []]
        m = r["median_ms"] * scale
        low, high = (m / spread, m * spread) if spread else (r["ci_low_ms"] * scale, r["ci_high_ms"] * scale)
        r["median_ms"], r["ci_low_ms"], r["ci_high_ms"] = m, low, high
        r["min_ms"], r["max_ms"] = min(r["min_ms"], low), max(r["max_ms"], high)
    path.write_text(json.dumps(data))


def test_compare_fails_on_a_significant_regression(pytester, bench_file):
    base = pytester.path / "base.json"
    pytester.runpytest(f"--gpu-benchmark-save={base}", "--gpu-benchmark-rounds=3").assert_outcomes(passed=2)
    rewrite_baseline(base, 0.1)  # the saved run was 10x faster
    result = pytester.runpytest(f"--gpu-benchmark-compare={base}", "--gpu-benchmark-rounds=3", "--gpu-benchmark-fail-slower=5")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*median:5.0%: slower: *over 3+ rounds a side, host clock, threshold ±5 %*"])
    result.stdout.fnmatch_lines(["*test_one*slower*"])


def test_compare_passes_when_faster_or_not_significant(pytester, bench_file):
    base = pytester.path / "base.json"
    pytester.runpytest(f"--gpu-benchmark-save={base}", "--gpu-benchmark-rounds=3").assert_outcomes(passed=2)
    rewrite_baseline(base, 10.0)
    faster = pytester.runpytest(f"--gpu-benchmark-compare={base}", "--gpu-benchmark-rounds=3", "--gpu-benchmark-fail-slower=5")
    faster.assert_outcomes(passed=2)
    faster.stdout.fnmatch_lines(["*test_one*faster*"])
    rewrite_baseline(base, 0.1, spread=2.0)  # back to the measured center, a 4x wide interval
    unsure = pytester.runpytest(f"--gpu-benchmark-compare={base}", "--gpu-benchmark-rounds=3", "--gpu-benchmark-fail-slower=5")
    unsure.assert_outcomes(passed=2)
    unsure.stdout.fnmatch_lines(["*test_one*inconclusive*"])  # a 4x wide interval: passes


def test_compare_without_fail_threshold_only_reports(pytester, bench_file):
    base = pytester.path / "base.json"
    pytester.runpytest(f"--gpu-benchmark-save={base}", "--gpu-benchmark-rounds=3").assert_outcomes(passed=2)
    rewrite_baseline(base, 0.1)
    result = pytester.runpytest(f"--gpu-benchmark-compare={base}", "--gpu-benchmark-rounds=3")
    result.assert_outcomes(passed=2)
    # one result is enough to show the column: under load a sleep's interval may be too wide to call
    result.stdout.fnmatch_lines(["*saved*ratio*verdict*", "*test_two *slower*"])


def test_disable_runs_each_function_once(pytester):
    pytester.makepyfile(test_disabled="""
        calls = []

        def test_once(gpu_benchmark):
            assert gpu_benchmark(lambda: calls.append(1) or "done") == "done"
            assert len(calls) == 1 and gpu_benchmark.result is None
    """)
    result = pytester.runpytest("--gpu-benchmark-disable")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*disabled (--gpu-benchmark-disable)*"])


def test_pedantic_runs_exact_rounds_with_setup(pytester):
    pytester.makepyfile(test_pedantic="""
        log = []

        def setup():
            log.append("setup")
            return (3,), {}

        def test_rounds(gpu_benchmark):
            out = gpu_benchmark.pedantic(lambda x: log.append(x) or x, setup=setup, rounds=7,
                                         warmup_rounds=2, clock="host")
            assert out == 3
            r = gpu_benchmark.result
            assert r.iterations == 7 and r.stop_reason == "fixed"
            assert log.count("setup") == log.count(3) == 1 + 1 + 2 + 7  # value, first, warm-up, timed

        def test_bad_rounds(gpu_benchmark):
            import pytest
            with pytest.raises(ValueError, match="rounds"):
                gpu_benchmark.pedantic(len, args=([],), rounds=0)
            with pytest.raises(TypeError, match="unknown options"):
                gpu_benchmark.pedantic(len, args=([],), x=1)
    """)
    pytester.runpytest().assert_outcomes(passed=2)


def test_usage_errors(pytester, bench_file):
    result = pytester.runpytest("--gpu-benchmark-fail-slower=5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpu-benchmark-fail-slower needs --gpu-benchmark-compare*"])
    missing = pytester.runpytest("--gpu-benchmark-compare=nope.json")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*cannot read nope.json*"])


def test_xdist_workers_results_are_merged(pytester, bench_file):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_more=f"""
        import pytest

        @pytest.mark.gpu_benchmark({QUICK})
        def test_three(gpu_benchmark):
            gpu_benchmark(sum, [1, 2])

        @pytest.mark.gpu_benchmark({QUICK})
        def test_four(gpu_benchmark):
            gpu_benchmark(sorted, [3, 1, 2])
    """)
    out = pytester.path / "merged.json"
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", f"--gpu-benchmark-save={out}")
    result.assert_outcomes(passed=4)
    names = [r["name"] for r in saved(out)["results"]]
    assert names == sorted(names) and len(names) == 5
    assert {n.split("::")[1] for n in names} == {"test_one", "test_two", "test_two#2", "test_three",
                                                 "test_four"}
    result.stdout.fnmatch_lines(["*gpu benchmarks*", "saved 5 result(s)*"])


def test_plugin_module_imports_no_numpy():
    code = "import sys, gpuprofile.pytest_plugin; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_each_rank_of_a_distributed_run_saves_and_compares_its_own_file(pytester, bench_file,
                                                                        monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    base = pytester.path / "base.json"
    result = pytester.runpytest(f"--gpu-benchmark-save={base}")
    result.assert_outcomes(passed=2)
    assert not base.exists()
    data = saved(pytester.path / "base.rank1.json")
    assert (data["rank"], data["world_size"]) == (1, 2)
    assert {(r["rank"], r["world_size"]) for r in data["results"]} == {(1, 2)}
    result.stdout.fnmatch_lines([f"saved 3 result(s) to {pytester.path / 'base.rank1.json'}"])
    rewrite_baseline(pytester.path / "base.rank1.json", 1.0, spread=100)
    pytester.runpytest(f"--gpu-benchmark-compare={base}").assert_outcomes(passed=2)
