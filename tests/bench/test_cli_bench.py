"""`gpuprofile bench` and `gpuprofile compare` on any machine: statements compiled the timeit way,
the host-clock benchmark, and comparisons of saved files (single results and pytest plugin files)
with their verdicts and exit codes."""

import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

import gpuprofile as gp
from gpuprofile.bench.files import ResultFileError, compare_files, file_labels, load_results
from gpuprofile.bench.stmt import BadStatement, compile_stmt, stmt_name
from gpuprofile.cli import main

pytest_plugins = ["pytester"]

QUICK = ["--max-time", "0.5", "--max-noise", "0.5", "--clock", "host"]


# ---- statements -----------------------------------------------------------------------------------


def test_setup_names_are_visible_and_an_expression_returns_its_value():
    fn, ns = compile_stmt("a + b", "a = 2\nb = 3")
    assert fn() == 5 and ns["a"] == 2 and fn.__name__ == "a + b"


def test_statements_run_as_a_body_and_return_nothing():
    fn, ns = compile_stmt("xs.append(1)\nxs.append(2)", "xs = []", name="two appends")
    assert fn() is None and ns["xs"] == [1, 2] and fn.__qualname__ == "two appends"


def test_an_existing_namespace_is_used_and_indented_text_is_accepted():
    ns = {"k": 10}
    fn, _ = compile_stmt("""
        total = 0
        for i in range(k):
            total += i
        """, namespace=ns)
    assert fn() is None and "total" not in ns  # the body's names are locals


@pytest.mark.parametrize("stmt, setup, match", [
    ("x = (", "", "statement is not valid Python"),
    ("x", "ran.append(1)\nimport (", "setup is not valid Python"),
    ("   ", "", "statement is empty"),
])
def test_bad_text_is_refused_before_anything_runs(stmt, setup, match):
    ns = {"ran": []}
    with pytest.raises(BadStatement, match=match):
        compile_stmt(stmt, setup, ns)
    assert ns["ran"] == []


def test_setup_errors_are_the_setups_own():
    with pytest.raises(ValueError, match="invalid literal") as info:
        compile_stmt("x", "x = int('nope')")
    assert not isinstance(info.value, BadStatement)


def test_tracebacks_point_at_the_statement_line():
    fn, _ = compile_stmt("y = 1\n1 / 0")
    with pytest.raises(ZeroDivisionError) as info:
        fn()
    assert info.traceback[-1].lineno + 1 == 2  # pytest counts from 0


def test_stmt_names_are_short():
    assert stmt_name("x @ x") == "x @ x"
    assert stmt_name("a = 1\nb = 2") == "a = 1 …"
    assert len(stmt_name("f(" + "x, " * 40 + ")")) == 48


# ---- gpuprofile bench --------------------------------------------------------------------------------


def test_bench_prints_the_result_and_saves_it(capsys, tmp_path):
    out = tmp_path / "r.json"
    code = main(["bench", "-s", "import math", "-s", "n = 200", "math.factorial(n)", *QUICK,
                 "--name", "fact", "--flops", "1000", "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 0
    assert captured.out.startswith("BenchmarkResult 'fact'") and "host clock" in captured.out
    assert "TFLOP/s" in captured.out and f"saved to {out}" in captured.err
    saved = gp.BenchmarkResult.load(out)
    assert saved.name == "fact" and saved.clock == "host" and saved.flops == 1000
    assert len(saved.samples) * saved.inner == saved.iterations


@pytest.mark.skipif(gp.device_count() > 0, reason="checks the no-device behaviour")
def test_bench_without_a_device_says_it_uses_the_host_clock(capsys):
    assert main(["bench", "sum(range(100))", "--max-time", "0.5", "--max-noise", "0.5"]) == 0
    captured = capsys.readouterr()
    assert "no CUDA device" in captured.err and "host clock" in captured.err
    assert "measured with            host clock" in captured.out


@pytest.mark.skipif(gp.device_count() > 0, reason="checks the no-device behaviour")
@pytest.mark.parametrize("args", [["--mode", "graph"], ["--clock", "gpu"]])
def test_bench_device_only_options_without_a_device_fail_clearly(capsys, args):
    assert main(["bench", "1 + 1", *args]) == 2  # an error, never the status of a regression
    assert "CUDA device" in capsys.readouterr().err


@pytest.mark.parametrize("argv, code, message", [
    (["bench", "x = ("], 2, "not valid Python"),
    (["bench", "1", "--max-time", "0", "--clock", "host"], 2, "max_time must be > 0"),
    (["bench", "1", "--mode", "hot", "--clock", "host", "--max-noise", "-1"], 2, "max_noise"),
    (["bench", "1/0", *QUICK], 2, "the statement raised"),
    (["bench", "1", "-s", "import no_such_module_here", *QUICK], 2, "the setup raised"),
    (["bench", "1", "-s", "int('x')", *QUICK], 2, "the setup raised"),
    # bytes that are not UTF-8 reach argv as lone surrogates: said so, not "the setup raised"
    (["bench", "x = '\udcff'", *QUICK], 2, "the statement is not valid UTF-8 (byte 0xff at character 6)"),
    (["bench", "1", "-s", "\udce9 = 1", *QUICK], 2, "the setup is not valid UTF-8 (byte 0xe9"),
])
def test_bench_errors(capsys, argv, code, message):
    assert main(argv) == code
    err = capsys.readouterr().err
    assert message in err and err.count("gpuprofile bench: error:") == 1


def test_bench_usage_errors_exit_2_and_help_has_an_example():
    for argv, code in ((["bench"], 2), (["bench", "1", "--mode", "warm"], 2), (["bench", "--help"], 0)):
        out = subprocess.run([sys.executable, "-m", "gpuprofile", *argv], capture_output=True, text=True)
        assert out.returncode == code, out
        if code == 0:
            assert "examples:" in out.stdout and "gpuprofile bench -s" in out.stdout and not out.stderr
        else:
            assert "usage: gpuprofile bench" in out.stderr and not out.stdout


# ---- saved files and compare ---------------------------------------------------------------------------


def result(name, median, half_width, rounds=3):
    """A result of `rounds` rounds (3 by default: enough for the gate to call a change)."""
    r = gp.benchmark(sum, [1, 2, 3], clock="host", warmup=0, min_time=0.01, max_noise=0.5, name=name)
    r.median_ms, r.ci_low_ms, r.ci_high_ms = median, median - half_width, median + half_width
    r.samples = np.array([r.ci_low_ms, median, r.ci_high_ms])  # the median is its samples'
    r.rel_noise = half_width / median
    r.rounds, r.round_medians_ms = rounds, [median] * rounds if rounds > 1 else []
    return r


def plugin_file(path, results):
    """A file as pytest --gpu-benchmark-save writes it (see pytest_plugin.pytest_sessionfinish)."""
    entries = [{**r.to_dict(), "test": r.name.split("#")[0], "group": None} for r in results]
    path.write_text(json.dumps({"gpuprofile_benchmark_file": 1, "results": entries}))
    return path


def test_load_results_reads_every_kind_of_file(tmp_path):
    one = result("a", 1.0, 0.01)
    one.save(tmp_path / "one.json")
    plugin_file(tmp_path / "suite.json", [one, result("b", 2.0, 0.02)])
    (tmp_path / "list.json").write_text(json.dumps([one.to_dict()]))
    assert [r.name for r in load_results(tmp_path / "one.json")] == ["a"]
    assert [r.name for r in load_results(tmp_path / "suite.json")] == ["a", "b"]
    assert load_results(tmp_path / "list.json")[0] == one


@pytest.mark.parametrize("text, match", [
    ("{not json", "cannot read"), ('{"results": []}', "no gpuprofile benchmark results"),
    ('{"median_ms": 1, "name": "x"}', "lacks fields"), ("[1, 2]", "no gpuprofile benchmark"),
])
def test_unreadable_files_are_named(tmp_path, text, match):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ResultFileError, match=match):
        load_results(path)
    with pytest.raises(ResultFileError, match="cannot read"):
        load_results(tmp_path / "absent.json")


def test_single_results_are_compared_whatever_their_names():
    c = compare_files([("before.json", [result("x @ x", 1.0, 0.01)]),
                       ("after.json", [result("x.T @ x", 1.2, 0.01)])])
    base, after = c.rows
    assert (base.verdict, after.verdict, after.file) == ("baseline", "slower", "after.json")
    assert after.ratio == pytest.approx(1.2) and after.ratio_low == pytest.approx(1.19 / 1.01)
    assert c.regressions() == [after] and c.regressions(threshold_pct=20) == []
    assert c.counts() == {"slower": 1}


def test_suites_are_matched_by_name_with_new_and_missing_results():
    main_ = [result("t::fast", 1.0, 0.01), result("t::same", 2.0, 0.02), result("t::gone", 3.0, 0.1)]
    mine = [result("t::same", 2.01, 0.02), result("t::fast", 0.5, 0.01), result("t::new", 9.0, 0.1)]
    c = compare_files([("main.json", main_), ("mine.json", mine)])
    verdicts = [(r.name, r.file, r.verdict) for r in c.rows]
    assert verdicts == [
        ("t::fast", "main.json", "baseline"), ("t::fast", "mine.json", "faster"),
        ("t::same", "main.json", "baseline"), ("t::same", "mine.json", "same"),
        ("t::gone", "main.json", "baseline"), ("t::new", "mine.json", "new"),
    ]
    assert c.missing == [("t::gone", "mine.json")] and c.regressions() == []
    text = str(c)
    assert "compare: vs main.json" in text and "missing: t::gone (not in mine.json)" in text
    assert "verdicts: 1 faster, 1 new, 1 same" in text
    assert json.loads(json.dumps(c.to_dict()))["missing"] == [{"name": "t::gone", "file": "mine.json"}]
    assert "<table>" in c._repr_html_()


def test_baseline_choice_and_labels():
    files = [("a", [result("r", 1.0, 0.01)]), ("b", [result("r", 2.0, 0.01)])]
    c = compare_files(files, baseline=1)
    assert c.baseline == "b" and [r.verdict for r in c.rows] == ["faster", "baseline"]
    with pytest.raises(ValueError, match="out of range"):
        compare_files(files, baseline=2)
    with pytest.raises(ValueError, match="at least two"):
        compare_files(files[:1])
    assert file_labels(["x/r.json", "y/s.json"]) == ["r.json", "s.json"]
    assert file_labels(["x/r.json", "y/r.json"]) == ["x/r.json", "y/r.json"]
    assert file_labels(["r.json", "r.json"]) == ["r.json", "r.json (2)"]


def test_compare_command_exit_codes_for_ci(tmp_path, capsys):
    base = plugin_file(tmp_path / "main.json", [result("t::a", 1.0, 0.01), result("t::b", 1.0, 0.01)])
    worse = plugin_file(tmp_path / "mine.json", [result("t::a", 1.1, 0.01), result("t::b", 1.0, 0.01)])
    assert main(["compare", str(base), str(base)]) == 0
    capsys.readouterr()
    out = tmp_path / "c.json"
    assert main(["compare", str(base), str(worse), "--json", str(out)]) == 1
    captured = capsys.readouterr()
    assert "FAIL: 1 regression(s) beyond the threshold: t::a (mine.json, 1.1x)" in captured.err
    assert ("gate: t::a (mine.json): slower: 1.1x (95 % 1.079 .. 1.121) over 3+ rounds a side, host "
            "clock, threshold ±5 %: the whole interval is slower by more than the threshold") in captured.out
    assert json.loads(out.read_text())["baseline"] == "main.json"
    assert main(["compare", str(base), str(worse), "--fail-slower", "15"]) == 0
    assert main(["compare", str(worse), str(base), "--baseline", "1"]) == 1
    capsys.readouterr()
    # an output that cannot be written is an error (2), never a regression (1): refused before
    # comparing, even when a result is slower (here a directory, a missing folder, a 0444 file)
    (tmp_path / "ro.json").write_text("{}")
    os.chmod(tmp_path / "ro.json", 0o444)
    for bad in (tmp_path, tmp_path / "missing" / "c.json", tmp_path / "ro.json"):
        for option in ("--json", "--csv"):
            assert main(["compare", str(base), str(worse), option, str(bad)]) == 2
            captured = capsys.readouterr()
            assert f"gpuprofile compare: error: cannot write {bad}: " in captured.err
            assert captured.out == ""
    # written in place where it is a device: -o /dev/null keeps /dev/null
    assert main(["compare", str(base), str(base), "--json", "/dev/null", "--csv", "/dev/null"]) == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("argv, message", [
    (["compare", "{a}"], "at least two files"),
    (["compare", "{a}", "{tmp}/absent.json"], "cannot read"),
    (["compare", "{a}", "{a}", "--baseline", "5"], "out of range"),
    (["compare", "{a}", "{a}", "--fail-slower", "-1"], "must be >= 0"),
])
def test_compare_usage_errors_exit_2(tmp_path, capsys, argv, message):
    result("r", 1.0, 0.01).save(tmp_path / "a.json")
    argv = [a.format(a=tmp_path / "a.json", tmp=tmp_path) for a in argv]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_bench_then_compare_round_trip(tmp_path, capsys):
    paths = [tmp_path / "one.json", tmp_path / "two.json"]
    for path in paths:
        assert main(["bench", "sum(range(50))", *QUICK, "--json", str(path)]) == 0
    capsys.readouterr()
    assert main(["compare", *map(str, paths), "--fail-slower", "1000"]) == 0
    assert "two.json" in capsys.readouterr().out


def test_compare_reads_what_the_pytest_plugin_saves(pytester, capsys):
    pytester.makepyfile(test_suite="""
import pytest

@pytest.mark.gpu_benchmark(clock="host", warmup=0, min_time=0.01, max_time=0.3, max_noise=0.5)
def test_sum(gpu_benchmark):
    gpu_benchmark(sum, range(100))
""")
    for name in ("main.json", "mine.json"):
        pytester.runpytest_subprocess(f"--gpu-benchmark-save={pytester.path / name}").assert_outcomes(passed=1)
    assert main(["compare", str(pytester.path / "main.json"), str(pytester.path / "mine.json"),
                 "--fail-slower", "1000"]) == 0
    assert "test_suite.py::test_sum" in capsys.readouterr().out


def _suite(n, scale):
    """n results named t::0 .. t::n-1 (each its own str object), medians `scale` ms."""
    import dataclasses

    template = result("t::x", scale, 0.01 * scale)
    return [dataclasses.replace(template, name=f"t::{i}") for i in range(n)]


def test_compare_looks_each_name_up_a_bounded_number_of_times():
    """Complexity-independent: the names compared by == while matching two suites of n results
    (a list-membership check against every earlier name did n^2 / 2)."""
    import dataclasses

    class Name(str):
        compared = 0

        def __eq__(self, other):
            Name.compared += 1
            return str.__eq__(self, other)

        __hash__ = str.__hash__

    n = 3000
    files = [(label, [dataclasses.replace(r, name=Name(r.name)) for r in _suite(n, scale)])
             for label, scale in (("a", 1.0), ("b", 1.2))]
    Name.compared = 0
    c = compare_files(files)
    assert len(c.rows) == 2 * n and c.counts() == {"slower": n}
    assert Name.compared <= 4 * n, Name.compared


def test_compare_of_50k_results_takes_seconds(tmp_path):
    """Linear time end to end (load, match, print): 50k results a file (the quadratic match took
    minutes at this size); the bound is generous for a loaded CI machine."""
    import time

    for label, scale in (("a", 1.0), ("b", 1.2)):
        plugin_file(tmp_path / f"{label}.json", _suite(50_000, scale))
    t0 = time.process_time()
    files = [(p.name, load_results(p)) for p in (tmp_path / "a.json", tmp_path / "b.json")]
    c = compare_files(files)
    text = str(c)
    elapsed = time.process_time() - t0
    assert c.counts() == {"slower": 50_000} and text.count("\n") > 100_000
    assert elapsed < 60, f"{elapsed:.1f} s of CPU"


def test_loading_checks_field_by_field_once_per_shape_and_still_fails_closed(tmp_path, monkeypatch):
    """Complexity-independent: from_dict checks every field of a result only for a shape of
    field types it has not seen; results of a known shape (a saved suite) skip that loop, and
    the gate checks all results at once in compare_files (one by one only where that finds
    something, for the message). A value of another type, or a list item
    (a type says nothing of items), still gets the full check and its error."""
    import dataclasses

    import gpuprofile.bench.gate as gate
    import gpuprofile.bench.result as result_module

    full, checked = [], []
    real_full, real_problem = result_module._checked_fields, gate.problem
    monkeypatch.setattr(result_module, "_checked_fields", lambda cls, d: full.append(1) or real_full(cls, d))
    monkeypatch.setattr(gate, "problem", lambda r: checked.append(1) or real_problem(r))
    n = 2000
    for label, scale in (("a", 1.0), ("b", 1.2)):  # as the plugin saves them: no samples
        plugin_file(tmp_path / f"{label}.json", [
            dataclasses.replace(r, samples=np.empty(0), min_ms=r.ci_low_ms, max_ms=r.ci_high_ms)
            for r in _suite(n, scale)])
    files = [(p.name, load_results(p)) for p in (tmp_path / "a.json", tmp_path / "b.json")]
    assert len(full) <= 2, len(full)  # the first result of a shape (one shape here)
    c = compare_files(files)
    assert c.counts() == {"slower": n} and len(checked) == 0  # gate.passing() showed all good
    damaged = [files[0], (files[1][0], [*files[1][1][:-1], dataclasses.replace(files[1][1][-1], ci_high_ms=0.5)])]
    with pytest.raises(ResultFileError, match="outside its interval"):
        compare_files(damaged)
    assert len(checked) == 1  # the one result passing() did not show good, named by problem()
    entries = json.loads((tmp_path / "a.json").read_text())["results"]
    for field, value in (("median_ms", "1"), ("rounds", True), ("round_medians_ms", [1.0, "x", 1.0]),
                         ("median_ms", 10**400)):
        bad = [*entries[:3], {**entries[3], field: value}]
        (tmp_path / "bad.json").write_text(json.dumps({"gpuprofile_benchmark_file": 1, "results": bad}))
        with pytest.raises(ResultFileError, match=field):
            load_results(tmp_path / "bad.json")


def test_tables_formatted_a_line_at_a_time_read_as_before():
    """text_table's one format a line (compare prints 400k rows) gives ljust/rjust's text."""
    import math

    from gpuprofile._format import text_table

    assert text_table(["name", "x"], [["a", 1.5], ["bb", math.nan]], title="t") == (
        "t\nname    x\n----  ---\na     1.5\nbb      -")
    assert text_table(["name", "x"], []) == "name  x\n----  -"
    with pytest.raises(ValueError, match="2 headers"):
        text_table(["name", "x"], [["a"]])
