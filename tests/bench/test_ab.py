"""A/B in one run (bench/ab.py): the rotation and the paired ratio on fixed numbers, then
gp.benchmark of two callables on the host clock (a planted 10 % busy-wait is 'slower', the same
callable twice never is), `gpuprofile bench --ab`, %%gpu_timeit --ab and the pytest fixture's
compare(), which the plugin runs under pytester."""

import json
import math
import time

import numpy  # noqa: F401  (inline pytester runs drop modules they import; numpy cannot load twice)
import pytest

import gpuprofile as gp
from gpuprofile.bench import ab, gate
from gpuprofile.cli import main

pytest_plugins = ["pytester"]

QUICK = dict(clock="host", warmup=0.005, min_time=0.01, max_time=0.03)


def busy_wait(us):
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


def ref():
    busy_wait(20)


def slow():
    busy_wait(22)


# ---- pure parts ----------------------------------------------------------------------------------


def test_rotation_gives_every_entry_every_place():
    assert [ab.rotation(["a", "b", "c"], i) for i in range(4)] == [
        ["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert ab.rotation([], 3) == []


def test_interleave_calls_in_rotated_order_and_keeps_each_sides_results():
    calls = []
    got = ab.interleave({"a": lambda: calls.append("a") or 1, "b": lambda: calls.append("b") or 2}, 3)
    assert calls == ["a", "b", "b", "a", "a", "b"] and got == {"a": [1, 1, 1], "b": [2, 2, 2]}
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError, match="rounds"):
            ab.interleave({"a": lambda: 1}, bad)


def test_paired_ratio_median_and_order_statistic_interval():
    ref_ms = [1.0] * 10
    new_ms = [1.10, 1.12, 1.08, 1.11, 1.09, 1.10, 1.30, 1.10, 1.11, 1.09]
    # sorted ratios 1.08 1.09 1.09 1.10 1.10 1.10 1.11 1.11 1.12 1.30: ranks 2 and 9 bound the median
    assert ab.paired_ratio(new_ms, ref_ms) == (pytest.approx(1.10), 1.09, 1.12)
    assert all(map(math.isnan, ab.paired_ratio([1.0] * 5, [1.0] * 5)[1:]))  # < 6 rounds
    assert math.isnan(ab.paired_ratio([1.0, math.nan] * 4, [1.0] * 8)[0])
    with pytest.raises(ValueError, match="equal"):
        ab.paired_ratio([1.0], [1.0, 2.0])


def test_judge_drift_cancels_in_the_pairs():
    """Both sides drift by up to 10 % between rounds, together: the pairs see no change."""
    drift = [1.0, 1.1, 0.95, 1.05, 0.9, 1.08, 1.0, 0.97, 1.02, 1.1]
    assert ab.judge([d * 1.001 for d in drift], drift).verdict == "same"
    assert ab.judge([d * 1.10 for d in drift], drift).verdict == "slower"
    few = ab.judge([1.2] * 4, [1.0] * 4)
    assert few.verdict == "inconclusive" and "4 paired rounds, 6 needed" in few.why
    assert ab.judge([math.inf] * 8, [1.0] * 8).verdict == "unknown"


# ---- gp.benchmark of two callables on the host clock -----------------------------------------------


def test_benchmark_of_a_dict_catches_a_planted_ten_percent():
    r = gp.benchmark({"ref": ref, "new": slow}, **QUICK)
    assert isinstance(r, gp.ABResult) and r.reference == "ref" and r.rounds == 10
    assert r.verdict == "slower" and 1.05 < r.ratio_low <= r.ratio <= r.ratio_high
    assert r.results["new"].rounds == 10 and r.results["ref"].clock == "host"
    assert len(r.round_medians_ms["ref"]) == 10
    text = repr(r)
    assert "A/B: 10 interleaved rounds, order rotated, host clock" in text
    assert "new vs ref: slower: " in text and "over 10 paired rounds, host clock, threshold ±5 %" in text
    d = json.loads(json.dumps(r.to_dict()))
    assert d["decisions"]["new"]["verdict"] == "slower" and set(d["results"]) == {"ref", "new"}
    assert [row["verdict"] for row in r.table_rows()] == ["reference", "slower"]


def test_benchmark_of_the_same_callable_twice_is_not_slower():
    r = gp.benchmark([ref, ref], **QUICK)
    assert list(r.results) == ["ref", "ref#2"] and r.verdict in ("same", "inconclusive")


def test_benchmark_of_several_and_its_errors():
    r = gp.benchmark({"a": ref, "b": ref, "c": slow}, rounds=6, threshold=3, **QUICK)
    assert set(r.decisions) == {"b", "c"} and r.decisions["c"].threshold_pct == 3
    with pytest.raises(AttributeError, match="several candidates"):
        _ = r.verdict
    with pytest.raises(ValueError, match="two or more"):
        gp.benchmark({"a": ref})
    with pytest.raises(TypeError, match="'b' must be callable"):
        gp.benchmark({"a": ref, "b": 3})
    with pytest.raises(ValueError, match="A/B rounds must be an int >= 2"):
        gp.benchmark([ref, slow], rounds=1, **QUICK)
    with pytest.raises(ValueError, match="threshold"):
        gp.benchmark([ref, slow], threshold=-1, **QUICK)


def test_benchmark_passes_the_same_arguments_to_each():
    seen = []
    gp.benchmark({"a": lambda x, k: seen.append((x, k)), "b": lambda x, k: seen.append((x, k))},
                 7, k="v", rounds=2, **QUICK)
    assert set(seen) == {(7, "v")}


# ---- the CLI ------------------------------------------------------------------------------------------


def test_cli_bench_ab_two_statements(tmp_path, capsys):
    setup = "import time\ndef wait(us):\n    end = time.perf_counter() + us * 1e-6\n" \
            "    while time.perf_counter() < end: pass"
    out = tmp_path / "ab.json"
    assert main(["bench", "--ab", "-s", setup, "--clock", "host", "--max-time", "0.03",
                 "wait(20)", "wait(22)", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "wait(22) vs wait(20): slower: " in text and "over 10 paired rounds, host clock" in text
    assert json.loads(out.read_text())["decisions"]["wait(22)"]["verdict"] == "slower"


@pytest.mark.parametrize("argv, message", [
    (["bench", "--ab", "1 + 1"], "two or more statements"),
    (["bench", "--ab", "1 + 1", "1 +"], "gpuprofile bench --ab: error:"),
    (["bench", "--ab", "--rounds", "1", "1 + 1", "2 + 2"], "A/B rounds must be an int >= 2"),
])
def test_cli_bench_ab_usage_errors(capsys, argv, message):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


# ---- %%gpu_timeit --ab ------------------------------------------------------------------------------


def test_ipython_cell_ab_times_each_line():
    pytest.importorskip("IPython")
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpuprofile")
    shell.user_ns.update(wait=busy_wait)
    with capture_output() as cap:
        r = shell.run_cell_magic("gpu_timeit", "--ab -o --clock host --max-time 0.03 -r 6",
                                 "wait(20)\nwait(22)\n")
    assert isinstance(r, gp.ABResult) and r.rounds == 6 and list(r.results) == ["wait(20)", "wait(22)"]
    assert "wait(22) vs wait(20): " in cap.stdout
    with pytest.raises(UsageError, match="one statement per line"):
        shell.run_line_magic("gpu_timeit", "--ab wait(20)")


# ---- the pytest fixture -----------------------------------------------------------------------------

SUITE = """
import time

def wait(us):
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass

QUICK = dict(clock="host", warmup=0.005, min_time=0.01, max_time=0.03)

def test_same(gpu_benchmark):
    r = gpu_benchmark.compare(lambda: wait(20), lambda: wait(20), **QUICK)
    assert r.verdict in ("same", "inconclusive") and gpu_benchmark.result.rounds == 10

def test_slower(gpu_benchmark):
    gpu_benchmark.compare(lambda: wait(22), lambda: wait(20), **QUICK)

def test_faster(gpu_benchmark):
    assert gpu_benchmark.compare(wait, wait, 20, threshold=50, rounds=6, **QUICK).rounds == 6
"""


def test_fixture_compare_fails_only_a_slower_candidate(pytester):
    pytester.makepyfile(test_suite_ab=SUITE)
    out = pytester.path / "run.json"
    result = pytester.runpytest(f"--gpu-benchmark-save={out}")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_suite_ab.py::test_slower: candidate vs reference: slower: *over 10 paired rounds, "
                                 "host clock, threshold ±5 %*"])
    names = [r["name"] for r in json.loads(out.read_text())["results"]]
    assert "test_suite_ab.py::test_same[reference]" in names and "test_suite_ab.py::test_same[candidate]" in names


def test_the_default_threshold_is_the_gates():
    assert ab.AB_DEFAULTS["rounds"] >= gate.MIN_PAIRED_ROUNDS and gate.DEFAULT_THRESHOLD_PCT == 5.0


@pytest.mark.gpu
def test_ab_on_the_gpu_clock_catches_a_planted_five_percent():
    """The same API on the device clock (CUPTI where usable, else CUDA events): a 5 us spin
    kernel against one 5 % longer."""
    r = gp.benchmark({"ref": lambda: gp.kernels.spin(5_000), "new": lambda: gp.kernels.spin(5_250)},
                     max_time=0.2)
    assert r.clock in ("cupti", "gpu") and r.verdict == "slower" and 1.03 < r.ratio < 1.08
    same = gp.benchmark([lambda: gp.kernels.spin(5_000)] * 2, max_time=0.2)
    assert same.verdict in ("same", "inconclusive")
