"""GPU time per Python line: which line of the user's code launched each kernel, copy and set.

`gpuprofile.profile(python_stacks="line")` (or True) notes, at every CUDA launch, copy, set and
graph launch made by a thread that holds the GIL, the innermost *user* frame: the first frame,
from the innermost outwards, whose file is not in the standard library, in site-packages or in
gpuprofile (csrc/tracing/pylines.c reads the frames inside CUPTI's callback, on the launching
thread). `"stack"` keeps the whole Python stack as well. Work launched by threads without a
Python frame (C++ worker threads) is labelled NO_FRAME.

Autograd's backward runs on engine threads without a Python frame too. When the user imported
torch, each note also carries torch's autograd sequence numbers (csrc/tracing/autograd.c,
calibrated by tracing/autograd_nodes.py): in the forward, the launching thread's next one; in the
backward, the node being run. join_backward() gives each backward launch the line (and stack) of
the first forward launch made after its node was created, marked as backward: " (backward)" after
its python_line, a `backward` key in by_line()'s rows, a "[backward]" frame before the leaf of
its collapsed stack.

Pure functions below turn the notes into per-row columns, the by-line table and the collapsed
stacks of a flame graph; gpuprofile.tracing.profile calls them.
"""

from __future__ import annotations

import html
import linecache
import os
import site
import sys
import sysconfig
from dataclasses import dataclass, field

import numpy as np

from .. import _C
from .._format import html_table, text_table
from .._tables import Tabular, named_row

NO_FRAME = "<no Python frame>"
BACKWARD_MARK = " (backward)"
FORWARD, BACKWARD = 1, 2  # a note's pass (GP_PASS_* of csrc/tracing/autograd.h); 0: not known
NOTE_RAW = np.dtype(_C._pylines_layout())
API_RAW = np.dtype(_C._pylines_api_layout())
NONE = 0xFFFFFFFF


def excluded_prefixes() -> tuple:
    """File prefixes that are not user code: the standard library, site-packages, gpuprofile."""
    paths = sysconfig.get_paths()
    found = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    try:
        found.update(site.getsitepackages())
        found.add(site.getusersitepackages())
    except AttributeError:  # some embedded interpreters lack them
        pass
    # site folders that reach sys.path another way (a .pth file, PYTHONPATH: a venv that sees
    # another venv's packages, as test_wheel.sh's does torch's) are library code too
    found.update(p for p in sys.path
                 if p and os.path.basename(os.path.normpath(p)) in ("site-packages", "dist-packages"))
    found.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    prefixes = {os.path.join(os.path.realpath(p), "") for p in found if p}
    prefixes |= {os.path.join(p, "") for p in found if p}
    return tuple(sorted(prefixes)) + ("<frozen ",)


@dataclass
class PyLines:
    """What one profile noted: notes (correlation id -> site, stack), the site table (file, line,
    function, user) and the stacks (site ids, innermost first)."""

    mode: str
    notes: np.ndarray
    sites: list
    stacks: list
    lost: int = 0
    autograd: str | None = None  # why backward launches have no forward line (None: they do)
    _labels: np.ndarray = field(default=None, repr=False)

    @classmethod
    def from_raw(cls, mode: str, raw: dict, autograd: str | None = None) -> PyLines:
        notes = np.frombuffer(raw["notes"], NOTE_RAW)
        api = np.frombuffer(raw["api"], API_RAW)
        sites = list(raw["sites"])
        notes = join_backward(notes, [bool(s[3]) for s in sites])
        return cls(mode, link_runtime_launches(notes, api), sites, list(raw["stacks"]),
                   int(raw["lost"]), autograd)

    @property
    def labels(self) -> np.ndarray:
        """'file:line' of each site, and NO_FRAME last (index len(sites))."""
        if self._labels is None:
            self._labels = np.array([f"{s[0]}:{s[1]}" for s in self.sites] + [NO_FRAME],
                                    dtype=object)
        return self._labels

    def lookup(self, *correlation_ids) -> tuple[np.ndarray, np.ndarray]:
        """(site, stack) per row, -1 where none: the first of `correlation_ids` (arrays of the
        same length) that was noted decides."""
        return self.find(*correlation_ids)[:2]

    def find(self, *correlation_ids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(site, stack, backward) per row, as lookup(), with whether autograd's backward
        launched it."""
        n = len(correlation_ids[0])
        site, stack = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
        backward = np.zeros(n, bool)
        for ids in reversed(correlation_ids):  # the first array wins: it is applied last
            at, hit = _find_notes(self.notes, ids)
            note = self.notes[at[hit]]
            s, st = note["site"].astype(np.int64), note["stack"].astype(np.int64)
            site[hit] = np.where(s == NONE, -1, s)
            stack[hit] = np.where(st == NONE, -1, st)
            backward[hit] = note["pass"] == BACKWARD
        return site, stack, backward

    def frames(self, stack: int) -> list[str]:
        """'function (file:line)' of each frame of stack `stack`, outermost first."""
        return [_frame(self.sites[s]) for s in reversed(self.stacks[stack]) if s != NONE]


def _find_notes(notes: np.ndarray, ids) -> tuple[np.ndarray, np.ndarray]:
    """(index into notes, found) of each correlation id (0 is never a call's id)."""
    ids = np.asarray(ids, dtype=np.uint32)
    if not len(notes):
        return np.zeros(len(ids), np.int64), np.zeros(len(ids), bool)
    order = np.argsort(notes["correlation_id"], kind="stable")
    keys = notes["correlation_id"][order]
    pos = np.minimum(np.searchsorted(keys, ids), len(keys) - 1)
    return order[pos], (keys[pos] == ids) & (ids > 0)


def join_backward(notes: np.ndarray, user: list) -> np.ndarray:
    """The notes, where each backward note whose launch had no user frame (`user`: per site,
    whether it is user code) takes the site and stack of its node's forward launch: the first
    forward launch, of the thread torch says made the node (any thread when it does not say),
    whose `seq` (that thread's next sequence number then) is above the node's, i.e. the first
    made after the node was created, normally by the op that created it. A node created before
    the first forward launch noted on its thread (its forward ran before the profile started)
    and AccumulateGrad (no sequence number: the largest one) find none. Pure."""
    back = np.flatnonzero(notes["pass"] == BACKWARD)
    if len(back):
        site = notes["site"][back]
        is_user = np.asarray(list(user) + [False], bool)  # the last: no site
        back = back[~is_user[np.where(site < len(user), site, len(user))]]
    forward = notes[notes["pass"] == FORWARD]
    if not len(back) or not len(forward):
        return notes
    notes = notes.copy()
    forward = forward[np.lexsort((forward["correlation_id"], forward["seq"], forward["thread"]))]
    for thread in np.unique(notes["thread"][back]):
        rows = back[notes["thread"][back] == thread]
        cand = forward[forward["thread"] == thread] if thread else np.sort(forward, order=[
            "seq", "correlation_id"])
        if not len(cand):
            continue
        seq = notes["seq"][rows]
        known = seq < np.iinfo(np.uint64).max
        after = seq.copy()
        after[known] += np.uint64(1)
        at = np.searchsorted(cand["seq"], after, side="left")
        ok = known & (at < len(cand)) & (cand["seq"][0] <= after)
        found = cand[at[ok]]
        notes["site"][rows[ok]] = found["site"]
        notes["stack"][rows[ok]] = found["stack"]
    return notes


def enclosing_runtime_launches(api: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(runtime ids, driver ids): each driver launch record paired with the runtime launch record
    of the same thread that encloses it in time (start <= start, end >= end); driver launches
    made outside the runtime (Triton, CuPy) have none. Runtime launches do not nest, so the one
    that started last before a driver launch is the only candidate."""
    runtime, driver = api[api["runtime"] == 1], api[api["runtime"] == 0]
    got_rt, got_drv = [], []
    for thread in np.unique(driver["thread"]) if len(runtime) else ():
        r = runtime[runtime["thread"] == thread]
        if not len(r):
            continue
        r = r[np.argsort(r["start"], kind="stable")]
        d = driver[driver["thread"] == thread]
        at = np.searchsorted(r["start"], d["start"], side="right") - 1
        inside = at >= 0
        at = np.maximum(at, 0)
        inside &= r["end"][at] >= d["end"]
        got_rt.append(r["correlation_id"][at[inside]])
        got_drv.append(d["correlation_id"][inside])
    if not got_rt:
        return np.empty(0, np.uint32), np.empty(0, np.uint32)
    return np.concatenate(got_rt), np.concatenate(got_drv)


def link_runtime_launches(notes: np.ndarray, api: np.ndarray) -> np.ndarray:
    """The notes, plus one for each runtime launch that encloses a noted driver launch (the
    driver call's site and stack under the runtime call's id): kernel records of runtime
    launches carry the runtime call's id, while the notes are taken at the driver call."""
    rt, drv = enclosing_runtime_launches(api)
    if not len(rt) or not len(notes):
        return notes
    at, hit = _find_notes(notes, drv)
    extra = notes[at[hit]].copy()
    extra["correlation_id"] = rt[hit]
    return np.concatenate([notes, extra])


def _frame(site) -> str:
    return f"{site[2]} ({site[0]}:{site[1]})"


def columns(lines: PyLines | None, *correlation_ids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(python_line, python_site, python_stack) columns for rows with these correlation ids:
    'file:line' (NO_FRAME when the launch was not noted, '' when not recorded; BACKWARD_MARK
    after it for autograd's backward), site and stack indices (-1)."""
    n = len(correlation_ids[0])
    if lines is None:
        return np.full(n, "", dtype=object), np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    site, stack, backward = lines.find(*correlation_ids)
    label = lines.labels[np.where(site >= 0, site, len(lines.sites))]
    if backward.any():
        label = label.copy()
        label[backward] = label[backward] + BACKWARD_MARK
    return label, site, stack


@dataclass
class LineTable(Tabular):
    """GPU time per Python source line (or function) of a profile: print() it, or show it in a
    notebook. rows: dicts with line/function, backward (autograd's backward launched the rows:
    a line's forward and backward time are two rows), source, rows (kernels, copies and sets),
    kernels, gpu_ms, share (of the GPU time of every row), mean_us."""

    rows: list
    per: str
    total_ms: float

    def to_dict(self) -> dict:
        return {"per": self.per, "total_ms": self.total_ms, "rows": list(self.rows)}

    def table_rows(self) -> list:
        """One row per line (or function), largest GPU time first, named and scaled as printed:
        share_pct in percent (rows' and to_dict()'s `share` is the 0..1 fraction); per line,
        also the line's function (not printed: the source is)."""
        extra = (lambda r: {"function": r.get("function")}) if self.per == "line" else (lambda r: {})
        return [{**named_row(self._headers(), self._cells(r)), **extra(r)} for r in self.rows]

    def _headers(self) -> list:
        key = "line" if self.per == "line" else "function"
        return [key, "backward", "rows", "kernels", "GPU ms", "share %", "mean µs"] + (
            ["source"] if self.per == "line" else [])

    def _cells(self, r) -> list:
        key = "line" if self.per == "line" else "function"
        return [r[key], bool(r.get("backward")), r["rows"], r["kernels"], r["gpu_ms"],
                100 * r["share"], r["mean_us"]] + ([r["source"]] if self.per == "line" else [])

    def _table(self):
        body = []
        for r in self.rows:
            row = self._cells(r)
            row[1] = "yes" if row[1] else ""
            row[4:7] = [f"{row[4]:.3f}", f"{row[5]:.1f}", f"{row[6]:.1f}"]
            body.append(row)
        return self._headers(), body

    def __str__(self) -> str:
        head, body = self._table()
        return (f"GPU time per Python {self.per} ({self.total_ms:.3f} ms in all)\n"
                + text_table(head, body))

    def __repr__(self) -> str:
        return f"<LineTable per {self.per}: {len(self.rows)} rows, {self.total_ms:.3f} ms>"

    def _repr_html_(self) -> str:
        head, body = self._table()
        return (f"<p>GPU time per Python {html.escape(self.per)} "
                f"({self.total_ms:.3f} ms in all)</p>" + html_table(head, body))


def by_line(lines: PyLines, site, duration_ns, is_kernel, per: str = "line",
            backward=None) -> LineTable:
    """The by-line (per="line") or by-function (per="function") table of rows with these site
    indices (-1: no Python frame), durations, kernel flags and backward flags (None: none),
    largest GPU time first; a line's forward and backward rows are apart. Pure."""
    if per not in ("line", "function"):
        raise ValueError(f"per must be 'line' or 'function', got {per!r}")
    site = np.asarray(site, np.int64)
    duration = np.asarray(duration_ns, np.int64)
    is_kernel = np.asarray(is_kernel, bool)
    backward = np.zeros(len(site), bool) if backward is None else np.asarray(backward, bool)
    total = int(duration.sum())
    if per == "line":
        keys = [(-1,) if s < 0 else (int(s),) for s in site]
    else:
        keys = [(NO_FRAME,) if s < 0 else (lines.sites[s][0], lines.sites[s][2]) for s in site]
    keys = [(*k, bool(b)) for k, b in zip(keys, backward, strict=True)]
    groups: dict = {}
    for k, d, kern in zip(keys, duration, is_kernel, strict=True):
        g = groups.setdefault(k, [0, 0, 0])
        g[0] += 1
        g[1] += int(kern)
        g[2] += int(d)
    rows = []
    for k, (n, kernels, ns) in sorted(groups.items(), key=lambda kv: (-kv[1][2], str(kv[0]))):
        *k, back = k
        row = {"backward": back, "rows": n, "kernels": kernels, "gpu_ms": ns / 1e6,
               "share": ns / total if total else 0.0, "mean_us": ns / n / 1e3}
        if per == "line":
            if k[0] < 0:
                row.update(line=NO_FRAME, function="", source="")
            else:
                file, lineno, func, _ = lines.sites[k[0]]
                row.update(line=f"{file}:{lineno}", function=func,
                           source=linecache.getline(file, lineno).strip())
        else:
            row["function"] = NO_FRAME if k == [NO_FRAME] else f"{k[1]} ({k[0]})"
        rows.append(row)
    return LineTable(rows, per, total / 1e6)


def collapsed_stacks(lines: PyLines, site, stack, leaf, duration_ns,
                     collapse_libraries: bool = False, backward=None) -> str:
    """Collapsed-stack text (one 'frame;frame;...;leaf value' line per distinct stack, value in
    ns of GPU time): what flamegraph.pl and speedscope read. Frames run outermost first; `leaf`
    (the kernel or copy name) ends each stack, after a '[backward]' frame for rows autograd's
    backward launched (`backward`: flags, None: none). In "line" mode the stack is the one
    site. With `collapse_libraries`, runs of non-user frames become one '[library]' frame.
    Pure."""
    totals: dict = {}
    backward = np.zeros(len(site), bool) if backward is None else np.asarray(backward, bool)
    for s, st, name, d, back in zip(site, stack, leaf, duration_ns, backward, strict=True):
        if st >= 0:
            ids = [i for i in reversed(lines.stacks[st]) if i != NONE]
        elif s >= 0:
            ids = [int(s)]
        else:
            ids = []
        frames = []
        for i in ids:
            if collapse_libraries and not lines.sites[i][3]:
                if not frames or frames[-1] != "[library]":
                    frames.append("[library]")
            else:
                frames.append(_frame(lines.sites[i]))
        frames = frames or [NO_FRAME]
        if back:
            frames.append("[backward]")
        key = ";".join([*frames, str(name)]).replace("\n", " ")
        totals[key] = totals.get(key, 0) + int(d)
    return "".join(f"{k} {v}\n" for k, v in sorted(totals.items()))
