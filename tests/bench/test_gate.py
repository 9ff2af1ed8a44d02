"""A gate you can bet CI on: results that cannot be trusted are errors (never a pass), intervals
respect the clock's resolution, rounds span the spread between runs, and the outputs say what an
interval covers. CLI checks run `python -m gpuprofile` in a subprocess; the plugin runs under
pytester."""

import dataclasses
import functools
import itertools
import json
import math
import random
import subprocess
import sys
import warnings

import numpy as np
import pytest

import gpuprofile as gp
from gpuprofile import _stats
from gpuprofile.bench import gate
from gpuprofile.bench.result import BenchmarkResult, compare
from gpuprofile.bench.rounds import merge_rounds

pytest_plugins = ["pytester"]

_BASE = {}


def base_dict() -> dict:
    """A real host-clock result's dict (measured once)."""
    if not _BASE:
        _BASE.update(gp.benchmark(sum, [1, 2, 3], clock="host", warmup=0, min_time=0.01,
                                  max_noise=0.5, name="r").to_dict())
    return json.loads(json.dumps(_BASE))


def made(name, samples, **fields) -> BenchmarkResult:
    """A result whose statistics are those of `samples` (ms), as benchmark() computes them."""
    d = base_dict()
    s = np.asarray(samples, dtype=np.float64)
    low, high, step = _stats.resolved_median_ci(s)
    d.update(name=name, samples=list(s), median_ms=float(np.median(s)), ci_low_ms=low,
             ci_high_ms=high, resolution_ms=step, rel_noise=_stats.rel_half_width(low, high, float(np.median(s))))
    d.update(fields)
    return BenchmarkResult.from_dict(d)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "gpuprofile", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


# ---- what a gate refuses --------------------------------------------------------------------------


GOOD = {"median_ms": 2.0, "ci_low_ms": 1.5, "ci_high_ms": 3.0, "samples": [1.0, 1.5, 2.0, 3.0, 4.0]}


@pytest.mark.parametrize("change, message", [
    ({"median_ms": math.nan}, "'median_ms' is nan (not finite)"),
    ({"median_ms": None}, "'median_ms' is null (a number that was not finite when saved)"),
    ({"median_ms": 0}, "'median_ms' is 0 (must be > 0)"),
    ({"median_ms": -1.0}, "'median_ms' is -1 (must be > 0)"),
    ({"median_ms": math.inf}, "'median_ms' is inf (not finite)"),
    ({"median_ms": 2**1100}, "'median_ms' is too large"),
    ({"median_ms": "2"}, "'median_ms' must be a number, got str"),
    ({"ci_low_ms": None}, "'ci_low_ms' is null (a number that was not finite when saved); a result "
                          "needs 6 samples or more for a 95 % interval"),
    ({"ci_high_ms": math.inf}, "'ci_high_ms' is inf (not finite)"),
    ({"ci_low_ms": 2.5}, "'median_ms' 2 lies outside its interval 'ci_low_ms' .. 'ci_high_ms' 2.5 .. 3"),
    ({"samples": [1.0, math.nan, 2.0]}, "'samples'[1] is nan (samples must be finite and >= 0)"),
    ({"samples": [1.0, -2.0, 2.0]}, "'samples'[1] is -2.0 (samples must be finite and >= 0)"),
    ({"samples": [1.0, "x"]}, "'samples' must be a list of numbers"),
    ({"samples": [1.0, 1.0, 5.0]}, "'median_ms' 2 is not the median of its own 3 samples (1)"),
])
def test_gate_problems_name_the_field(change, message):
    assert gate.problem({**GOOD, **change}) == message
    with pytest.raises(ValueError, match="^f.json: "):
        gate.check({**GOOD, **change}, "f.json")


def test_gate_accepts_good_results_and_results_without_samples():
    assert gate.problem(GOOD) is None
    assert gate.problem({**GOOD, "samples": []}) is None
    assert gate.problem({**GOOD, "samples": [0.0, 2.0, 9.0]}) is None  # a zero sample is a reading
    assert gate.problem({"median_ms": 1.0}) == "'ci_low_ms' is missing"
    assert gate.problem(made("x", np.arange(1.0, 11.0))) is None


def test_compare_in_python_calls_an_untrusted_result_unknown_never_same():
    good = made("good", [1.0] * 5 + [1.1] * 5)
    edited = made("edited", [1.0] * 5 + [1.1] * 5)
    edited.median_ms = 1.05 * 1.0001  # no longer its samples' median (1.05)
    nan = made("nan", [1.0] * 10, median_ms=math.nan)
    rows = {r.name: r.verdict for r in compare([good, edited, nan]).rows}
    assert rows == {"good": "baseline", "edited": "unknown", "nan": "unknown"}


def save_plugin_file(path, results):
    entries = [{**r.to_dict(), "test": r.name, "group": None} for r in results]
    path.write_text(json.dumps({"gpuprofile_benchmark_file": 1, "results": entries}))
    return path


@pytest.mark.parametrize("field, value, message", [
    ("median_ms", None, "'median_ms' is nan (not finite)"),  # null loads as NaN
    ("median_ms", 0.0, "'median_ms' is 0 (must be > 0)"),
    ("median_ms", -0.5, "'median_ms' is -0.5 (must be > 0)"),
    ("median_ms", "1e999", "'median_ms' is inf (not finite)"),  # valid JSON that reads as inf
    ("ci_low_ms", None, "'ci_low_ms' is nan (not finite); a result needs 6 samples or more"),
    ("median_ms", 1.0, "'median_ms' 1 is not the median of its own 10 samples (1.5)"),
])
def test_compare_command_fails_closed_with_exit_2(tmp_path, field, value, message):
    good = made("t::a", np.arange(1.0, 11.0) / 4)  # median 1.375, interval 0.5 .. 2.25
    save_plugin_file(tmp_path / "main.json", [good])
    bad = made("t::a", np.arange(1.0, 11.0) / 4 + 0.125)  # median 1.5
    doc = {"gpuprofile_benchmark_file": 1, "results": [{**bad.to_dict(), "test": "t", "group": None}]}
    text = json.dumps(doc).replace(f'"{field}": {json.dumps(doc["results"][0][field])}',
                                   f'"{field}": {value if value == "1e999" else json.dumps(value)}')
    (tmp_path / "mine.json").write_text(text)
    out = cli("compare", tmp_path / "main.json", tmp_path / "mine.json", "--fail-slower", "5")
    assert out.returncode == 2, out
    assert f"gpuprofile compare: error: mine.json: result 't::a': {message}" in out.stderr
    assert not out.stdout


def test_compare_command_refuses_nan_tokens_and_deep_nesting(tmp_path):
    good = made("t::a", np.arange(1.0, 11.0))
    good.save(tmp_path / "a.json")
    (tmp_path / "nan.json").write_text((tmp_path / "a.json").read_text().replace(
        f'"median_ms": {good.median_ms!r}', '"median_ms": NaN'))
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    out = cli("compare", tmp_path / "a.json", tmp_path / "nan.json")
    assert out.returncode == 2 and "NaN is not valid JSON" in out.stderr and "nan.json" in out.stderr
    out = cli("compare", tmp_path / "a.json", tmp_path / "deep.json")
    assert out.returncode == 2, out
    assert f"cannot read {tmp_path / 'deep.json'}: the JSON is nested too deeply to read" in out.stderr
    assert "Traceback" not in out.stderr


def test_compare_output_says_what_the_interval_covers(tmp_path):
    one = made("x", np.arange(1.0, 11.0))
    one.save(tmp_path / "a.json")
    one.save(tmp_path / "b.json")
    out = cli("compare", tmp_path / "a.json", tmp_path / "b.json")
    assert out.returncode == 0, out
    assert f"note: {gate.WITHIN_ONE_RUN}" in out.stdout
    merged = merge_rounds([made("x", np.arange(1.0, 11.0)), made("x", np.arange(2.0, 12.0))])
    merged.save(tmp_path / "a.json")
    merged.save(tmp_path / "b.json")
    out = cli("compare", tmp_path / "a.json", tmp_path / "b.json")
    assert "note: every result was measured in 2 rounds or more: its interval spans the spread " \
           "between those runs (not between machines or days)" in out.stdout


# ---- clock resolution ---------------------------------------------------------------------------


def test_resolve_reaches_the_next_distinct_sample_value():
    # ties: the order-statistic interval is [2, 2]; the samples cannot place the median inside
    # the gaps to 1 and 3
    samples = [1.0] * 3 + [2.0] * 10 + [3.0] * 3
    assert _stats.median_ci(samples) == (2.0, 2.0)
    assert _stats.resolved_median_ci(samples) == (1.0, 3.0, 1.0)
    # all tied: the clock's stated resolution is all there is
    assert _stats.resolved_median_ci([5.0] * 20, 0.25) == (4.75, 5.25, 0.25)
    # continuous samples: one order statistic further on each side
    assert _stats.resolved_median_ci(np.arange(1.0, 21.0)) == (5.0, 16.0, 1.0)
    # a side without neighbours takes the other side's gap; the low end stays >= 0
    assert _stats.resolve([0.5, 1.0, 1.0], 1.0, 1.0) == (0.5, 1.5, 0.5)
    assert _stats.resolve([0.1, 1.0], 0.1, 1.0, 0.5) == (0.0, 1.5, 0.5)
    assert all(map(math.isnan, _stats.resolve([1.0], math.nan, math.nan)))


def quantised(rng, n, levels, weights):
    return rng.choice(np.asarray(levels) / 2**16, size=n, p=weights)  # ~15 ns steps, in ms


def test_quantised_host_samples_never_claim_zero_width_or_a_false_slowdown():
    """The issue's case: a 20-30 ns call read through a 10 ns clock. Run A's median lands on 20,
    run B's on 30: the bare order statistics give ±0 % and a 1.5x 'slower' verdict."""
    rng = np.random.default_rng(1)
    a = quantised(rng, 2000, [2, 3], [0.55, 0.45])
    b = quantised(rng, 2000, [2, 3], [0.45, 0.55])
    q = 2**-16
    assert _stats.median_ci(a) == (2 * q, 2 * q) and _stats.median_ci(b) == (3 * q, 3 * q)
    ra, rb = made("a", a), made("b", b)
    assert (ra.ci_low_ms, ra.ci_high_ms, ra.resolution_ms) == (q, 3 * q, q)
    assert rb.rel_noise > 0
    row = compare([ra, rb]).rows[1]
    assert row.ratio == 1.5 and row.verdict == "inconclusive"  # one run a side: never "slower"


def test_results_saved_before_resolution_existed_are_widened_from_their_samples():
    old = made("old", [0.5] * 10 + [0.75] * 5)
    old.resolution_ms, old.ci_low_ms, old.ci_high_ms = None, 0.5, 0.5
    assert gate.interval(old) == (0.25, 0.75)
    assert gate.interval(old.to_dict()) == (0.25, 0.75)
    new = made("new", [0.5] * 10 + [0.75] * 5)
    assert gate.interval(new) == (new.ci_low_ms, new.ci_high_ms)


def test_benchmark_results_carry_their_resolution():
    r = gp.benchmark(sum, [1, 2, 3], clock="host", warmup=0, min_time=0.01, max_noise=0.5)
    assert r.resolution_ms > 0 and r.ci_low_ms < r.median_ms < r.ci_high_ms
    assert "clock resolution included" in repr(r) and "within one run" in repr(r)
    back = BenchmarkResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.resolution_ms == r.resolution_ms


# ---- rounds -------------------------------------------------------------------------------------


def test_merge_rounds_exact_values():
    rounds = [made("r", np.arange(1.0, 11.0), iterations=10, wall_s=1.0, warmup_s=0.5,
                   host_ms_per_iter=2.0, flops=1e9),
              made("r", np.arange(11.0, 21.0), iterations=10, wall_s=2.0, warmup_s=0.25,
                   host_ms_per_iter=4.0, flops=1e9, converged=False, stop_reason="max_time")]
    m = merge_rounds(rounds)
    assert m.rounds == 2 and m.round_medians_ms == [5.5, 15.5]
    assert list(m.samples) == list(np.arange(1.0, 21.0)) and m.median_ms == 10.5
    # pooled interval of 20 samples: ranks 6 and 15 -> [6, 15], then the next distinct values
    # [5, 16], then the hull with the round medians 5.5 and 15.5
    assert (m.ci_low_ms, m.ci_high_ms) == (5.0, 16.0)
    assert m.rel_noise == pytest.approx(5.5 / 10.5, rel=1e-15)
    assert (m.iterations, m.wall_s, m.warmup_s, m.host_ms_per_iter) == (20, 3.0, 0.75, 3.0)
    assert (m.converged, m.stop_reason) == (False, "max_time")
    assert m.tflops == pytest.approx(1e9 / 10.5e-3 / 1e12, rel=1e-15)
    assert gate.problem(m) is None
    # a short round far below a long one: the pooled interval (ranks 45 and 66 of 110: 135 .. 156,
    # 134 .. 157 with the neighbours) misses the short round's median, the hull does not
    spread = merge_rounds([made("r", np.arange(1.0, 11.0)), made("r", np.arange(101.0, 201.0))])
    assert (spread.median_ms, spread.ci_low_ms, spread.ci_high_ms) == (145.5, 5.5, 157.0)
    assert "2 rounds: spans their medians" in repr(spread) and "round medians" in repr(spread)


def test_benchmark_rounds_repeat_the_whole_measurement():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = gp.benchmark(lambda: sum(range(random.randint(1, 300))), clock="host", warmup=0,
                         min_time=0.01, max_time=0.02, max_noise=1e-9, rounds=3)
    assert r.rounds == 3 and len(r.round_medians_ms) == 3
    assert len(r.samples) * r.inner == r.iterations  # every round grouped calls alike
    assert r.ci_low_ms <= min(r.round_medians_ms) and r.ci_high_ms >= max(r.round_medians_ms)
    assert r.median_ms == float(np.median(r.samples)) and gate.problem(r) is None
    assert len([w for w in caught if "max_noise" in str(w.message)]) == 1  # one warning, not three
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        gp.benchmark(sum, [1], clock="host", rounds=0)
    with pytest.raises(TypeError, match="rounds must be an int"):
        gp.benchmark(sum, [1], clock="host", rounds=2.0)


def test_bench_command_rounds_and_an_unwritable_json_path(tmp_path):
    out = tmp_path / "r.json"
    res = cli("bench", "sum(range(20))", "--clock", "host", "--max-time", "0.2", "--max-noise", "0.5",
              "--rounds", "2", "--json", out)
    assert res.returncode == 0, res
    saved = BenchmarkResult.load(out)
    assert saved.rounds == 2 and len(saved.round_medians_ms) == 2 and "2 rounds" in res.stdout
    for bad in (tmp_path, tmp_path / "missing" / "r.json"):
        res = cli("bench", "import time; time.sleep(30)", "--clock", "host", "--json", bad)
        assert res.returncode == 2 and f"gpuprofile bench: error: cannot write {bad}: " in res.stderr
        assert not res.stdout  # refused before measuring anything


# ---- the pytest plugin --------------------------------------------------------------------------


QUICK = "clock='host', warmup=0, min_time=0.01, max_time=0.2, max_noise=0.5"

SUITE = f"""
import pytest

@pytest.mark.gpu_benchmark({QUICK})
def test_sum(gpu_benchmark):
    gpu_benchmark(sum, range(100))
"""


def test_plugin_refuses_an_untrusted_baseline_up_front(pytester):
    pytester.makepyfile(test_suite=SUITE)
    base = pytester.path / "base.json"
    # with its samples, so that a median edited inside its interval is caught too
    pytester.runpytest(f"--gpu-benchmark-save={base}", "--gpu-benchmark-save-data").assert_outcomes(passed=1)
    data = json.loads(base.read_text())
    data["results"][0]["median_ms"] = None  # what a NaN median is saved as
    base.write_text(json.dumps(data))
    result = pytester.runpytest(f"--gpu-benchmark-compare={base}", "--gpu-benchmark-fail-slower=5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*cannot read {base}: results[[]0[]] (test_suite.py::test_sum): "
                                 "'median_ms' is null*"])
    data["results"][0]["median_ms"] = data["results"][0]["ci_high_ms"]  # edited: not its samples'
    base.write_text(json.dumps(data))
    result = pytester.runpytest(f"--gpu-benchmark-compare={base}", "--gpu-benchmark-fail-slower=5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*'median_ms' * is not the median of its own * samples*"])
    base.write_text("[" * 100_000 + "]" * 100_000)
    result = pytester.runpytest(f"--gpu-benchmark-compare={base}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*cannot read * the JSON is nested too deeply to read*"])


def test_plugin_fails_a_test_whose_own_result_cannot_be_gated(pytester):
    pytester.makepyfile(test_suite=SUITE)
    base = pytester.path / "base.json"
    pytester.runpytest(f"--gpu-benchmark-save={base}").assert_outcomes(passed=1)
    pytester.makepyfile(test_suite="""
        def test_sum(gpu_benchmark):
            gpu_benchmark.pedantic(sum, args=(range(100),), rounds=3, clock="host")
    """)
    result = pytester.runpytest(f"--gpu-benchmark-compare={base}", "--gpu-benchmark-fail-slower=5")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*cannot compare, this run's result is not usable: 'ci_low_ms' is "
                                 "nan (not finite); a result needs 6 samples or more*"])


@pytest.mark.parametrize("where", ["folder", "missing/base.json", "file.txt/base.json"])
def test_plugin_checks_the_save_path_before_running_tests(pytester, where):
    pytester.makepyfile(test_suite="""
        def test_ran(tmp_path_factory):
            open("ran.txt", "w").close()
    """)
    (pytester.path / "file.txt").write_text("")
    target = pytester.path if where == "folder" else pytester.path / where
    result = pytester.runpytest(f"--gpu-benchmark-save={target}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--gpu-benchmark-save: cannot write {target}: *"])
    assert not (pytester.path / "ran.txt").exists()


def test_plugin_rounds_option(pytester):
    pytester.makepyfile(test_suite=SUITE)
    base = pytester.path / "base.json"
    result = pytester.runpytest(f"--gpu-benchmark-save={base}", "--gpu-benchmark-rounds=2")
    result.assert_outcomes(passed=1)
    saved = json.loads(base.read_text())["results"][0]
    assert saved["rounds"] == 2 and len(saved["round_medians_ms"]) == 2
    assert "within one run" not in result.stdout.str()
    once = pytester.runpytest(f"--gpu-benchmark-save={base}")
    once.stdout.fnmatch_lines(["note: intervals are 95 % intervals of each median within one run*"])
    bad = pytester.runpytest("--gpu-benchmark-rounds=0")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--gpu-benchmark-rounds must be >= 1, got 0*"])


def test_plugin_saves_strict_json(pytester):
    pytester.makepyfile(test_suite="""
        def test_few(gpu_benchmark):
            gpu_benchmark.pedantic(sum, args=(range(10),), rounds=3, clock="host")
    """)
    base = pytester.path / "base.json"
    pytester.runpytest(f"--gpu-benchmark-save={base}").assert_outcomes(passed=1)
    text = base.read_text()
    assert "NaN" not in text and "Infinity" not in text and '"ci_low_ms": null' in text


# ---- gate.passing(): all results at once (gpuprofile compare), held to problem()'s answers ----
# passing() may only say True where problem() finds nothing, and says True for the results that
# saved runs hold (else compare would check them one by one again).


def saved(**changes) -> BenchmarkResult:
    """A result as a saved run loads it (no samples), with `changes`."""
    return dataclasses.replace(_saved_template(), **changes)


@functools.cache
def _saved_template() -> BenchmarkResult:
    d = {**base_dict(), "median_ms": 1.0, "ci_low_ms": 0.99, "ci_high_ms": 1.01, "min_ms": 0.98,
         "max_ms": 1.02, "resolution_ms": 1e-6, "rounds": 3, "round_medians_ms": [0.995, 1.0, 1.005]}
    del d["samples"]
    return BenchmarkResult.from_dict(d)


NUMBERS = [1.0, 0.99, 1.01, 0.985, 1.015, 0.0, -1.0, 1e-300, 1e300, math.nan, math.inf, -math.inf,
           None, 1, True, "1"]
VARIANTS = [{}]
VARIANTS += [{k: v} for k in ("median_ms", "ci_low_ms", "ci_high_ms", "min_ms", "max_ms", "resolution_ms")
             for v in NUMBERS]
VARIANTS += [{"rounds": k} for k in (0, -1, 1, 2, 3, 4, True, 3.0, None, 2**80, -2**80)]
VARIANTS += [{"round_medians_ms": m} for m in ([], [1.0], [1.0] * 4, [0.98, 1.0, 1.0], [1.0, 1.0, 1.02],
                                               [1.0, 1.0, math.nan], [1.0, 1.0, 1], [1.0, None, 1.0],
                                               (1.0, 1.0, 1.0), [1.0, 1.0, -0.0])]
VARIANTS += [{"samples": s} for s in (np.array([0.99, 1.0, 1.01]), [], None, 3, np.array([math.nan]))]
VARIANTS += [dict(zip(("min_ms", "max_ms", "resolution_ms"), v, strict=True))
             for v in itertools.product([0.99, 0.9901, 1.0, math.nan, None], [1.01, 1.0099, 1.0, math.inf],
                                        [None, 0.0, 1e-4, 2e-4, -1.0, math.nan])]


def test_all_at_once_check_says_true_only_where_problem_finds_nothing():
    results = [saved(**v) for v in VARIANTS]
    verdicts = gate.passing(results)
    assert len(verdicts) == len(results)
    for v, r, ok in zip(VARIANTS, results, verdicts, strict=True):
        if ok:
            assert gate.problem(r) is None, v
    assert verdicts[0] and sum(verdicts) > len(results) // 4  # the saved shape is decided here
    shown = {i for i, ok in enumerate(verdicts) if ok}
    # the only results problem() passes that passing() leaves to it: those with samples, other
    # types, rounds without round medians given as tuples, or None where a number is looked for
    left = [VARIANTS[i] for i, r in enumerate(results) if i not in shown and gate.problem(r) is None]
    assert all("samples" in v or any(type(x) is not float for x in v.values()) for v in left), left


def test_all_at_once_check_of_dicts_and_of_nothing():
    assert gate.passing([]) == []
    assert gate.passing([saved().to_dict()]) == [False]  # problem() decides dicts


@pytest.mark.parametrize("seed", range(3))
def test_all_at_once_check_agrees_on_random_numbers(seed):
    rng = np.random.default_rng(seed)
    results = []
    for _ in range(2000):
        low, median, high, lo, hi = np.sort(rng.uniform(0.5, 1.5, 5))[[1, 2, 3, 0, 4]]
        values = [median, low, high, lo, hi]
        k = int(rng.integers(0, 5))  # one number moved anywhere
        values[k] = float(rng.uniform(0.4, 1.6))
        results.append(saved(median_ms=float(values[0]), ci_low_ms=float(values[1]), ci_high_ms=float(values[2]),
                             min_ms=float(values[3]), max_ms=float(values[4]),
                             resolution_ms=float(rng.choice([0.0, 1e-3, 0.05])),
                             round_medians_ms=[float(values[0])] * 3))
    for r, ok in zip(results, gate.passing(results), strict=True):
        assert ok == (gate.problem(r) is None), r


# ---- gate.stored_pairs(): every pair at once (gpuprofile compare), held to compared_row() ----


def _pair_row(new, ref, threshold):
    from gpuprofile.bench.result import compared_row

    row = compared_row("f", new, ref, threshold, trusted=True)
    return row.ratio, row.ratio_low, row.ratio_high, row.verdict, row.why


def _same(a, b) -> bool:
    return all(x == y or (x != x and y != y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("threshold", [None, 0, 2.5, 10])
@pytest.mark.parametrize("seed", range(2))
def test_all_pairs_at_once_give_compared_rows_own_numbers_verdicts_and_lines(seed, threshold):
    rng = np.random.default_rng(seed)
    scales = [1.0, 1.0, 1.0, 1e-300, 1e300, 1e-5, 1e5]  # the last ones push a quotient past a float
    results = []
    for _ in range(1500):
        scale = float(rng.choice(scales))
        median = float(rng.uniform(0.5, 1.5))
        width = float(rng.choice([0.0, 1e-3, 0.02, 0.1, 0.4])) * median
        low, high = median - width * float(rng.uniform(0, 1)), median + width * float(rng.uniform(0, 1))
        rounds = int(rng.integers(1, 6))
        results.append(saved(median_ms=median * scale, ci_low_ms=low * scale, ci_high_ms=high * scale,
                             min_ms=low * scale, max_ms=high * scale, rounds=rounds,
                             round_medians_ms=[median * scale] * rounds,
                             clock=str(rng.choice(["host", "cupti", "gpu", "host", "cupti"]))))
    # ratios on a threshold's edge: a result exactly 1 + t / 100 times another, interval of width 0
    for t in (2.0, 5.0, 2.5, 10.0):
        for k in (1 + t / 100, 1 / (1 + t / 100)):
            results += [saved(median_ms=k, ci_low_ms=k, ci_high_ms=k, min_ms=k, max_ms=k,
                              round_medians_ms=[k] * 3)]
    ok = gate.passing(results)
    assert all(ok)
    idx = rng.integers(0, len(results), (4000, 2))
    news = [results[i] for i in idx[:, 0]] + results[:50]
    refs = [results[j] for j in idx[:, 1]] + results[:50]  # the last 50: a result against itself
    news += results[-8:] * 8
    refs += [r for r in results[-8:] for _ in range(8)]
    got = list(zip(*gate.stored_pairs(news, refs, threshold), strict=True))
    want = [_pair_row(n, r, threshold) for n, r in zip(news, refs, strict=True)]
    verdicts = {w[3] for w in want} | ({"same"} if threshold == 0 else set())  # none is within 0 %
    assert {"baseline", "same", "slower", "faster", "inconclusive", "unknown"} <= verdicts, verdicts
    for n, r, g, w in zip(news, refs, got, want, strict=True):
        assert _same(g, w), (n.median_ms, n.ci_low_ms, n.ci_high_ms, n.rounds, r.median_ms, g, w)


def test_all_pairs_at_once_refuse_what_one_pair_refuses():
    with pytest.raises(ValueError, match="the threshold must be a finite number"):
        gate.stored_pairs([saved()], [saved()], threshold=math.nan)
    with pytest.raises(ValueError, match="1 results against 2"):
        gate.stored_pairs([saved()], [saved(), saved()])
    assert gate.stored_pairs([], []) == ([], [], [], [], [])
