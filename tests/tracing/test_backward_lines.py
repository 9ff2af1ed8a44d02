"""Backward launches on their forward lines, without a GPU: the join of backward notes to forward
notes (tracing/pylines.py join_backward) on synthetic notes, the by-line table, collapsed stacks
and columns with backward rows, the calibration's word finding, the C binding's errors, and, where
torch is installed, the whole path on a CPU graph: csrc/tracing/autograd.c's marks taken by
_testing.pylines_capture in the forward and inside the backward."""

import os
import sys
import threading

import numpy as np
import pytest

from gpuprofile import _C
from gpuprofile.tracing import autograd_nodes, pylines

F, B = pylines.FORWARD, pylines.BACKWARD
MAX = np.iinfo(np.uint64).max
SITES = [("/u/model.py", 10, "attn", True), ("/u/model.py", 11, "mlp", True),
         ("/lib/torch/nn.py", 99, "forward", False), ("/u/loss.py", 5, "hook", True)]
USER = [s[3] for s in SITES]


def _notes(rows):
    """rows: (correlation id, site or None, pass, seq, thread)."""
    notes = np.zeros(len(rows), pylines.NOTE_RAW)
    for k, (corr, site, pas, seq, thread) in enumerate(rows):
        notes[k]["correlation_id"] = corr
        notes[k]["site"] = pylines.NONE if site is None else site
        notes[k]["stack"] = pylines.NONE if site is None else site + 100
        notes[k]["pass"] = pas
        notes[k]["seq"] = seq
        notes[k]["thread"] = thread
    return notes


def _sites(notes):
    return [None if s == pylines.NONE else int(s) for s in notes["site"]]


def test_a_backward_note_takes_the_first_forward_launch_after_its_node():
    notes = _notes([
        (1, 0, F, 5, 1),      # node 4 was created, then this launch (line 10)
        (2, 0, F, 5, 1),      # a second launch of the same op
        (3, 1, F, 7, 1),      # nodes 5 (a view: no launch) and 6, then line 11
        (10, None, B, 6, 1),  # node 6 -> line 11
        (11, None, B, 5, 1),  # node 5 launched nothing in the forward: the next launch, line 11
        (12, None, B, 4, 1),  # node 4 -> line 10
        (13, 2, B, 4, 1),     # a library frame (a hook in torch): replaced too
        (14, 3, B, 6, 1),     # a user frame in the backward (a custom Function): kept
    ])
    out = pylines.join_backward(notes, USER)
    assert _sites(out) == [0, 0, 1, 1, 1, 0, 0, 3]
    assert out["stack"].tolist()[3:7] == [101, 101, 100, 100]  # the stack comes along
    assert out["pass"].tolist() == notes["pass"].tolist()
    assert _sites(notes)[3] is None  # the input is left as it was


def test_nodes_without_a_forward_launch_in_the_profile_keep_no_line():
    notes = _notes([
        (1, 0, F, 50, 1),
        (2, 1, F, 60, 2),       # another forward thread, its own counter
        (10, None, B, 10, 1),   # created before the first launch noted on thread 1
        (11, None, B, MAX, 1),  # AccumulateGrad: no sequence number
        (12, None, B, 60, 1),   # after the last forward launch of its thread
        (13, None, B, 59, 2),   # thread 2's node: thread 2's launch, not thread 1's
        (14, None, B, 49, 3),   # a thread with no forward launch
    ])
    out = pylines.join_backward(notes, USER)
    assert _sites(out) == [0, 1, None, None, None, 1, None]


def test_a_node_whose_thread_is_unknown_matches_any_forward_thread():
    notes = _notes([(1, 0, F, 3, 1), (2, 1, F, 9, 2), (10, None, B, 5, 0), (11, None, B, 2, 0)])
    assert _sites(pylines.join_backward(notes, USER)) == [0, 1, 1, 0]


def test_without_backward_or_forward_notes_nothing_changes():
    only_fwd = _notes([(1, 0, F, 3, 1), (2, None, 0, 0, 0)])
    assert pylines.join_backward(only_fwd, USER) is only_fwd
    only_bwd = _notes([(1, None, B, 3, 1)])
    assert pylines.join_backward(only_bwd, USER) is only_bwd
    empty = _notes([])
    assert len(pylines.join_backward(empty, USER)) == 0


def _joined_lines():
    notes = _notes([(1, 0, F, 5, 1), (2, 1, F, 6, 1), (10, None, B, 4, 1), (11, None, B, 5, 1),
                    (12, None, B, MAX, 1)])
    stacks = {k: (k,) for k in range(4)}
    return pylines.PyLines("line", pylines.join_backward(notes, USER), SITES,
                           [stacks.get(k - 100, ()) for k in range(104)])


def test_columns_and_find_mark_backward_rows():
    lines = _joined_lines()
    site, stack, back = lines.find(np.array([1, 10, 11, 12, 99]))
    assert site.tolist() == [0, 0, 1, -1, -1] and back.tolist() == [False, True, True, True, False]
    assert lines.lookup(np.array([10]))[0].tolist() == [0]
    label, _, _ = pylines.columns(lines, np.array([1, 10, 12, 99]))
    assert label.tolist() == ["/u/model.py:10", "/u/model.py:10 (backward)",
                              pylines.NO_FRAME + " (backward)", pylines.NO_FRAME]


def test_by_line_keeps_a_lines_forward_and_backward_apart():
    lines = _joined_lines()
    site, _, back = lines.find(np.array([1, 10, 11, 12]))
    table = pylines.by_line(lines, site, [1000, 3000, 2000, 500], [True] * 4, "line", back)
    rows = [(r["line"], r["backward"], r["gpu_ms"]) for r in table.rows]
    assert rows == [("/u/model.py:10", True, 0.003), ("/u/model.py:11", True, 0.002),
                    ("/u/model.py:10", False, 0.001), (pylines.NO_FRAME, True, 0.0005)]
    assert "yes" in str(table).splitlines()[3] and "backward" in str(table).splitlines()[1]
    assert list(table.to_pandas()["backward"]) == [True, True, False, True]
    funcs = pylines.by_line(lines, site, [1, 2, 3, 4], [True] * 4, "function", back)
    assert [(r["function"], r["backward"]) for r in funcs.rows] == [
        (pylines.NO_FRAME, True), ("mlp (/u/model.py)", True), ("attn (/u/model.py)", True),
        ("attn (/u/model.py)", False)]


def test_collapsed_stacks_put_a_backward_frame_before_the_leaf():
    lines = _joined_lines()
    site, _, back = lines.find(np.array([1, 10, 12]))
    text = pylines.collapsed_stacks(lines, site, [-1] * 3, ["gemm", "gemm_bwd", "add"],
                                    [5, 7, 2], backward=back)
    assert text.splitlines() == [
        "<no Python frame>;[backward];add 2",
        "attn (/u/model.py:10);[backward];gemm_bwd 7",
        "attn (/u/model.py:10);gemm 5",
    ]


def test_the_calibration_finds_the_words_that_hold_both_nodes_values():
    a = (7, 1, (11, 0, 7, 1, 1, 1, 0, 0) + (0,) * 8)
    b = (44, 2, (12, 0, 44, 3, 1, 2, 0, 0) + (0,) * 8)
    assert autograd_nodes._find_words(a, b) == (2, 5)
    # two words hold both thread ids: none is taken
    assert autograd_nodes._find_words(a, (44, 2, (12, 0, 44, 2, 1, 2) + (0,) * 10)) == (2, -1)
    # the thread id in no single word (an older torch): no thread word
    b_nothread = (44, 2, (12, 0, 44, 3, 1, 0, 0, 0) + (0,) * 8)
    assert autograd_nodes._find_words(a, b_nothread) == (2, -1)
    with pytest.raises(RuntimeError, match="same sequence number"):
        autograd_nodes._find_words(a, (7, 2, b[2]))
    with pytest.raises(RuntimeError, match="no single word"):
        autograd_nodes._find_words(a, (45, 2, b[2]))


def test_the_binding_refuses_what_it_cannot_use():
    with pytest.raises(_C.GpuProfileError, match="not loaded"):
        _C._autograd_bind("/nonexistent/libtorch_cpu.so")
    libc = "libc.so.6"  # loaded, but not torch
    with pytest.raises(_C.GpuProfileError, match="has no _ZN2at15sequence_number4peekEv"):
        _C._autograd_bind(libc)
    with pytest.raises(ValueError, match="nwords"):
        _C._autograd_probe(0)
    with pytest.raises(ValueError, match="bad node words"):
        _C._autograd_enable(3, 3)
    _C._autograd_disable()  # always allowed


# ---- the whole path on a CPU graph (torch installed) ------------------------------------------

HERE = os.path.abspath(__file__)
LIB = os.path.join(os.path.dirname(HERE), "_fake_site_packages_for_backward")


def _library_hook(corr):
    """A pre-hook whose code lies in an excluded file, noting `corr` as a launch would: run by a
    backward that a thread started straight from torch, the launch has no user frame, as in
    autograd's engine threads on a GPU."""
    code = compile("import gpuprofile._C as C\n\ndef make(corr):\n    def hook(grad):\n"
                   "        C._testing.pylines_capture(corr, False, True)\n    return hook\n",
                   os.path.join(LIB, "engine.py"), "exec")
    scope: dict = {}
    exec(code, scope)
    return scope["make"](corr)


def test_backward_captures_take_the_forward_lines_on_a_cpu_graph():
    torch = pytest.importorskip("torch")
    why = autograd_nodes.enable()
    assert why is None, why
    try:
        _C._pylines_reset(pylines.excluded_prefixes() + (os.path.join(LIB, ""),))
        x = torch.ones(4, requires_grad=True)
        y = x * 3
        _C._testing.pylines_capture(101)  # fwd-mul
        z = y.sin()
        _C._testing.pylines_capture(102)  # fwd-sin
        with torch.no_grad():
            _C._testing.pylines_capture(103)  # no node: still forward, after sin's
        for node, corr in ((y.grad_fn, 201), (z.grad_fn, 202)):
            node.register_prehook(_library_hook(corr))
        loss = z.sum()
        # backward from another thread, started from torch's own frame: no user frame on its
        # stack; the nodes still know their forward thread
        t = threading.Thread(target=loss.backward)
        t.start()
        t.join()
        assert x.grad is not None
        raw = _C._pylines_take()
    finally:
        autograd_nodes.disable()
    lines = pylines.PyLines.from_raw("line", raw)
    label, _, _ = pylines.columns(lines, np.array([101, 102, 103, 201, 202]))
    mul, sin = f"{HERE}:{_line('fwd-mul')}", f"{HERE}:{_line('fwd-sin')}"
    assert label.tolist() == [mul, sin, f"{HERE}:{_line('no node')}", mul + " (backward)",
                              sin + " (backward)"]


def test_marks_are_off_until_enabled_and_after_disabling():
    pytest.importorskip("torch")
    autograd_nodes.disable()
    _C._pylines_reset(())
    _C._testing.pylines_capture(1)
    notes = np.frombuffer(_C._pylines_take()["notes"], pylines.NOTE_RAW)
    assert notes["pass"].tolist() == [0] and notes["seq"].tolist() == [0]


def _line(marker):
    with open(HERE) as f:
        for n, text in enumerate(f, 1):
            if text.rstrip().endswith(f"# {marker}") or f"# {marker}:" in text:
                return n
    raise AssertionError(marker)


def test_a_failed_calibration_says_why_and_never_raises(monkeypatch):
    fake = type(sys)("torch")
    fake.__file__ = "/nonexistent/torch/__init__.py"  # its library is not loaded
    why, words = autograd_nodes._calibrate(fake)
    assert words is None and why.startswith("backward lines are off: GpuProfileError")
    monkeypatch.setattr(autograd_nodes, "_library", lambda torch: "libc.so.6")
    why, _ = autograd_nodes._calibrate(fake)
    assert "has no _ZN2at15sequence_number4peekEv" in why
    monkeypatch.undo()
    torch = sys.modules.get("torch")
    if torch is not None:  # torch's own error in the probe (an old torch without pre-hooks)
        def no_prehooks(torch):
            raise AttributeError("'Node' object has no attribute 'register_prehook'")

        monkeypatch.setattr(autograd_nodes, "_probe_two_nodes", no_prehooks)
        why, _ = autograd_nodes._calibrate(torch)
        assert why.startswith("backward lines are off: AttributeError")
        monkeypatch.undo()
        # a second binding of the same library keeps what the first calibration found
        assert autograd_nodes.enable() is None
        autograd_nodes.disable()
    monkeypatch.setattr(autograd_nodes, "_found", None)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert autograd_nodes.enable() == "torch is not imported"
