"""A pytest-benchmark suite on gpu_benchmark: the same file runs under pytest-benchmark's
`benchmark` and, renamed, under `gpu_benchmark` (pedantic with every argument, target=,
extra_info, the benchmark marker's group), and the storage folder gpuprofile writes is read by
pytest-benchmark's own `compare`. Host clock without a GPU; the same on a GPU machine."""

import json
import os
import subprocess
import sys

import numpy  # noqa: F401  (inline pytester runs drop modules they import; numpy cannot load twice)
import pytest

pytest_plugins = ["pytester"]

# A newcomer's suite, written with pytest-benchmark's usual habits; only the fixture's name is
# gpuprofile's (NEWCOMER.replace("gpu_benchmark", "benchmark") is the pytest-benchmark original).
NEWCOMER = """
import pytest

CALLS = []


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def test_plain_call(gpu_benchmark):
    assert gpu_benchmark(fib, 12) == 144


@pytest.mark.benchmark(group="fib")
def test_pedantic_everything(gpu_benchmark):
    seen = []

    def setup():
        seen.append("setup")
        return (10,), {}

    def teardown(n):
        seen.append(("teardown", n))

    result = gpu_benchmark.pedantic(fib, setup=setup, teardown=teardown, rounds=5,
                                    warmup_rounds=2)
    assert result == 55
    assert seen.count(("teardown", 10)) == seen.count("setup")  # one each per round
    gpu_benchmark.extra_info["n"] = 10


@pytest.mark.benchmark(group="fib")
def test_pedantic_iterations_and_target(gpu_benchmark):
    gpu_benchmark.extra_info.update(n=8, note="iterations")
    assert gpu_benchmark.pedantic(target=fib, args=(8,), iterations=4, rounds=3) == 21


def test_pedantic_defaults(gpu_benchmark):
    assert gpu_benchmark.pedantic(CALLS.append, args=(1,)) is None
    assert 1 <= len(CALLS)


@pytest.mark.parametrize("kwargs, error", [
    (dict(setup=lambda: ((3,), {}), iterations=2), ValueError),
    (dict(args=(3,), setup=lambda: ((3,), {})), TypeError),
    (dict(args=(3,), rounds=0), ValueError),
])
def test_pedantic_errors(gpu_benchmark, kwargs, error):
    with pytest.raises(error):
        gpu_benchmark.pedantic(fib, **kwargs)
"""


def _suite(pytester):
    pytester.makepyfile(test_newcomer=NEWCOMER)


def _storage_file(root):
    found = [os.path.join(d, f) for d, _, files in os.walk(root) for f in files if f.endswith(".json")]
    assert len(found) == 1, found
    with open(found[0]) as f:
        return found[0], json.load(f)


def test_the_newcomers_suite_passes_on_gpu_benchmark(pytester):
    _suite(pytester)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--gpu-benchmark-autosave",
                                           "-p", "no:benchmark")
    result.assert_outcomes(passed=7)
    path, data = _storage_file(pytester.path / ".gpu_benchmarks")
    by_name = {r["name"].rpartition("::")[2]: r for r in data["results"]}
    assert by_name["test_pedantic_everything"]["group"] == "fib"
    assert by_name["test_pedantic_everything"]["extra_info"] == {"n": 10}
    assert by_name["test_pedantic_everything"]["iterations"] == 5  # rounds: timed samples
    assert by_name["test_pedantic_iterations_and_target"]["extra_info"] == {"n": 8, "note": "iterations"}
    assert by_name["test_pedantic_defaults"]["iterations"] == 1  # pytest-benchmark's rounds=1
    theirs = {b["name"]: b for b in data["benchmarks"]}  # pytest-benchmark's view of the same
    assert theirs["test_pedantic_everything"]["extra_info"] == {"n": 10}
    assert theirs["test_pedantic_everything"]["group"] == "fib"
    stats = theirs["test_pedantic_iterations_and_target"]["stats"]
    assert stats["rounds"] == 3 and stats["iterations"] == 4  # seconds per call, as theirs
    assert stats["min"] <= stats["median"] <= stats["max"] < 1.0


def test_the_same_suite_is_pytest_benchmarks(pytester, monkeypatch):
    """The suite is a genuine pytest-benchmark suite: renamed back, pytest-benchmark runs it."""
    pytest.importorskip("pytest_benchmark")
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # else it only calls each once
    pytester.makepyfile(test_original=NEWCOMER.replace("gpu_benchmark", "benchmark"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=7)


def test_pytest_benchmark_compare_reads_the_storage(pytester):
    pytest.importorskip("pytest_benchmark")
    _suite(pytester)
    for _ in range(2):
        pytester.runpytest_subprocess("-p", "no:cacheprovider", "--gpu-benchmark-autosave",
                                      "-p", "no:benchmark").assert_outcomes(passed=7)
    out = subprocess.run([sys.executable, "-c", "from pytest_benchmark.cli import main; main()",
                          "--storage", "file://.gpu_benchmarks", "compare", "--group-by=name"],
                         cwd=pytester.path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout + out.stderr
    assert "Failed to load" not in text and "test_pedantic_iterations_and_target" in text
    assert "0001" in text and "0002" in text


def test_a_threshold_without_a_unit_warns(pytester):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--gpu-benchmark-compare",
                                "--gpu-benchmark-compare-fail=mean:0.001,min:5%,max:2ms")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*mean:0.001: a number without a unit is ms here (0.001 ms), but "
                                 "seconds in pytest-benchmark*"])
    assert "min:5%: a number" not in result.stdout.str() and "max:2ms: a number" not in result.stdout.str()


def test_pedantic_calls_setup_and_teardown_around_every_round(pytester):
    pytester.makepyfile(test_counts="""
        log = []

        def setup():
            log.append("setup")
            return (2,), {"y": 3}

        def teardown(x, y):
            log.append(("teardown", x, y))

        def test_counts(gpu_benchmark):
            out = gpu_benchmark.pedantic(lambda x, y: log.append("call") or x * y, setup=setup,
                                         teardown=teardown, rounds=4, warmup_rounds=3)
            assert out == 6 and gpu_benchmark.result.iterations == 4
            # the value's call, the first call, 3 warm-up rounds, 4 timed: each set up, torn down
            assert log == ["setup", "call", ("teardown", 2, 3)] * (1 + 1 + 3 + 4)
    """)
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:benchmark").assert_outcomes(passed=1)


@pytest.mark.gpu
def test_pedantic_on_the_gpu_times_every_call(pytester, request):
    """On a GPU clock each call is timed: rounds x iterations samples; setup and teardown still
    run around each one, untimed. Run on a GPU machine (skipped here without one)."""
    import gpuprofile as gp

    if gp.device_count() == 0:
        pytest.skip("needs a CUDA device")
    if request.config.pluginmanager.get_plugin("gpuprofile") is None:
        pytester.makeconftest('pytest_plugins = ["gpuprofile.pytest_plugin"]')
    pytester.makepyfile(test_gpu_pedantic="""
        import gpuprofile as gp

        def test_spin(gpu_benchmark):
            log = []
            gpu_benchmark.extra_info["ns"] = 100000
            gpu_benchmark.pedantic(gp.kernels.spin, args=(100000,), teardown=lambda ns: log.append(ns),
                                   rounds=5, iterations=3, warmup_rounds=1)
            from gpuprofile.bench.cupti import _LEARN_BATCHES, _LEARN_ITERS

            r = gpu_benchmark.result
            assert r.clock in ("cupti", "gpu") and r.iterations == 15 and r.median_ms >= 0.09
            # the value's call, the first, on the CUPTI clock the untimed calls that learn fn's
            # kernels and streams, the warm-up, the timed calls
            learn = _LEARN_BATCHES * _LEARN_ITERS if r.clock == "cupti" else 0
            assert len(log) == 1 + 1 + learn + 3 + 15, (len(log), r.clock)
    """)
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:benchmark").assert_outcomes(passed=1)
