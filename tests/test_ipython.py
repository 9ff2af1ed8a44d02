"""The IPython extension on any machine, through IPython's InteractiveShell: %load_ext gpuprofile,
%gpu_timeit (line and cell) and %%gpuprofile (host-clock regions and a clear note without a
device); and `import gpuprofile` never importing IPython."""

import dataclasses
import re
import subprocess
import sys

import numpy as np
import pytest

import gpuprofile as gp

IPython = pytest.importorskip("IPython")

from IPython.core.error import UsageError  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402
from synthetic import memory_events  # noqa: E402

from gpuprofile.ipython import summary_line  # noqa: E402
from gpuprofile.notebook import CellReport, memory_peak  # noqa: E402
from gpuprofile.regions import report  # noqa: E402
from gpuprofile.tracing.timeline import build_timeline  # noqa: E402

QUICK = "--max-time 0.3 --max-noise 0.5 --clock host"
no_device = pytest.mark.skipif(gp.device_count() > 0, reason="checks the no-device behaviour")


@pytest.fixture(scope="module")
def shell():
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "gpuprofile")
    return sh


def test_import_gpuprofile_does_not_import_ipython():
    code = "import sys, gpuprofile; print('IPython' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_line_magic_sees_the_notebooks_names_and_returns_the_result(shell):
    shell.user_ns["xs"] = list(range(100))
    with capture_output() as cap:
        r = shell.run_line_magic("gpu_timeit", f"-o {QUICK} --flops 100 --name total sum(xs)")
    assert isinstance(r, gp.BenchmarkResult) and r.name == "total" and r.flops == 100
    assert r.clock == "host" and r.iterations >= 10 and cap.outputs == []
    assert cap.stdout == summary_line(r) + "\n"


def test_line_magic_prints_one_line_like_timeit(shell):
    with capture_output() as cap:
        assert shell.run_line_magic("gpu_timeit", f"{QUICK} sorted(range(50))") is None
    assert cap.outputs == [] and cap.stdout.count("\n") == 1
    assert re.fullmatch(r"\S+ (ns|µs|ms|s) ± \S+ \1 per call \(median ± 95 % CI, host clock, \d+ calls\)\n",
                        cap.stdout)


def test_n_is_the_number_of_calls_and_r_the_rounds(shell):
    with capture_output() as cap:
        r = shell.run_line_magic("gpu_timeit", "-o -n 37 -r 2 --clock host sum(range(10))")
    assert r.stop_reason == "fixed" and r.iterations == 74 and r.inner == 1 and r.rounds == 2
    assert r.name == "sum(range(10))"
    assert cap.stdout.endswith("(median ± 95 % CI, host clock, 74 calls, 2 rounds)\n")


def test_attached_values_and_combined_flags(shell):
    with capture_output() as cap:
        r = shell.run_line_magic("gpu_timeit", "-qon5 --rounds=2 --clock=host 1 + 1")
    assert r.iterations == 10 and r.rounds == 2 and cap.stdout == "" and cap.outputs == []


def test_q_prints_nothing_and_returns_nothing_without_o(shell):
    with capture_output() as cap:
        assert shell.run_line_magic("gpu_timeit", "-q -n 3 --clock host 1 + 1") is None
    assert cap.stdout == "" and cap.stderr == "" and cap.outputs == []


def test_double_dash_ends_the_options(shell):
    shell.user_ns["x"] = 3
    with capture_output():
        r = shell.run_line_magic("gpu_timeit", "-o -n 3 --clock host -- -x + 1")
    assert r.name == "-x + 1"


def test_help_is_argparse_style(shell):
    doc = shell.find_line_magic("gpu_timeit").__doc__
    assert "::" in doc and "%gpu_timeit [-n N] [-r R] [-q] [-o] [-p P] [-h] [-v]" in doc
    assert "--repeat R, --rounds R" in doc


def test_summary_line_of_a_result():
    base = gp.benchmark(lambda: None, clock="host", max_time=0.3, max_noise=0.5)
    r = dataclasses.replace(base, median_ms=0.0166, ci_low_ms=0.0165, ci_high_ms=0.0167,
                            iterations=735, inner=1, clock="cupti", mode="cold", rounds=1)
    assert summary_line(r) == "16.6 µs ± 0.1 µs per call (median ± 95 % CI, CUPTI, 735 calls)"
    r = dataclasses.replace(r, median_ms=2.0, ci_low_ms=1.5, ci_high_ms=2.5, iterations=1,
                            clock="gpu", mode="hot")
    assert summary_line(r) == "2 ms ± 0.5 ms per call (median ± 95 % CI, CUDA events, hot, 1 call)"


def test_line_magic_v_displays_text_and_html(shell):
    with capture_output() as cap:
        assert shell.run_line_magic("gpu_timeit", f"-v {QUICK} sorted(range(50))") is None
    (shown,) = cap.outputs
    assert shown.data["text/plain"].startswith("BenchmarkResult 'sorted(range(50))'")
    assert "<table>" in shown.data["text/html"]


def test_cell_magic_runs_the_setup_line_without_touching_the_namespace(shell):
    shell.user_ns.update(k=64, ys=None)
    with capture_output():
        r = shell.run_cell_magic("gpu_timeit", f"-o {QUICK} ys = [1] * k", "total = sum(ys)\ntotal * 2")
    assert r.name == "total = sum(ys) …" and shell.user_ns["ys"] is None and "total" not in shell.user_ns


def test_rounds_repeat_the_measurement(shell):
    with capture_output():
        r = shell.run_line_magic("gpu_timeit", f"-o {QUICK} --rounds 2 sum(range(10))")
    assert r.rounds == 2 and len(r.round_medians_ms) == 2


@no_device
def test_without_a_device_the_magic_says_it_uses_the_host_clock(shell):
    with capture_output() as cap:
        r = shell.run_line_magic("gpu_timeit", "-o --max-time 0.3 --max-noise 0.5 1 + 1")
    assert r.clock == "host" and "no CUDA device" in cap.stderr and "host clock" in cap.stderr


@pytest.mark.parametrize("magic, line, cell, match", [
    ("gpu_timeit", "", None, "needs a statement"),
    ("gpu_timeit", "x = (", None, "not valid Python"),
    ("gpu_timeit", f"{QUICK} --flops lots 1", None, "argument --flops: invalid float value"),
    ("gpu_timeit", "--mode warm --clock host 1", None, "mode must be one of"),
    ("gpu_timeit", f"{QUICK} --rounds two 1", None, "argument -r/--repeat/--rounds: invalid int value"),
    ("gpu_timeit", f"{QUICK} --rounds 0 1", None, "rounds must be >= 1"),
    ("gpu_timeit", "-n lots 1", None, "invalid int value: 'lots'"),
    ("gpu_timeit", "-n 0 1", None, "-n needs a count >= 1"),
    ("gpu_timeit", "-t 1", None, "unknown option -t"),
    ("gpu_timeit", "--loops 3 1", None, "unknown option --loops"),
    ("gpu_timeit", "-n", None, "option -n needs a value"),
    ("gpuprofile", "extra words", "1", "takes only --trace PATH"),
])
def test_usage_errors(shell, magic, line, cell, match):
    with pytest.raises(UsageError, match=match):
        if cell is None:
            shell.run_line_magic(magic, line)
        else:
            shell.run_cell_magic(magic, line, cell)


@no_device
@pytest.mark.parametrize("options", ["-m graph", "--clock gpu"])
def test_device_only_options_without_a_device_are_usage_errors(shell, options):
    with pytest.raises(UsageError, match="CUDA device"):
        shell.run_line_magic("gpu_timeit", f"{options} 1 + 1")


def test_a_raising_statement_shows_its_own_traceback(shell):
    with pytest.raises(ZeroDivisionError):
        shell.run_line_magic("gpu_timeit", f"{QUICK} 1 / 0")


@no_device
def test_gpuprofile_cell_without_a_device_shows_the_cells_regions_and_why(shell):
    gp.reset()
    with gp.region("before"):
        pass
    cell = "import gpuprofile as gp\nwith gp.region('in cell'):\n    sum(range(1000))\nprint('ran')"
    with capture_output() as cap:
        shell.run_cell_magic("gpuprofile", "--trace t.json", cell)
    assert "ran" in cap.stdout
    (shown,) = cap.outputs
    text = shown.data["text/plain"]
    assert "in cell" in text and "before" not in text  # only the regions entered in the cell
    assert "no CUDA device" in text and "no trace written" in text
    assert shown.data["text/html"].startswith("<div>") and "in cell" in shown.data["text/html"]


def test_gpuprofile_cell_that_raises_still_reports(shell):
    with capture_output() as cap:
        shell.run_cell_magic("gpuprofile", "", "import gpuprofile as gp\nwith gp.region('r'):\n    1 / 0")
    assert "ZeroDivisionError" in cap.stdout + cap.stderr
    assert "r" in cap.outputs[-1].data["text/plain"]


# ---- the report's pure parts ----------------------------------------------------------------------


def test_memory_peak_of_a_timeline():
    t = build_timeline(memory_events([(1, "alloc", 100, 0x10), (2, "alloc", 50, 0x20),
                                      (3, "free", 100, 0x10), (4, "alloc", 20, 0x30)]))
    assert memory_peak(t) == 150
    assert memory_peak(t[:0]) == 0


def test_cell_report_text_and_html_without_a_trace():
    gp.reset()
    with gp.region("x"):
        pass
    r = CellReport(None, report(), peak_bytes=3 * 2**20, note="why", trace_path="t.json")
    text = str(r)
    assert "gpuprofile regions" in text and "note: why" in text and "3 MiB" in text
    assert "trace written to t.json" in text
    assert r.to_dict()["summary"] is None and r.to_dict()["peak_bytes"] == 3 * 2**20
    empty = CellReport(None, report(since_ns=np.iinfo(np.int64).max))
    assert str(empty) == "" and empty._repr_html_() == "<div></div>"
