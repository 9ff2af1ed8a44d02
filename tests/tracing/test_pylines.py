"""Python lines without a GPU: the frame capture of csrc/tracing/pylines.c (driven directly),
the lookup of notes by correlation id, the by-line table, collapsed stacks and the trace args."""

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import gpuprofile as gp
from gpuprofile import _C
from gpuprofile.tracing import activity as _activity
from gpuprofile.tracing import pylines
from gpuprofile.tracing.options import stacks_mode
from gpuprofile.tracing.profile import Profile

HERE = os.path.abspath(__file__)


def _qualified(name: str) -> str:
    """Functions are named by their qualified name from 3.11 (code objects have co_qualname);
    3.10 has only the plain name."""
    return name if sys.version_info >= (3, 11) else name.rsplit(".", 1)[-1]


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
    site, stack = _C._testing.pylines_capture(11)  # capture-here
    lines = _take()
    assert stack == 0xFFFFFFFF and lines.notes["correlation_id"].tolist() == [11]
    file, line, func, user = lines.sites[site]
    assert (file, line, func, user) == (HERE, _line_of("capture-here"),
                                        "test_capture_names_the_innermost_user_line", True)


def test_capture_without_the_gil_as_frameworks_call_cuda():
    _C._pylines_reset(())

    def launch(corr):
        return _C._testing.pylines_capture(corr, True, True)  # nogil-here

    got = launch(3)
    lines = _take("stack")
    if not _C._testing.pylines_nogil():  # another Python: frames are read only with the GIL
        assert got == (0xFFFFFFFF, 0xFFFFFFFF)
        return
    assert lines.sites[got[0]][:2] == (HERE, _line_of("nogil-here"))
    assert lines.frames(got[1])[-1].endswith(f"({HERE}:{_line_of('nogil-here')})")


def test_library_frames_are_skipped_to_the_user_line(tmp_path):
    lib = tmp_path / "fakelib" / "ops.py"
    lib.parent.mkdir()
    lib.write_text("import gpuprofile._C as C\n\ndef op(corr):\n    return C._testing.pylines_capture(corr)\n")
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
        return _C._testing.pylines_capture(corr, True)

    got = []
    for corr in (1, 2):
        got.append(inner(corr))
    a, b = got
    c = inner(3)
    lines = _take("stack")
    assert a == b and len(lines.stacks) == 2  # the same place twice: one site, one stack
    assert c[0] == a[0] and c[1] != a[1]  # same innermost line, another caller line
    frames = lines.frames(a[1])
    assert frames[-1].startswith(_qualified("test_stack_mode_interns_whole_stacks.<locals>.inner ("))
    assert frames[-2].startswith("test_stack_mode_interns_whole_stacks (")
    assert len(frames) >= 3  # pytest's frames above


def test_the_cache_of_the_last_capture_gives_what_the_lookups_give(tmp_path):
    """Each thread keeps its last capture's frames (code, offset) and reuses the site and stack
    when the next capture finds the same frames: in loops, from other lines, through a library
    frame, after a reset, and in stack mode with another caller."""
    lib = tmp_path / "fakelib" / "ops.py"
    lib.parent.mkdir()
    lib.write_text("import gpuprofile._C as C\n\ndef op(corr, whole=False, cached=True):\n"
                   "    return C._testing.pylines_capture(corr, whole, False, cached)\n")
    ns: dict = {}
    exec(compile(lib.read_text(), str(lib), "exec"), ns)
    op = ns["op"]
    for whole in (False, True):
        _C._pylines_reset((str(lib.parent) + os.sep,))

        def inner(corr, cached, whole=whole):
            return op(corr, whole, cached)  # inner-call

        def outer(corr, cached, inner=inner):
            return inner(corr, cached)  # outer-call

        cached = []
        for corr in range(4):
            cached.append(op(corr, whole))  # loop-a
        cached.append(op(10, whole))  # line-b
        cached.append(op(11, whole))  # line-b2
        cached += [inner(12, True), outer(13, True), inner(14, True)]
        plain = [op(20, whole, False), op(21, whole, False)]  # loop-a2
        assert cached[0] == cached[1] == cached[2] == cached[3]
        assert len({c[0] for c in cached[4:6]}) == 2 and cached[4][0] != cached[0][0]
        lines = _take("stack" if whole else "line")
        at = {m: (HERE, _line_of(m)) for m in ("loop-a", "line-b", "line-b2", "inner-call")}
        assert lines.sites[cached[0][0]][:2] == at["loop-a"]
        assert lines.sites[cached[4][0]][:2] == at["line-b"]
        assert lines.sites[cached[5][0]][:2] == at["line-b2"]
        # inner, then through outer (same innermost user line), then inner again
        assert {lines.sites[c[0]][:2] for c in cached[6:9]} == {at["inner-call"]}
        if whole:
            assert cached[6][1] == cached[8][1] != cached[7][1]
            assert lines.frames(cached[7][1])[-3].startswith(_qualified(
                "test_the_cache_of_the_last_capture_gives_what_the_lookups_give.<locals>.outer"))
        else:
            assert cached[6] == cached[7] == cached[8]
        assert lines.sites[plain[0][0]][:2] == (HERE, _line_of("loop-a2"))
        # after a reset the ids cached belong to cleared tables: they are looked up again
        _C._pylines_reset((str(lib.parent) + os.sep,))
        again = op(30, whole)  # after-reset
        lines = _take("stack" if whole else "line")
        assert lines.sites[again[0]][:2] == (HERE, _line_of("after-reset"))


def test_a_new_code_object_at_a_dead_ones_address_is_not_taken_for_it():
    """Functions made and dropped in a loop: their code objects (and file names) reuse freed
    memory; each capture still names its own file."""
    _C._pylines_reset(())
    files = []
    for k in range(200):
        name = f"/generated/mod{k:03d}.py"
        ns: dict = {}
        exec(compile("import gpuprofile._C as C\ndef f(corr):\n    return C._testing.pylines_capture(corr)\n",
                     name, "exec"), ns)
        ns["f"](k)
        files.append(name)
        del ns
    lines = _take()
    got = [lines.sites[s][0] for s in lines.notes["site"]]
    assert got == files


RUNTIME, DRIVER = 5, 4  # CUPTI_ACTIVITY_KIND_RUNTIME, _DRIVER
CUDA_LAUNCH_KERNEL, CU_LAUNCH_KERNEL, CU_MEMCPY_HTOD = 211, 307, 276  # callback ids (CUDA 13)
CUDA_GET_DEVICE = 17


def _api(rows):
    out = np.zeros(len(rows), pylines.API_RAW)
    for k, (runtime, corr, thread, start, end) in enumerate(rows):
        out[k] = (start, end, corr, thread, runtime)
    return out


def test_driver_launches_inside_runtime_launches_give_them_their_notes():
    """Notes are taken at driver calls; a kernel launched through the runtime carries the runtime
    call's id: the runtime record of the same thread that encloses the driver record links them."""
    notes = np.zeros(4, pylines.NOTE_RAW)
    notes["correlation_id"] = [11, 21, 31, 41]
    notes["site"] = [0, 1, 2, pylines.NONE]
    notes["stack"] = pylines.NONE
    api = _api([
        (1, 10, 7, 100, 200), (0, 11, 7, 120, 180),   # runtime 10 encloses driver 11
        (1, 20, 8, 100, 200), (0, 21, 8, 200, 200),   # another thread, touching ends
        (0, 31, 7, 210, 220),                          # driver-only launch (Triton): after 10
        (1, 40, 7, 300, 400), (0, 41, 7, 310, 320),   # enclosed, noted without a frame
        (1, 50, 9, 100, 200), (0, 51, 7, 130, 150),   # thread 9's runtime does not enclose 51
    ])
    rt, drv = pylines.enclosing_runtime_launches(api)
    got = sorted(zip(rt.tolist(), drv.tolist(), strict=True))
    assert got == [(10, 11), (10, 51), (20, 21), (40, 41)]
    linked = pylines.link_runtime_launches(notes, api)
    lines = pylines.PyLines("line", linked, [("/u/a.py", 1, "f", True)] * 3, [])
    site, _ = lines.lookup(np.array([10, 11, 20, 31, 40, 50, 51, 99]))
    assert site.tolist() == [0, 0, 1, 2, -1, -1, -1, -1]
    # nothing to link: the notes as they were
    assert pylines.link_runtime_launches(notes, api[:0]) is notes
    assert len(pylines.link_runtime_launches(notes[:0], api)) == 0


def test_the_store_keeps_only_launch_records_and_hands_them_over():
    _C._pylines_reset(())
    _C._testing.pylines_api_record(RUNTIME, CUDA_LAUNCH_KERNEL, 100, 200, 10, 7)
    _C._testing.pylines_api_record(DRIVER, CU_LAUNCH_KERNEL, 120, 180, 11, 7)
    _C._testing.pylines_api_record(RUNTIME, CUDA_GET_DEVICE, 90, 95, 9, 7)  # not a launch: dropped
    _C._testing.pylines_api_record(DRIVER, CU_MEMCPY_HTOD, 130, 140, 12, 7)  # copies carry the driver id
    _C._testing.pylines_api_record(3, CUDA_LAUNCH_KERNEL, 1, 2, 13, 7)  # another kind: dropped
    _C._testing.pylines_capture(11)  # the driver launch's note
    raw = _C._pylines_take()
    api = np.frombuffer(raw["api"], pylines.API_RAW)
    assert api["correlation_id"].tolist() == [10, 11] and api["runtime"].tolist() == [1, 0]
    assert api[0]["start"] == 100 and api[1]["end"] == 180 and set(api["thread"]) == {7}
    lines = pylines.PyLines.from_raw("line", raw)
    site, _ = lines.lookup(np.array([10, 11]))
    assert site[0] == site[1] >= 0
    assert len(_C._pylines_take()["api"]) == 0  # taken


def test_bad_arguments_are_clear_errors():
    with pytest.raises(TypeError, match="tuple of str"):
        _C._pylines_reset(["/usr"])
    with pytest.raises(TypeError, match="must be str"):
        _C._pylines_reset((1,))
    for bad in ("lines", 1, 2.0, ["stack"]):
        with pytest.raises(ValueError, match="python_stacks"):
            gp.profile(python_stacks=bad)
    assert stacks_mode(True) == "line" and stacks_mode("stack") == "stack"
    assert stacks_mode(False) is None


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
    chunk = _activity.Chunk(kernels=k, names=["k"])
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
    chunk = _activity.Chunk(kernels=k, names=[])
    w = _activity.Window(t0=0, t1=1, offset_ns=0, offset_uncertainty_ns=0, chunk=chunk)
    p = Profile._from_window(w)
    assert p.kernels["python_line"].tolist() == []
    with pytest.raises(gp.GpuProfileError, match="python_stacks=True"):
        p.by_line()


def test_site_folders_added_to_sys_path_are_library_code(monkeypatch, tmp_path):
    """A venv that sees another venv's packages through a .pth file (or PYTHONPATH): those
    packages are not the user's code either."""
    other = tmp_path / "other" / "lib" / "python3.12" / "site-packages"
    mine = tmp_path / "project" / "src"
    monkeypatch.setattr(sys, "path", [*sys.path, str(other), str(mine)])
    prefixes = pylines.excluded_prefixes()
    assert os.path.join(str(other), "") in prefixes
    assert not any(str(mine).startswith(p) for p in prefixes if p != "<frozen ")
