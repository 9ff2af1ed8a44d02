"""Progress of long work (attention sweeps, multi-pass counter replays): tqdm when it is
installed, else a quiet fallback. Either shows nothing for work that ends within `delay` seconds,
writes to stderr only, and GPUPROFILE_PROGRESS=0 turns both off. tqdm is never required."""

from __future__ import annotations

import os
import sys
import time

DELAY_S = 2.0  # show nothing for work shorter than this
FALLBACK_INTERVAL_S = 5.0  # the fallback writes a line at most this often


class _Quiet:
    """The fallback: after `delay` seconds, one stderr line every `interval` seconds at most
    ('desc: 3/10 (12 s)'), and a last line on close if any was written."""

    def __init__(self, total, desc, delay, interval, file, clock=time.monotonic):
        self.total, self.desc, self.n = total, desc, 0
        self._delay, self._interval, self._file, self._clock = delay, interval, file, clock
        self._t0 = clock()
        self._last = None
        self._note = ""

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self._clock()
        if now - self._t0 < self._delay:
            return
        if self._last is None or now - self._last >= self._interval:
            self._write(now)

    def set_note(self, note: str) -> None:
        self._note = note

    def _write(self, now) -> None:
        total = f"/{self.total}" if self.total else ""
        note = f" {self._note}" if self._note else ""
        print(f"{self.desc}: {self.n}{total}{note} ({now - self._t0:.0f} s)", file=self._file, flush=True)
        self._last = now

    def close(self) -> None:
        if self._last is not None and self._last != self._clock():
            self._write(self._clock())


class _Tqdm:
    def __init__(self, bar):
        self._bar = bar

    def update(self, n: int = 1) -> None:
        self._bar.update(n)

    def set_note(self, note: str) -> None:
        self._bar.set_postfix_str(note, refresh=False)

    def close(self) -> None:
        self._bar.close()


def _tqdm(total, desc, delay, file):
    """A tqdm bar (the plain text one: stderr, also in notebooks, no widgets needed), or None
    without tqdm or with one too old for `delay` (4.61)."""
    try:
        from tqdm import tqdm

        return _Tqdm(tqdm(total=total, desc=desc, delay=delay, file=file, leave=False))
    except Exception:  # noqa: BLE001 - not installed, or an old tqdm refusing `delay`: the fallback
        return None


class _Off:
    def update(self, n: int = 1) -> None:
        pass

    def set_note(self, note: str) -> None:
        pass

    def close(self) -> None:
        pass


class Progress:
    """Progress of `total` steps (None: unknown): bar.update(), bar.set_note(text); close() or
    leave the `with` block at the end. `wrap(fn)` returns fn counting one step per call."""

    def __init__(self, total: int | None, desc: str, *, delay: float = DELAY_S, file=None):
        file = sys.stderr if file is None else file
        if os.environ.get("GPUPROFILE_PROGRESS", "1") == "0":
            self._impl = _Off()
            return
        self._impl = _tqdm(total, desc, delay, file) or _Quiet(total, desc, delay, FALLBACK_INTERVAL_S, file)

    def update(self, n: int = 1) -> None:
        self._impl.update(n)

    def set_note(self, note: str) -> None:
        self._impl.set_note(note)

    def close(self) -> None:
        self._impl.close()

    def wrap(self, fn):
        def counted(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            finally:
                self.update()

        return counted

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def progress(total: int | None, desc: str, *, delay: float = DELAY_S, file=None) -> Progress:
    """`with progress(10, "sweep") as bar: ... bar.update()`: see Progress."""
    return Progress(total, desc, delay=delay, file=file)
