"""gpuprofile.stalls(): where warps wait, from CUPTI PC sampling.

Every sampling period (2^period SM cycles) the hardware records, for a warp on each SM sub-
partition, its PC and its state: issuing (selected), or stalled for a reason (long_scoreboard =
waiting on global/local memory, short_scoreboard = shared memory/MIO, math_pipe_throttle, ...).
A reason's share = its samples / all reason samples of the kernel (CUPTI's totalSamples counts
more than the reason samples, so it is not the denominator). Each reason also has a
`_not_issued` twin (the subset of samples where no instruction issued); shares use the base
reasons only and report the twin as `not_issued`.

Source lines: PCs map to file:line through the cubin of the kernel's module, captured when the
module loads (kernels built with -lineinfo; gpuprofile's own are). Modules loaded before the
first stalls() or capture_cubins() call have no lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .. import _C
from .._format import Label, html_table, text_table
from .._tables import Tabular
from . import catalog as _catalog
from .kernel_filter import match
from .result import TERMINAL_WIDTH, terminal_lines

_REASON = re.compile(r"^smsp__pcsamp_warps_issue_stalled_(\w+?)(_not_issued)?$")


@dataclass(frozen=True)
class LineStalls:
    """Samples of one source line of a kernel."""

    file: str
    line: int
    samples: int
    reasons: dict  # reason -> samples

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "samples": self.samples, "reasons": dict(self.reasons)}


@dataclass(frozen=True)
class KernelStalls:
    """Stall breakdown of one kernel (function)."""

    name: str
    samples: int
    counts: dict  # reason -> samples
    not_issued: dict  # reason -> samples without an issued instruction
    lines: list = field(default_factory=list)

    @property
    def shares(self) -> dict:
        """reason -> fraction of the kernel's samples, largest first."""
        total = self.samples or 1
        return {r: c / total for r, c in sorted(self.counts.items(), key=lambda kv: -kv[1]) if c}

    def top(self, n: int = 3) -> list:
        return list(self.shares.items())[:n]

    def to_dict(self) -> dict:
        return {"name": self.name, "samples": self.samples, "counts": dict(self.counts),
                "not_issued": dict(self.not_issued), "shares": self.shares,
                "lines": [ln.to_dict() for ln in self.lines]}


@dataclass
class StallReport(Tabular):
    """Result of gpuprofile.stalls(): kernels by samples, CUPTI's totals, and notes."""

    kernels: list
    totals: dict
    period: int | None
    notes: list = field(default_factory=list)

    def __getitem__(self, name: str) -> KernelStalls:
        for k in self.kernels:
            if k.name == name or k.name.startswith(name + "("):
                return k
        raise KeyError(f"no kernel {name!r} sampled (kernels: {[k.name for k in self.kernels]}; "
                       f"totals: {self.totals}; notes: {self.notes})")

    def select(self, pattern: str) -> StallReport:
        """The kernels `pattern` matches (kernel_filter.py: as ncu's -k regex:, in the full and
        the short names); CUPTI's totals stay those of the whole run. What `gpuprofile stalls
        --kernel PATTERN` shows."""
        kept = [self.kernels[i] for i in match(pattern, [k.name for k in self.kernels])]
        note = f"kernels matching {pattern!r}: {len(kept)} of {len(self.kernels)}"
        return StallReport(kept, dict(self.totals), self.period, [*self.notes, note])

    def to_dict(self) -> dict:
        return {"kernels": [k.to_dict() for k in self.kernels], "totals": dict(self.totals),
                "period": self.period, "notes": list(self.notes)}

    def table_rows(self) -> list:
        """One row per kernel: name, samples, then the samples of each stall reason (a reason a
        kernel never stalled on is missing from its row: NaN in pandas, empty in CSV)."""
        return [{"kernel": k.name, "samples": k.samples, **k.counts} for k in self.kernels]

    def _rows(self, name_width=None):
        tops = [", ".join(f"{r} {s * 100:.1f} %" for r, s in k.top(3)) for k in self.kernels]
        if name_width is None:  # what a terminal's width leaves for the name, within 24..60
            rest = max([len(t) for t in tops] + [17]) + max([len(str(k.samples)) for k in self.kernels] + [7])
            name_width = max(24, min(60, TERMINAL_WIDTH - rest - 4))
        return [[Label(k.name, name_width), k.samples, top] for k, top in zip(self.kernels, tops, strict=True)]

    def __str__(self) -> str:
        head = terminal_lines(["gpuprofile stalls (PC sampling)", *(f"note: {n}" for n in self.notes)])
        return "\n".join(head) + "\n" + text_table(["kernel", "samples", "top stall reasons"], self._rows())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return html_table(["kernel", "samples", "top stall reasons"], self._rows(60),
                          title="gpuprofile stalls (PC sampling)")


def parse_reason(name: str):
    """(reason, is_not_issued) for a CUPTI stall-reason name, or None for other counters."""
    m = _REASON.match(name)
    if m is None:
        return None
    return m.group(1), m.group(2) is not None


def breakdown(reasons: list, pcs: dict, lines_of=None) -> list:
    """KernelStalls per function from PCSampler data: `reasons` (names by position) and `pcs`
    {(crc, function index, pc offset): [mangled name, [count per reason]]}. `lines_of(crc,
    mangled, pc_offset)` gives (file, dir, line) or None. Pure: tested on fixed data."""
    parsed = [parse_reason(r) for r in reasons]
    per_kernel: dict = {}
    for (crc, _, offset), (mangled, counts) in pcs.items():
        k = per_kernel.setdefault(mangled, {"counts": {}, "not_issued": {}, "lines": {}})
        line = lines_of(crc, mangled, offset) if lines_of is not None else None
        for p, c in zip(parsed, counts, strict=True):
            if p is None or not c:
                continue
            reason, twin = p
            bucket = k["not_issued"] if twin else k["counts"]
            bucket[reason] = bucket.get(reason, 0) + c
            if line is not None and not twin:
                key = (line[0], line[2])
                entry = k["lines"].setdefault(key, {})
                entry[reason] = entry.get(reason, 0) + c
    out = []
    for mangled, k in per_kernel.items():
        lines = [LineStalls(f, ln, sum(r.values()), r) for (f, ln), r in k["lines"].items()]
        lines.sort(key=lambda s: -s.samples)
        out.append(KernelStalls(_C._demangle(mangled), sum(k["counts"].values()), k["counts"],
                                k["not_issued"], lines))
    out.sort(key=lambda s: -s.samples)
    return out


def capture_cubins() -> dict:
    """Start keeping the cubins of CUDA modules loaded from now on, so stalls() can name source
    lines for their kernels. stalls() captures during its own call; call this earlier (before
    the kernels you care about first run) to cover more modules. It holds CUPTI's subscriber
    until release_cubins(): a torch.profiler that has not run yet in this process cannot
    initialize CUPTI meanwhile (its traces would have no kernels). Returns what has been
    captured so far."""
    return _C._capture_cubins(True)


def release_cubins() -> None:
    """Stop the capture capture_cubins() started (the cubins kept so far stay usable)."""
    _C._release_cubins(True)


def stalls(fn, *args, period: int | None = None, max_pcs: int = 4096, source_lines: bool = True,
           setup=None, **kwargs) -> StallReport:
    """Run fn(*args, **kwargs) once under PC sampling; the stall-reason breakdown per kernel,
    and per source line where line info is available.

    period: log2 of the sampling interval in SM cycles (5..31; default CUPTI's). max_pcs: PC
    records per buffer fetch. setup: called once before fn."""
    if not callable(fn):
        raise TypeError(f"stalls(fn): fn must be callable, got {type(fn).__name__}")
    _C._current_device()  # NoDeviceError first
    _catalog.require_counters_free("gpuprofile.stalls()")
    notes = []
    if source_lines:
        try:
            _C._capture_cubins(False)  # during this call only, unless capture_cubins() pinned it
        except _C.CuptiError as e:
            notes.append(f"source lines unavailable: {e}")
            source_lines = False
    try:
        if setup is not None:
            setup()
        sampler = _C.PCSampler(period=period or 0, max_pcs=max_pcs)
        try:
            sampler.start()
            fn(*args, **kwargs)
            sampler.stop()
        finally:
            sampler.close()
    finally:
        _C._release_cubins()
    totals = sampler.totals
    if totals["hardware_buffer_full"]:
        notes.append("the hardware buffer filled up: some samples were lost (use a larger period)")
    if totals["dropped_samples"]:
        notes.append(f"{totals['dropped_samples']} samples dropped by the hardware")
    lines_of = _C._sass_to_source if source_lines else None
    kernels = breakdown(sampler.reasons, sampler.pcs, lines_of)
    if not kernels and totals["total_samples"] and totals["non_user_samples"] == totals["total_samples"]:
        # Seen with CUDA 13.0 on an H200 and an H100 (2026-11-26): once CUPTI's range profiler
        # has collected counters on a kernel in this process, and also in a second stalls() of a
        # kernel first launched after the first stalls() ended (probably because CUDA loads a
        # kernel lazily, at its first launch, here between the two PC sampling sessions), PC
        # sampling files every sample of it as a non-user kernel's.
        raise _C.GpuProfileError(
            f"PC sampling took {totals['total_samples']} samples, but CUPTI filed all of them as "
            "non-user kernels', so there is no breakdown to report. This happens to kernels whose "
            "hardware counters were collected earlier in this process (gpuprofile.metrics() or "
            "region(metrics=...)), and to kernels first launched after an earlier stalls() in "
            "this process ended. Run stalls() first, once per process, or in a fresh process.")
    if source_lines and kernels and not any(k.lines for k in kernels):
        notes.append("no source lines: the kernels' modules loaded before cubin capture started "
                     "(call gpuprofile.capture_cubins() earlier) or lack -lineinfo")
    return StallReport(kernels, totals, period, notes)
