"""The gates' one decision rule (bench/gate.py decide()) on fixed samples: unchanged code with
drift between runs is never 'slower', a 10 % slowdown over rounds is, a non-finite number never
passes, a saved interval that is not its samples' is an error, and comparing nothing is said
(and fails with --strict). CLI checks call gpuprofile.cli.main; the plugin runs under pytester."""

import json
import math

import numpy as np
import pytest

import gpuprofile as gp
from gpuprofile import _stats
from gpuprofile.bench import gate
from gpuprofile.bench.result import BenchmarkResult, compare
from gpuprofile.bench.rounds import merge_rounds
from gpuprofile.cli import main

pytest_plugins = ["pytester"]

_BASE = {}


def run_of(name, center, seed, n=400) -> BenchmarkResult:
    """One run's result: n fixed samples around `center` ms (±2 % spread), statistics as
    benchmark() computes them."""
    if not _BASE:
        _BASE.update(gp.benchmark(sum, [1, 2, 3], clock="host", warmup=0, min_time=0.01,
                                  max_noise=0.5).to_dict())
    s = center * (1 + 0.02 * np.random.default_rng(seed).standard_normal(n))
    low, high, step = _stats.resolved_median_ci(s)
    median = float(np.median(s))
    st = _stats.summary(s)
    d = {**json.loads(json.dumps(_BASE)), **{f"{k}_ms": st[k] for k in ("mean", "min", "max", "p10", "p90")},
         "name": name, "samples": list(s), "median_ms": median,
         "ci_low_ms": low, "ci_high_ms": high, "resolution_ms": step,
         "rel_noise": _stats.rel_half_width(low, high, median)}
    return BenchmarkResult.from_dict(d)


def rounds_of(name, centers, seed) -> BenchmarkResult:
    return merge_rounds([run_of(name, c, seed + k) for k, c in enumerate(centers)])


def verdict(a, b, threshold=None) -> str:
    return compare([a, b], threshold=threshold).rows[1].verdict


# ---- decide() on fixed numbers --------------------------------------------------------------------


@pytest.mark.parametrize("ratio, low, high, between, expected", [
    (1.10, 1.09, 1.11, True, "slower"),          # beyond 5 %, over rounds
    (1.10, 1.09, 1.11, False, "inconclusive"),   # the same within one run: maybe drift
    (0.90, 0.89, 0.91, True, "faster"),
    (0.90, 0.89, 0.91, False, "inconclusive"),
    (1.02, 1.01, 1.03, True, "same"),            # significant, but within the threshold
    (1.02, 1.01, 1.03, False, "same"),
    (1.04, 1.02, 1.07, True, "inconclusive"),    # reaches past the threshold
    (1.0, 1.0, math.inf, True, "unknown"),
    (math.nan, 1.0, 1.1, True, "unknown"),
    (math.inf, 1.0, 1.1, True, "unknown"),
    (1.2, math.nan, math.nan, True, "unknown"),
])
def test_decide_exact_verdicts(ratio, low, high, between, expected):
    d = gate.decide(ratio, low, high, between_runs=between, basis="b")
    assert d.verdict == expected and d.threshold_pct == gate.DEFAULT_THRESHOLD_PCT
    assert d.fails == (expected in ("slower", "unknown"))  # a non-finite number never passes


def test_decide_too_few_rounds_is_inconclusive_not_unknown():
    d = gate.decide(1.3, math.nan, math.nan, between_runs=True, basis="4 paired rounds",
                    too_few="4 paired rounds (6 needed)")
    assert d.verdict == "inconclusive" and not d.fails and "6 needed" in d.why


def test_decide_threshold_and_its_line():
    d = gate.decide(1.08, 1.07, 1.09, threshold=10, between_runs=True, basis="10 paired rounds")
    assert d.verdict == "same"
    assert d.line("new vs ref", clock="host") == (
        "new vs ref: same: 1.08x (95 % 1.07 .. 1.09) over 10 paired rounds, host clock, threshold "
        "±10 %: the whole interval is within the threshold")
    for bad in (-1, math.nan, math.inf, "5", True):
        with pytest.raises(ValueError, match="threshold"):
            gate.decide(1.0, 1.0, 1.0, threshold=bad, between_runs=True, basis="b")


def test_stored_basis_needs_three_rounds_a_side():
    assert gate.stored_basis(1, 5) == (False, "one run a side")
    assert gate.stored_basis(2, 5) == (False, "2 rounds a side (< 3)")
    assert gate.stored_basis(3, 5) == (True, "3+ rounds a side")


# ---- fixed samples: drift between runs, a real slowdown --------------------------------------------


def test_unchanged_code_with_drift_between_single_runs_is_inconclusive():
    """Issue 44's trap: one run each, medians 10 % apart from drift, tight intervals."""
    a, b = run_of("a", 1.0, 1), run_of("b", 1.10, 2)
    row = compare([a, b]).rows[1]
    assert row.ratio_low > 1.05 and row.verdict == "inconclusive"
    assert "within one run" in row.why and "one run a side" in row.why


@pytest.mark.parametrize("a_centers, b_centers", [
    ([1.0, 1.08, 0.97], [1.05, 0.99, 1.02]),
    ([1.0, 1.0, 1.0], [1.01, 0.99, 1.0]),
    ([0.95, 1.05, 1.0, 1.02, 0.98], [1.04, 0.96, 1.01, 1.0, 0.99]),
])
def test_unchanged_code_with_drift_over_rounds_is_same_or_inconclusive(a_centers, b_centers):
    a, b = rounds_of("a", a_centers, 10), rounds_of("b", b_centers, 20)
    assert verdict(a, b) in ("same", "inconclusive") and verdict(b, a) in ("same", "inconclusive")


def test_a_ten_percent_slowdown_over_rounds_is_slower():
    a = rounds_of("a", [1.0, 1.01, 0.99], 30)
    b = rounds_of("b", [1.10, 1.11, 1.09], 40)
    row = compare([a, b]).rows[1]
    assert row.verdict == "slower" and row.ratio == pytest.approx(1.10, rel=0.01)
    assert row.why.startswith("slower: 1.09") and "over 3+ rounds a side, host clock, threshold ±5 %" in row.why
    assert verdict(a, b, threshold=15) == "same"  # 1.1x is within 15 %


def test_a_non_finite_result_never_passes():
    a, b = rounds_of("a", [1.0] * 3, 50), rounds_of("b", [1.0] * 3, 60)
    b.median_ms = math.nan
    assert verdict(a, b) == "unknown"


# ---- saved numbers checked against the samples (issue 49 row 6) ------------------------------------


def test_a_saved_interval_that_is_not_its_samples_is_an_error():
    d = run_of("r", 1.0, 70).to_dict()
    assert gate.problem(d) is None
    d.update(ci_low_ms=1e-300, ci_high_ms=1e300)
    assert gate.problem(d).startswith("the interval 'ci_low_ms' .. 'ci_high_ms' 1e-300 .. 1e+300 is "
                                      "not its samples'")
    narrow = run_of("r", 1.0, 70).to_dict()
    narrow.update(ci_low_ms=narrow["median_ms"], ci_high_ms=narrow["median_ms"])
    assert "is not its samples'" in gate.problem(narrow)  # narrower than the samples allow


def test_without_samples_the_interval_must_lie_within_min_and_max():
    d = run_of("r", 1.0, 80).to_dict(samples=False)
    assert gate.problem(d) is None
    d.update(ci_low_ms=1e-300, ci_high_ms=1e300)
    assert "reaches past the samples' 'min_ms' .. 'max_ms'" in gate.problem(d)


def test_rounds_and_round_medians_are_checked():
    d = rounds_of("r", [1.0, 1.02, 0.98], 90).to_dict()
    assert gate.problem(d) is None
    assert gate.problem({**d, "rounds": 0}) == "'rounds' is 0 (must be an int >= 1)"
    assert gate.problem({**d, "rounds": 2}) == "'round_medians_ms' has 3 medians for 'rounds' 2"
    far = {**d, "round_medians_ms": [1.0, 1.0, 5.0]}
    assert "'round_medians_ms'[2] 5 lies outside the interval" in gate.problem(far)


# ---- the CLI: one line per verdict, inconclusive passes, nothing compared is said --------------------


def saved(path, result):
    result.save(path)
    return str(path)


def test_cli_one_run_a_side_is_inconclusive_exit_0_and_3_with_strict(tmp_path, capsys):
    a = saved(tmp_path / "a.json", run_of("x", 1.0, 1))
    b = saved(tmp_path / "b.json", run_of("x", 1.10, 2))
    assert main(["compare", a, b]) == 0
    out = capsys.readouterr()
    assert "gate: x (b.json): inconclusive: 1.1" in out.out and "one run a side, host clock" in out.out
    assert "1 inconclusive verdict(s) (they pass; --strict fails them)" in out.err
    assert main(["compare", a, b, "--strict"]) == 3
    assert "FAIL (--strict)" in capsys.readouterr().err


def test_cli_rounds_catch_a_slowdown_and_pass_unchanged_code(tmp_path, capsys):
    a = saved(tmp_path / "a.json", rounds_of("x", [1.0, 1.01, 0.99], 30))
    b = saved(tmp_path / "b.json", rounds_of("x", [1.10, 1.11, 1.09], 40))
    c = saved(tmp_path / "c.json", rounds_of("x", [1.01, 0.99, 1.0], 50))
    assert main(["compare", a, b]) == 1
    assert "FAIL: 1 regression(s) beyond the threshold: x (b.json, 1.1" in capsys.readouterr().err
    assert main(["compare", a, c, "--strict"]) == 0
    assert "PASS: 1 compared, none slower beyond the threshold" in capsys.readouterr().err


def test_cli_says_when_it_compared_nothing(tmp_path, capsys):
    def suite(path, names):
        entries = [{**run_of(n, 1.0, k).to_dict(), "test": n, "group": None} for k, n in enumerate(names)]
        path.write_text(json.dumps({"gpuprofile_benchmark_file": 1, "results": entries}))
        return str(path)

    a, b = suite(tmp_path / "a.json", ["t::old", "t::x"]), suite(tmp_path / "b.json", ["t::new", "t::y"])
    assert main(["compare", a, b]) == 0
    assert "nothing compared: no result of the baseline has a counterpart" in capsys.readouterr().err
    assert main(["compare", a, b, "--strict"]) == 3
    c = suite(tmp_path / "c.json", ["t::old", "t::renamed"])
    assert main(["compare", a, c]) == 0
    assert "not compared: t::x (not in c.json), t::renamed (new in c.json)" in capsys.readouterr().err


# ---- the plugin ----------------------------------------------------------------------------------------

SUITE = """
import pytest

@pytest.mark.gpu_benchmark(clock="host", warmup=0, min_time=0.01, max_time=0.2, max_noise=0.5)
def test_{name}(gpu_benchmark):
    gpu_benchmark(sum, range(100))
"""


def test_plugin_says_a_renamed_test_was_not_compared_and_strict_fails_it(pytester):
    base = pytester.path / "base.json"
    pytester.makepyfile(test_suite=SUITE.format(name="old"))
    pytester.runpytest(f"--gpu-benchmark-save={base}").assert_outcomes(passed=1)
    pytester.makepyfile(test_suite=SUITE.format(name="new"))
    loose = pytester.runpytest(f"--gpu-benchmark-compare={base}", "--gpu-benchmark-fail-slower=5")
    loose.assert_outcomes(passed=1)
    loose.stdout.fnmatch_lines(["nothing compared: 1 result(s) have no saved result of their name in "
                                f"{base}: test_suite.py::test_new"])
    strict = pytester.runpytest(f"--gpu-benchmark-compare={base}", "--gpu-benchmark-compare-strict")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["*test_new: not compared: no saved result of this name in*"])


def test_plugin_one_run_compare_fail_is_inconclusive_and_passes(pytester):
    base = pytester.path / "base.json"
    pytester.makepyfile(test_suite=SUITE.format(name="x"))
    pytester.runpytest(f"--gpu-benchmark-save={base}").assert_outcomes(passed=1)
    data = json.loads(base.read_text())
    for r in data["results"]:  # the saved run 10x faster: a big change, but one run a side
        for k in ("median_ms", "ci_low_ms", "ci_high_ms", "min_ms", "max_ms", "mean_ms", "resolution_ms"):
            r[k] *= 0.1
    base.write_text(json.dumps(data))
    result = pytester.runpytest(f"--gpu-benchmark-compare={base}", "--gpu-benchmark-compare-fail=median:5%")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["inconclusive (passes): test_suite.py::test_x: median:5%: inconclusive: "
                                 "*over one run a side, host clock, threshold ±5 %*"])
    strict = pytester.runpytest(f"--gpu-benchmark-compare={base}", "--gpu-benchmark-compare-fail=median:5%",
                                "--gpu-benchmark-compare-strict")
    strict.assert_outcomes(failed=1)


@pytest.mark.parametrize("args, message", [
    (["--gpu-benchmark-compare=base.json", "--gpu-benchmark-compare-fail=,"], "*gives no threshold*"),
    (["--gpu-benchmark-compare-strict"], "*--gpu-benchmark-compare-strict needs --gpu-benchmark-compare*"),
    (["--gpu-benchmark-compare=base.json", "--gpu-benchmark-compare-strict"], "*base.json holds no results*"),
])
def test_plugin_gates_that_would_gate_nothing_are_usage_errors(pytester, args, message):
    pytester.makepyfile(test_suite=SUITE.format(name="x"))
    (pytester.path / "base.json").write_text('{"results": []}')
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_plugin_an_empty_baseline_is_said(pytester):
    pytester.makepyfile(test_suite=SUITE.format(name="x"))
    (pytester.path / "base.json").write_text('{"results": []}')
    result = pytester.runpytest("--gpu-benchmark-compare=base.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["nothing compared: base.json holds no results"])


def test_device_clocks_default_to_a_smaller_threshold():
    assert gate.default_threshold("host") == 5.0 and gate.default_threshold(None) == 5.0
    assert gate.default_threshold("cupti") == 2.0 and gate.default_threshold("cupti+gpu") == 2.0
    assert gate.default_threshold("cupti+host") == 5.0  # mixed: the host clock's
    assert gate.stored(1.06, 1.03, 1.08, 3, 3, None, "cupti").verdict == "slower"
    assert gate.stored(1.06, 1.03, 1.08, 3, 3, None, "host").verdict == "inconclusive"
    assert gate.stored(1.06, 1.03, 1.08, 3, 3, 1.0, "host").verdict == "slower"
