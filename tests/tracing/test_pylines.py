"""Python lines without a GPU: the frame capture of csrc/tracing/pylines.c (driven directly),
the lookup of notes by correlation id, the by-line table, collapsed stacks and the trace args."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

import gpuprofile as gp
from gpuprofile import _C
from gpuprofile.tracing import activity as _activity
from gpuprofile.tracing import pylines
from gpuprofile.tracing.profile import Profile

HERE = os.path.abspath(__file__)


def _line_of(marker):
    with open(HERE) as f:
        for n, text in enumerate(f, 1):
            if marker in text and "_line_of" not in text:
                return n
    raise AssertionError(marker)


def _library_call(fn):
    return fn()  # a frame of a "library": this file's helper, excluded below via a fake module


def _take(mode="line"):
    return pylines.PyLines.from_raw(mode, _C._pylines_take())


def test_capture_names_the_innermost_user_line():
    _C._pylines_reset(())
    site, stack = _C._pylines_capture(11)  # capture-here
    lines = _take()
    assert stack == 0xFFFFFFFF and lines.notes["correlation_id"].tolist() == [11]
    file, line, func, user = lines.sites[site]
    assert (file, line, func, user) == (HERE, _line_of("capture-here"),
                                        "test_capture_names_the_innermost_user_line", True)


def test_capture_without_the_gil_as_frameworks_call_cuda():
    _C._pylines_reset(())

    def launch(corr):
        return _C._pylines_capture(corr, True, True)  # nogil-here

    got = launch(3)
    lines = _take("stack")
    if not _C._pylines_nogil():  # another Python: frames are read only with the GIL
        assert got == (0xFFFFFFFF, 0xFFFFFFFF)
        return
    assert lines.sites[got[0]][:2] == (HERE, _line_of("nogil-here"))
    assert lines.frames(got[1])[-1].endswith(f"({HERE}:{_line_of('nogil-here')})")


def test_library_frames_are_skipped_to_the_user_line(tmp_path):
    lib = tmp_path / "fakelib" / "ops.py"
    lib.parent.mkdir()
    lib.write_text("import gpuprofile._C as C\n\ndef op(corr):\n    return C._pylines_capture(corr)\n")
    code = compile(lib.read_text(), str(lib), "exec")
    ns: dict = {}
    exec(code, ns)
    _C._pylines_reset((str(lib.parent) + os.sep,))
    ns["op"](5)  # user-call
    lines = _take()
    (site,) = lines.notes["site"]
    assert lines.sites[site][:2] == (HERE, _line_of("user-call"))
    # everything excluded: the innermost frame stands in
    _C._pylines_reset((str(lib.parent) + os.sep, os.path.dirname(HERE) + os.sep, "/", "<"))
    ns["op"](6)
    lines = _take()
    assert lines.sites[lines.notes["site"][0]][:2] == (str(lib), 4)
    assert lines.sites[lines.notes["site"][0]][3] is False


def test_stack_mode_interns_whole_stacks():
    _C._pylines_reset(())

    def inner(corr):
        return _C._pylines_capture(corr, True)

    got = []
    for corr in (1, 2):
        got.append(inner(corr))
    a, b = got
    c = inner(3)
    lines = _take("stack")
    assert a == b and len(lines.stacks) == 2  # the same place twice: one site, one stack
    assert c[0] == a[0] and c[1] != a[1]  # same innermost line, another caller line
    frames = lines.frames(a[1])
    assert frames[-1].startswith("test_stack_mode_interns_whole_stacks.<locals>.inner (")
    assert frames[-2].startswith("test_stack_mode_interns_whole_stacks (")
    assert len(frames) >= 3  # pytest's frames above


def test_bad_arguments_are_clear_errors():
    with pytest.raises(TypeError, match="tuple of str"):
        _C._pylines_reset(["/usr"])
    with pytest.raises(TypeError, match="must be str"):
        _C._pylines_reset((1,))
    for bad in ("lines", 1, 2.0, ["stack"]):
        with pytest.raises(ValueError, match="python_stacks"):
            gp.profile(python_stacks=bad)
    assert pylines.mode_of(True) == "line" and pylines.mode_of("stack") == "stack"
    assert pylines.mode_of(False) is None


def test_excluded_prefixes_cover_the_library_and_gpuprofile():
    prefixes = pylines.excluded_prefixes()
    assert any(np.__file__.startswith(p) for p in prefixes)
    assert any(gp.tracing.pylines.__file__.startswith(p) for p in prefixes)
    assert not any(HERE.startswith(p) for p in prefixes)


def _synthetic_lines():
    notes = np.zeros(4, pylines.NOTE_RAW)
    notes["correlation_id"] = [10, 20, 30, 31]
    notes["site"] = [0, 1, 0, pylines.NONE]
    notes["stack"] = [0, 1, 0, pylines.NONE]
    sites = [("/u/train.py", 12, "step", True), ("/u/train.py", 20, "loss", True),
             ("/lib/torch/nn.py", 99, "forward", False)]
    stacks = [(0,), (2, 1)]  # innermost first: loss <- forward (a library frame inside)
    return pylines.PyLines("stack", notes, sites, stacks)


def test_lookup_and_columns():
    lines = _synthetic_lines()
    site, stack = lines.lookup(np.array([20, 10, 99, 31, 0]))
    assert site.tolist() == [1, 0, -1, -1, -1] and stack.tolist() == [1, 0, -1, -1, -1]
    # copies: the runtime id decides, the driver id stands in when the runtime one was not noted
    site, _ = lines.lookup(np.array([0, 30]), np.array([20, 10]))
    assert site.tolist() == [1, 0]
    label, _, _ = pylines.columns(lines, np.array([10, 99]))
    assert label.tolist() == ["/u/train.py:12", pylines.NO_FRAME]
    label, site, stack = pylines.columns(None, np.array([10]))
    assert label.tolist() == [""] and site.tolist() == [-1] and stack.tolist() == [-1]


def test_by_line_table():
    lines = _synthetic_lines()
    table = pylines.by_line(lines, [0, 0, 1, -1], [1000, 3000, 2000, 4000],
                            [True, True, False, True])
    rows = [(r["line"], r["rows"], r["kernels"], r["gpu_ms"]) for r in table.rows]
    assert rows == [(pylines.NO_FRAME, 1, 1, 0.004), ("/u/train.py:12", 2, 2, 0.004),
                    ("/u/train.py:20", 1, 0, 0.002)]
    assert table.rows[1]["share"] == 0.4 and table.rows[1]["mean_us"] == 2.0
    assert table.total_ms == 0.01 and "/u/train.py:12" in str(table)
    assert "<table" in table._repr_html_()
    funcs = pylines.by_line(lines, [0, 1, -1], [1, 2, 3], [True] * 3, per="function")
    assert [r["function"] for r in funcs.rows] == [pylines.NO_FRAME, "loss (/u/train.py)",
                                                   "step (/u/train.py)"]
    with pytest.raises(ValueError, match="per"):
        pylines.by_line(lines, [], [], [], per="file")


def test_collapsed_stacks():
    lines = _synthetic_lines()
    text = pylines.collapsed_stacks(lines, [1, 1, 0, -1], [1, 1, -1, -1],
                                    ["gemm", "gemm", "relu", "sum"], [5, 7, 2, 3])
    assert text.splitlines() == [
        f"{pylines.NO_FRAME};sum 3",
        "loss (/u/train.py:20);forward (/lib/torch/nn.py:99);gemm 12",
        "step (/u/train.py:12);relu 2",
    ]
    text = pylines.collapsed_stacks(lines, [1], [1], ["gemm"], [5], collapse_libraries=True)
    assert text == "loss (/u/train.py:20);[library];gemm 5\n"


def _profile_with_lines(tmp_path):
    k = np.zeros(3, _activity.KERNEL_RAW)
    k["correlation_id"] = [10, 20, 31]
    k["start"], k["end"] = [100, 200, 300], [150, 260, 370]
    chunk = _activity.Chunk(k, np.empty(0, _activity.MEMCPY_RAW),
                            np.empty(0, _activity.MEMSET_RAW), np.empty(0, _activity.MEMORY_RAW),
                            np.empty(0, _activity.EXTCORR_RAW), names=["k"])
    w = _activity.Window(t0=0, t1=1000, offset_ns=0, offset_uncertainty_ns=0, chunk=chunk)
    return Profile._from_window(w, python_lines=_synthetic_lines(), python_stacks="stack")


def test_profile_rows_table_and_exports(tmp_path):
    p = _profile_with_lines(tmp_path)
    assert p.kernels["python_line"].tolist() == ["/u/train.py:12", "/u/train.py:20",
                                                 pylines.NO_FRAME]
    assert p.kernels["python_stack"].tolist() == [0, 1, -1]
    assert [r["line"] for r in p.by_line().rows] == [pylines.NO_FRAME, "/u/train.py:20",
                                                     "/u/train.py:12"]
    out = p.export_collapsed_stacks(tmp_path / "stacks.txt")
    assert sorted(Path(out).read_text().splitlines()) == sorted([
        "step (/u/train.py:12);k 50", f"{pylines.NO_FRAME};k 70",
        "loss (/u/train.py:20);forward (/lib/torch/nn.py:99);k 60"])
    trace = json.loads(Path(p.export_chrome_trace(tmp_path / "t.json")).read_text())
    pythons = sorted(e["args"]["python"] for e in trace["traceEvents"]
                     if e.get("cat") == "kernel")
    assert pythons == sorted([pylines.NO_FRAME, "/u/train.py:12", "/u/train.py:20"])


def test_a_profile_without_lines_says_how_to_get_them():
    k = np.zeros(0, _activity.KERNEL_RAW)
    chunk = _activity.Chunk(k, np.empty(0, _activity.MEMCPY_RAW),
                            np.empty(0, _activity.MEMSET_RAW), np.empty(0, _activity.MEMORY_RAW),
                            np.empty(0, _activity.EXTCORR_RAW), names=[])
    w = _activity.Window(t0=0, t1=1, offset_ns=0, offset_uncertainty_ns=0, chunk=chunk)
    p = Profile._from_window(w)
    assert p.kernels["python_line"].tolist() == []
    with pytest.raises(gp.GpuProfileError, match="python_stacks=True"):
        p.by_line()
