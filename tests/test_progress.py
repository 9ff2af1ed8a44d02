"""The progress display: silent for short work, the quiet fallback's lines, tqdm when installed
(a stand-in module here), and GPUPROFILE_PROGRESS=0."""

import io
import sys
import types

import pytest

from gpuprofile import _progress
from gpuprofile._progress import _Quiet, progress


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_quiet_fallback_is_silent_for_short_work():
    out, clock = io.StringIO(), Clock()
    bar = _Quiet(10, "sweep", delay=2.0, interval=5.0, file=out, clock=clock)
    for _ in range(10):
        clock.t += 0.1
        bar.update()
    bar.close()
    assert out.getvalue() == ""


def test_quiet_fallback_writes_a_line_now_and_then_and_a_last_one():
    out, clock = io.StringIO(), Clock()
    bar = _Quiet(10, "sweep", delay=2.0, interval=5.0, file=out, clock=clock)
    for _ in range(10):
        clock.t += 1.5
        bar.set_note("seq=512")
        bar.update()
    bar.close()
    assert out.getvalue().splitlines() == ["sweep: 2/10 seq=512 (3 s)", "sweep: 6/10 seq=512 (9 s)",
                                           "sweep: 10/10 seq=512 (15 s)"]


def test_wrap_counts_calls_even_when_they_raise(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # the fallback
    bar = progress(3, "runs", file=io.StringIO())
    fn = bar.wrap(lambda x: 1 / x)
    assert fn(2) == 0.5
    with pytest.raises(ZeroDivisionError):
        fn(0)
    assert bar._impl.n == 2


def test_tqdm_is_used_when_installed(monkeypatch):
    made = []

    class FakeTqdm:
        def __init__(self, **kw):
            made.append(self)
            self.kw, self.n, self.note, self.closed = kw, 0, None, False

        def update(self, n):
            self.n += n

        def set_postfix_str(self, note, refresh):
            self.note = note

        def close(self):
            self.closed = True

    module = types.ModuleType("tqdm")
    module.tqdm = FakeTqdm
    monkeypatch.setitem(sys.modules, "tqdm", module)
    with progress(4, "passes") as bar:
        bar.update()
        bar.set_note("x")
    (t,) = made
    assert t.kw["total"] == 4 and t.kw["desc"] == "passes" and t.kw["delay"] == _progress.DELAY_S
    assert t.kw["file"] is sys.stderr and (t.n, t.note, t.closed) == (1, "x", True)


def test_switched_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("GPUPROFILE_PROGRESS", "0")
    with progress(2, "x", delay=0) as bar:
        bar.update()
    assert type(bar._impl).__name__ == "_Off"


def test_a_tqdm_too_old_for_delay_gives_the_fallback(monkeypatch):
    def old_tqdm(total, desc, file, leave, **unexpected):
        if unexpected:
            raise TypeError(f"unexpected {sorted(unexpected)}")

    module = types.ModuleType("tqdm")
    module.tqdm = old_tqdm
    monkeypatch.setitem(sys.modules, "tqdm", module)
    monkeypatch.delenv("GPUPROFILE_PROGRESS", raising=False)
    assert isinstance(progress(3, "x")._impl, _Quiet)
