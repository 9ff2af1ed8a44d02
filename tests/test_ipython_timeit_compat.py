"""%gpu_timeit as %timeit users read it: -o returns an object with IPython's TimeitResult
attributes (seconds, as %timeit's) besides the BenchmarkResult's, -p sets the printed digits and
-h shows the help; run headless through InteractiveShell."""

import dataclasses
import math

import pytest

import gpuprofile as gp

IPython = pytest.importorskip("IPython")

from IPython.core.error import UsageError  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

from gpuprofile.ipython import GpuTimeitResult, summary_line  # noqa: E402

TIMEIT_ATTRIBUTES = ("average", "stdev", "best", "worst", "all_runs", "loops", "repeat", "timings",
                     "compile_time")


@pytest.fixture(scope="module")
def shell():
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "gpuprofile")
    return sh


def test_o_has_timeits_attributes_in_seconds(shell):
    with capture_output():
        r = shell.run_line_magic("gpu_timeit", "-o -n 20 --clock host sum(range(100))")
        theirs = shell.run_line_magic("timeit", "-o -q -n 3 -r 2 sum(range(100))")
    assert isinstance(r, gp.BenchmarkResult) and isinstance(r, GpuTimeitResult)
    for name in TIMEIT_ATTRIBUTES:
        assert hasattr(theirs, name) and hasattr(r, name), name
    assert r.repeat == len(r.timings) == len(r.all_runs) == 20 and r.loops == r.inner == 1
    assert r.timings == [x / 1e3 for x in r.samples]
    assert r.best == min(r.timings) and r.worst == max(r.timings)
    assert math.isclose(r.average, r.mean_ms / 1e3, rel_tol=1e-9)
    mean = sum(r.timings) / 20
    assert math.isclose(r.stdev, (sum((t - mean) ** 2 for t in r.timings) / 20) ** 0.5, rel_tol=1e-9)
    assert 0 <= r.compile_time < 5 and r.median_ms > 0 and r.clock == "host"


def test_a_sample_of_several_calls_counts_them_in_loops(shell):
    r = GpuTimeitResult.of(gp.benchmark(lambda: None, clock="host", max_time=0.3, max_noise=0.5),
                           0.25, 3)
    r.inner, r.samples = 4, [1.0, 3.0]  # two samples of 4 calls, 1 ms and 3 ms per call
    assert (r.loops, r.repeat, r.timings, r.all_runs) == (4, 2, [0.001, 0.003], [0.004, 0.012])
    assert (r.best, r.worst, r.average, r.compile_time) == (0.001, 0.003, 0.002, 0.25)
    assert math.isclose(r.stdev, 0.001, rel_tol=1e-12)


def test_p_sets_the_digits_of_the_line(shell):
    with capture_output() as cap:
        r = shell.run_line_magic("gpu_timeit", "-o -p 2 -n 5 --clock host 1 + 1")
    assert cap.stdout == summary_line(r, 2) + "\n"
    with capture_output() as cap:
        r = shell.run_line_magic("gpu_timeit", "-o -p7 -n 5 --clock host 1 + 1")
    assert cap.stdout == summary_line(r, 7) + "\n"
    fixed = dataclasses.replace(r, median_ms=0.0166, ci_low_ms=0.01651, ci_high_ms=0.01669,
                                iterations=735, inner=1, clock="cupti", mode="cold", rounds=1)
    assert summary_line(fixed, 2) == "17 µs ± 0.09 µs per call (median ± 95 % CI, CUPTI, 735 calls)"
    assert summary_line(fixed, 5).startswith("16.6 µs ± 0.09 µs per call")
    with pytest.raises(UsageError, match="-p needs a number of digits >= 1"):
        shell.run_line_magic("gpu_timeit", "-p 0 1")


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_h_prints_the_help(shell, flag):
    with capture_output() as cap:
        assert shell.run_line_magic("gpu_timeit", flag) is None
    assert "--max-noise" in cap.stdout and "-p P, --precision P" in cap.stdout
