"""MetricsResult: the plain-data result of gpuprofile.metrics() and region(metrics=...), with
text and HTML rendering (SOL bars) and the verdicts of verdicts.py."""

from __future__ import annotations

import html
import math
import textwrap
from dataclasses import dataclass, field

from .._format import fmt, html_table, short_name, text_table
from .._tables import Tabular
from .kernel_filter import match
from .metric_sets import (
    DRAM_READ,
    DRAM_WRITE,
    DURATION,
    FLOP_COUNTERS,
    MEMORY_SOL,
    SM_SOL,
    TENSOR_OPS,
    TENSOR_PIPE,
)
from .verdicts import Verdict, bound_from_sol, combine, roofline_point
from .verdicts import aggregation as _aggregation

# The printed form: one section per kernel (as ncu's default page), every line at most
# TERMINAL_WIDTH characters; to_csv(), to_pandas() and to_dict() keep the wide form, every kernel.
TERMINAL_WIDTH = 120
_MAX_KERNEL_SECTIONS = 30  # kernels printed; the rest is named in a last line
_METRIC_WIDTH = 84  # metric names longer than this (none of CUPTI's today) are cut with …
_NAME_WIDTH = 40

# cache_control, as Nsight Compute's --cache-control: "all" flushes L2 before each counted
# kernel or pass (ncu's default), "none" leaves the caches as the work before left them.
CACHE_CONTROL = ("all", "none")
# gpuprofile never locks clocks: ncu's --clock-control none, the one policy, in every result.
CLOCK_CONTROL = "none"
# What each cache_control did, by range mode, in the words the result prints.
_CACHE_WORDS = {
    ("all", "auto"): "L2 flushed before each kernel",
    ("all", "user"): "L2 flushed before each pass",
    ("none", "auto"): "not flushed",
    ("none", "user"): "not flushed",
}


def _short(name: str, width: int = _NAME_WIDTH) -> str:
    return short_name(name, width)


@dataclass(frozen=True)
class KernelMetrics:
    """Metric values of one range: a kernel (per="kernel") or the whole call (per="call")."""

    name: str
    index: int
    values: dict

    def __getitem__(self, metric: str) -> float:
        return self.values[metric]

    def to_dict(self) -> dict:
        return {"name": self.name, "index": self.index, "values": dict(self.values)}


@dataclass
class MetricsResult(Tabular):
    """Hardware counters of one collection.

    total[metric] combines the kernels as aggregation[metric] says: "exact" (one range covered
    the whole call or region), "sum" (counts), "max"/"min", or "weighted" (rates and
    percentages, weighted by each kernel's gpu__time_duration). passes is how many times the
    work ran under the profiler (user replay) or how many times CUPTI replayed each kernel
    (kernel replay); cost_s is the wall time of the collection, setup_s the one-time part.
    """

    label: str
    per: str
    metrics: list
    info: dict
    kernels: list
    total: dict
    aggregation: dict
    passes: int
    replay: str
    ranges: str
    calls: int
    cost_s: float
    setup_s: float
    chip: str
    sets: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    counter_data_bytes: int = 0
    cache_control: str = "all"  # as ncu's --cache-control: "all" (flushed) or "none"
    clock_control: str = CLOCK_CONTROL  # as ncu's --clock-control: gpuprofile never locks clocks

    def state(self) -> str:
        """Which cache and clock state the numbers describe, as one line."""
        words = _CACHE_WORDS.get((self.cache_control, self.ranges), self.cache_control)
        return (f"caches: {words} (cache_control={self.cache_control!r}, as ncu --cache-control "
                f"{self.cache_control}); clocks: not locked (as ncu --clock-control "
                f"{self.clock_control})")

    # ---- access ------------------------------------------------------------------------------

    def __getitem__(self, metric: str) -> float:
        return self.total[metric]

    def unit(self, metric: str) -> str:
        info = self.info.get(metric)
        return info.unit if info is not None else ""

    def _kernel(self, kernel):
        if kernel is None:
            return None
        if isinstance(kernel, int):
            return self.kernels[kernel]
        for k in self.kernels:
            if k.name == kernel:
                return k
        raise KeyError(f"no kernel {kernel!r} (kernels: {[k.name for k in self.kernels]})")

    def value(self, metric: str, kernel=None) -> float:
        """The total, or the value of one kernel (index or name)."""
        k = self._kernel(kernel)
        return self.total[metric] if k is None else k.values[metric]

    def _values(self, kernel):
        k = self._kernel(kernel)
        return self.total if k is None else k.values

    # ---- verdicts ----------------------------------------------------------------------------

    def bound(self, kernel=None) -> Verdict:
        """Memory-, compute- or latency-bound from the SOL metrics (collect "sol")."""
        v = self._values(kernel)
        return bound_from_sol(v.get(SM_SOL), v.get(MEMORY_SOL), v.get(TENSOR_PIPE))

    def flops(self, kernel=None) -> dict:
        """Exact FLOPs by kind (fp32, fp64, fp16 from SASS counters; tensor from tensor-path op
        counters) and their total. Needs the "roofline" set."""
        v = self._values(kernel)
        missing = [m for group in FLOP_COUNTERS.values() for m in group if m not in v]
        missing += [m for m in TENSOR_OPS if m not in v]
        if missing:
            raise KeyError(f"FLOPs need the 'roofline' metric set; missing {missing[0]} ...")
        out = {kind: math.fsum(v[m] * w for m, w in group.items()) for kind, group in FLOP_COUNTERS.items()}
        out["tensor"] = math.fsum(v[m] for m in TENSOR_OPS)
        out["total"] = math.fsum(out.values())
        return out

    def roofline(self, ceilings=None, kernel=None):
        """RooflinePoint of the total (or one kernel) against measured ceilings (default:
        gpuprofile.ceilings() of the current device). The compute roof is the tensor peak when
        tensor ops are at least half the FLOPs, else the FP32 peak."""
        if ceilings is None:
            from .roofline import ceilings as measure

            ceilings = measure()
        v = self._values(kernel)
        f = self.flops(kernel)
        for m in (DRAM_READ, DRAM_WRITE, DURATION):
            if m not in v:
                raise KeyError(f"roofline needs {m} (the 'roofline' metric set)")
        peak = ceilings.tensor_flops_per_s if f["tensor"] >= 0.5 * f["total"] and f["total"] > 0 \
            else ceilings.fp32_flops_per_s
        return roofline_point(f["total"], v[DRAM_READ] + v[DRAM_WRITE], v[DURATION] * 1e-9, peak,
                              ceilings.dram_bytes_per_s)

    def select(self, pattern: str) -> MetricsResult:
        """The kernels `pattern` matches (kernel_filter.py: a regular expression or text, searched
        in the full and the short names, as ncu's -k regex:), with the total recombined over
        them; what `gpuprofile metrics --kernel PATTERN` shows. Needs per-kernel ranges."""
        if self.ranges != "auto":
            raise ValueError("selecting kernels needs per='kernel' ranges; this result has one "
                             "range for the whole call")
        kept = [self.kernels[i] for i in match(pattern, [k.name for k in self.kernels])]
        durations = [k.values.get(DURATION, 0.0) for k in kept]
        total = {m: combine([k.values[m] for k in kept], durations, self.aggregation[m])
                 for m in self.metrics}
        note = f"kernels matching {pattern!r}: {len(kept)} of {len(self.kernels)}"
        return MetricsResult(**{**self.__dict__, "kernels": kept, "total": total,
                                "notes": [*self.notes, note]})

    # ---- presentation ------------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {
            "label": self.label, "per": self.per, "metrics": list(self.metrics),
            "units": {m: self.unit(m) for m in self.metrics},
            "total": dict(self.total), "aggregation": dict(self.aggregation),
            "kernels": [k.to_dict() for k in self.kernels], "passes": self.passes,
            "replay": self.replay, "ranges": self.ranges, "calls": self.calls,
            "cost_s": self.cost_s, "setup_s": self.setup_s, "chip": self.chip,
            "sets": list(self.sets), "notes": list(self.notes),
            "counter_data_bytes": self.counter_data_bytes,
            "cache_control": self.cache_control, "clock_control": self.clock_control,
            "bound": self.bound().to_dict() if SM_SOL in self.total else None,
        }

    def table_rows(self) -> list:
        """One row per metric, as the printed table: metric, unit, aggregation, total, then one
        column per kernel range, named "INDEX: NAME" (absent with one range for the call)."""
        shown = self.kernels if self.ranges == "auto" else []
        return [{"metric": m, "unit": self.unit(m), "aggregation": self.aggregation.get(m),
                 "total": self.total.get(m, float("nan")),
                 **{f"{k.index}: {k.name}": k.values.get(m, float("nan")) for k in shown}}
                for m in self.metrics]

    def _header(self) -> list:
        n = len(self.kernels)
        what = f"{n} kernel{'s' if n != 1 else ''}" if self.ranges == "auto" else "one range"
        lines = [f"gpuprofile metrics: {self.label} [{self.chip}]: {self.passes} pass"
                 f"{'es' if self.passes != 1 else ''} ({self.replay} replay), {what}, cost "
                 f"{self.cost_s:.3f} s (+{self.setup_s:.3f} s setup)", self.state()]
        if SM_SOL in self.total and MEMORY_SOL in self.total:
            lines.append(f"bound: {self.bound()}")
        lines += [f"note: {n}" for n in self.notes]
        return terminal_lines(lines)

    def _tables(self) -> list:
        """[(title, headers, rows)]: the total (or the one range), then one section per kernel,
        metric / unit / value, as ncu's default page: a terminal's width whatever the number of
        kernels. Up to _MAX_KERNEL_SECTIONS kernels; the last title names the rest (to_csv() and
        to_pandas() have every kernel, as columns)."""
        def rows(values):
            return [[_short_metric(m), self.unit(m), values.get(m, float("nan"))]
                    for m in self.metrics]

        kernels = self.kernels if self.ranges == "auto" else []
        what = (f"total over {len(kernels)} kernels ({', '.join(sorted(set(self.aggregation.values())))})"
                if kernels else "the one range (exact)")
        tables = [(what, ["metric", "unit", "value"], rows(self.total))]
        for k in kernels[:_MAX_KERNEL_SECTIONS]:
            title = f"[{k.index}] {_short(k.name, TERMINAL_WIDTH - 8 - len(str(k.index)))}"
            tables.append((title, ["metric", "unit", "value"], rows(k.values)))
        if len(kernels) > _MAX_KERNEL_SECTIONS:
            tables.append((f"(+{len(kernels) - _MAX_KERNEL_SECTIONS} more kernels: to_csv(), "
                           "to_pandas())", [], []))
        return tables

    def __str__(self) -> str:
        parts = ["\n".join(self._header())]
        for title, headers, rows in self._tables():
            parts.append(text_table(headers, rows, title=title) if headers else title)
        return "\n\n".join(parts)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        head = "".join(f"<div>{html.escape(line)}</div>" for line in self._header())
        bars = "".join(
            _sol_bar(m, self.total[m]) for m in self.metrics
            if self.unit(m) == "percent" and m in self.total and "pct_of_peak" in m
        )
        tables = "".join(html_table(headers, rows, title=title) if headers else
                         f"<div>{html.escape(title)}</div>" for title, headers, rows in self._tables())
        return f"<div>{head}{bars}{tables}</div>"


def terminal_lines(lines: list, width: int = TERMINAL_WIDTH) -> list:
    """`lines` cut at spaces to at most `width` characters, continuations indented by two."""
    return [piece for line in lines for piece in textwrap.wrap(
        line, width, subsequent_indent="  ", break_on_hyphens=False) or [""]]


def _short_metric(name: str) -> str:
    return name if len(name) <= _METRIC_WIDTH else name[:_METRIC_WIDTH - 1] + "…"


def _sol_bar(metric: str, pct: float) -> str:
    """A horizontal bar for a percent-of-peak value (clamped to 0..100 for the width)."""
    width = 0.0 if math.isnan(pct) else max(0.0, min(100.0, pct))
    color = "#d9534f" if width >= 60 else ("#f0ad4e" if width >= 40 else "#5bc0de")
    return (
        "<div style='display:flex;align-items:center;gap:8px;margin:2px 0'>"
        f"<div style='width:420px;font-family:monospace;font-size:90%'>{html.escape(metric)}</div>"
        "<div style='width:200px;background:#eee;height:12px'>"
        f"<div style='width:{width:.1f}%;background:{color};height:12px'></div></div>"
        f"<div>{html.escape(fmt(pct))} %</div></div>"
    )


def build(label, per, names, infos, ranges, kernel_names, *, passes, replay, range_mode, calls,
          cost_s, setup_s, chip, sets, notes, counter_data_bytes,
          cache_control="all") -> MetricsResult:
    """A MetricsResult from evaluated ranges [(range name, values)]. With auto ranges the
    ranges are kernels in launch order, named from `kernel_names` when the counts agree."""
    notes = list(notes)
    if range_mode == "auto":
        if kernel_names is not None and len(kernel_names) != len(ranges):
            notes.append(f"kernel names unavailable: {len(kernel_names)} launches logged for "
                         f"{len(ranges)} profiled kernels")
            kernel_names = None
        kernels = [
            KernelMetrics(kernel_names[i] if kernel_names else f"kernel #{i}", i, dict(zip(names, vals, strict=True)))
            for i, (_, vals) in enumerate(ranges)
        ]
        durations = [k.values.get(DURATION, 0.0) for k in kernels]
        aggregation = {m: _aggregation(m) for m in names}
        total = {m: combine([k.values[m] for k in kernels], durations, aggregation[m]) for m in names}
    else:
        kernels = [KernelMetrics(rname or label, i, dict(zip(names, vals, strict=True)))
                   for i, (rname, vals) in enumerate(ranges)]
        aggregation = {m: "exact" for m in names}
        total = dict(kernels[0].values) if kernels else {m: float("nan") for m in names}
    return MetricsResult(
        label=label, per=per, metrics=list(names), info=infos, kernels=kernels, total=total,
        aggregation=aggregation, passes=passes, replay=replay, ranges=range_mode, calls=calls,
        cost_s=cost_s, setup_s=setup_s, chip=chip, sets=list(sets), notes=notes,
        counter_data_bytes=counter_data_bytes, cache_control=cache_control,
    )
