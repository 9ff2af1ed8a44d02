"""BenchmarkResult and compare(): plain data, tables and JSON. NumPy is imported on use, so this
module (and `import gpuprofile`) stays light."""

from __future__ import annotations

import functools
import math
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from .._format import fmt, html_table, text_table
from .._tables import Tabular
from . import gate

# Bits of NVML's clocks-event (throttle) reason mask, as nvml.h defines them.
_THROTTLE_REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}


@dataclass
class Batch:
    """What a sample source returns for run(n): one batch of timed iterations."""

    samples: Any  # float64 ms, one per iteration; empty when tainted
    wall_s: float  # wall time of the whole batch
    host_s: float  # host time spent enqueueing (GPU clock) or calling (host clock)
    tainted: bool = False  # the gate timed out: the samples are not trustworthy



def throughput(median_ms: float, flops, nbytes, peak_tflops, peak_gbps) -> dict:
    """TFLOP/s, GB/s, % of the peaks, arithmetic intensity, ridge point and the roofline verdict
    ('memory' below the ridge point, else 'compute'; None without both flops and bytes and both
    peaks). Pure: tested with exact values."""
    out = dict(tflops=None, gbps=None, pct_peak_flops=None, pct_peak_bw=None,
               arithmetic_intensity=None, ridge_point=None, bound=None)
    seconds = median_ms / 1e3
    if not seconds > 0:
        return out
    if flops is not None:
        out["tflops"] = flops / seconds / 1e12
        if peak_tflops:
            out["pct_peak_flops"] = 100 * out["tflops"] / peak_tflops
    if nbytes is not None:
        out["gbps"] = nbytes / seconds / 1e9
        if peak_gbps:
            out["pct_peak_bw"] = 100 * out["gbps"] / peak_gbps
    if flops is not None and nbytes is not None:
        out["arithmetic_intensity"] = flops / nbytes
        if peak_tflops and peak_gbps:  # the one roofline: counters/verdicts.py's
            from ..counters.verdicts import roofline_point

            point = roofline_point(flops, nbytes, seconds, peak_tflops * 1e12, peak_gbps * 1e9)
            out["ridge_point"], out["bound"] = point.ridge, point.region
    return out


def throttle_reason_names(mask: int | None) -> list[str]:
    """Names of the NVML throttle-reason bits in mask, idle excluded (every sample taken between
    batches sees an idle GPU); unknown bits as hex."""
    if not mask:
        return []
    names = [name for bit, name in _THROTTLE_REASONS.items() if mask & bit and bit != 0x1]
    unknown = mask & ~sum(_THROTTLE_REASONS)
    return names + ([hex(unknown)] if unknown else [])


def fmt_time(ms: float | None) -> str:
    """A duration given in ms, in the unit that reads best: ns, µs, ms or s."""
    if ms is None or (isinstance(ms, float) and math.isnan(ms)):
        return "-"
    for scale, unit in ((1e3, "s"), (1.0, "ms"), (1e-3, "µs")):
        if abs(ms) >= scale:
            return f"{fmt(ms / scale)} {unit}"
    return f"{fmt(ms * 1e6)} ns"


def fmt_times(values) -> list:
    """[fmt_time(ms) for ms in values], durations from 1 us to 1 s without a call each."""
    return [f"{ms:.4g} ms" if type(ms) is float and 1.0 <= ms < 1e3
            else f"{ms / 1e-3:.4g} µs" if type(ms) is float and 1e-3 <= ms < 1.0
            else fmt_time(ms) for ms in values]


@dataclass
class BenchmarkResult(Tabular):
    """One benchmark: the samples and everything needed to judge them.

    Times are in milliseconds. `samples` holds one value per timed iteration (host clock: per
    group of `inner` calls, divided by `inner`). The statistics summarize the samples; `ci_low_ms`
    and `ci_high_ms` bound the median with 95 % confidence (distribution-free, from order
    statistics), widened on each side to the next distinct sample value and by at least the
    clock's resolution (`resolution_ms`: the larger widening), so that quantised samples never
    claim a zero-width interval; `rel_noise` is that interval's half-width
    relative to the median. The interval covers the noise within one run; with `rounds` > 1 the
    whole measurement ran that many times, `samples` pools them all, `round_medians_ms` holds
    each round's median and the interval also spans them (the spread between runs).
    """

    name: str
    samples: Any  # numpy.ndarray of float64 ms
    median_ms: float
    mean_ms: float
    stdev_ms: float
    min_ms: float
    max_ms: float
    p10_ms: float
    p90_ms: float
    iqr_ms: float
    ci_low_ms: float
    ci_high_ms: float
    rel_noise: float
    iterations: int
    mode: str
    clock: str
    flush_l2: bool
    l2_flush_bytes: int
    gated: bool
    host_ms_per_iter: float
    wall_s: float
    warmup_s: float
    first_call_ms: float
    converged: bool
    stop_reason: str
    max_noise: float
    device: str | None = None
    device_index: int | None = None
    sm_clock_mhz_start: float | None = None
    sm_clock_mhz_end: float | None = None
    sm_clock_source: str | None = None
    throttle_reasons: list = field(default_factory=list)
    flops: float | None = None
    bytes: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    peak_name: str | None = None
    peak_tflops: float | None = None
    peak_gbps: float | None = None
    pct_peak_flops: float | None = None
    pct_peak_bw: float | None = None
    arithmetic_intensity: float | None = None
    ridge_point: float | None = None
    bound: str | None = None
    tainted_batches: int = 0
    clock_note: str | None = None  # why CUPTI timing was not used (clock 'auto')
    event_median_ms: float | None = None  # CUDA-event median of the same iterations (clock 'cupti')
    graph_nodes: int | None = None
    inner: int = 1
    version: str = ""
    timestamp: str = ""
    rank: int | None = None  # in a multi-rank job (gpuprofile.distributed), else None
    world_size: int | None = None
    resolution_ms: float | None = None  # None: saved before intervals held the clock's resolution
    rounds: int = 1
    round_medians_ms: list = field(default_factory=list)

    @property
    def median_us(self) -> float:
        return self.median_ms * 1e3

    def to_dict(self, samples: bool = True) -> dict:
        """Every field as JSON-ready data; samples as a list (omitted with samples=False)."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "samples"}
        if self.world_size is None:  # single-process results stay as they were
            del d["rank"], d["world_size"]
        d["throttle_reasons"] = list(self.throttle_reasons)
        d["round_medians_ms"] = [float(x) for x in self.round_medians_ms]
        if samples:
            d["samples"] = [float(x) for x in self.samples]
        return d

    def table_rows(self) -> list:
        """One row: to_dict() without the samples (lists such as round_medians_ms stay lists)."""
        return [self.to_dict(samples=False)]

    @classmethod
    def from_dict(cls, d: dict) -> BenchmarkResult:
        """Inverse of to_dict(); unknown keys are ignored (files from newer versions load). A
        missing field or a value of the wrong type (a damaged or hand-edited file) raises
        TypeError or ValueError naming the field."""
        import numpy as np

        if not isinstance(d, dict):
            raise TypeError(f"a benchmark result must be a dict, got {type(d).__name__}")
        names, checked, lists = _fast_fields(cls)
        shape = (tuple(d), tuple(map(type, d.values())))
        plan = checked.get(shape)
        if plan is None:
            kwargs = _checked_fields(cls, d)
            # every value kept as loaded: the next result of these keys and types takes the fast path
            if all(kwargs[n] is d[n] for n in kwargs if n not in lists):
                by_name = {f.name: f for f in fields(cls)}
                checked[shape] = (tuple(k for k in d if k not in by_name or k == "samples"),
                                  tuple(by_name[n] for n in names if n not in d))
            return cls(samples=_checked_samples(d.get("samples", [])), **kwargs)
        # the keys and value types of a result already checked: its values as loaded, without
        # the keys that are no field, the absent fields their defaults, set without __init__
        # (55 keyword arguments a result, 400k results in a compare of 200k pairs; the class
        # has no __post_init__ to skip)
        extra, absent = plan
        state = d.copy()
        for key in extra:
            del state[key]
        for f in absent:
            state[f.name] = f.default if f.default_factory is MISSING else f.default_factory()
        for name, item in lists.items():  # a type says nothing of a list's items: check them
            value = state[name]
            state[name] = list(value) if {item}.issuperset(map(type, value)) else _checked_field(name, "list", value)
        state["samples"] = _checked_samples(d["samples"]) if "samples" in d else np.empty(0)
        result = cls.__new__(cls)
        result.__dict__.update(state)
        return result

    def save(self, path) -> str:
        """Write this result as strict JSON (samples included; NaN and infinities as null),
        atomically: a save that fails or is killed half way leaves the file that was at `path`
        as it was. A result of one rank of several goes to that rank's file (r.rank1.json, or
        `{rank}` in `path`). Returns the path written."""
        from .._files import write_json
        from ..distributed import RankInfo, rank_path

        rank = self.rank or 0
        path = rank_path(path, RankInfo(rank, self.world_size or 1, rank, "result"))
        write_json(path, self.to_dict())
        return path

    @classmethod
    def load(cls, path) -> BenchmarkResult:
        """The result saved at `path`. The JSON must be strict (no NaN or Infinity tokens: null
        stands for a number that was not finite); ValueError or TypeError otherwise."""
        from .._files import read_json

        return cls.from_dict(read_json(path))

    def __eq__(self, other) -> bool:
        if not isinstance(other, BenchmarkResult):
            return NotImplemented
        a, b = self.to_dict(samples=False), other.to_dict(samples=False)
        same_samples = len(self.samples) == len(other.samples) and all(
            x == y for x, y in zip(self.samples, other.samples, strict=True)
        )
        return same_samples and _nan_equal(a, b)

    def _how(self) -> str:
        if self.clock == "host":
            return "host clock"
        timer = "CUPTI kernel records" if self.clock == "cupti" else "CUDA events"
        parts = [f"{timer}, {self.mode}"]
        parts.append("L2 flushed" if self.flush_l2 else "L2 warm")
        if not self.gated:
            parts.append("no gate: host launch latency may be included")
        if self.clock_note:
            parts.append(f"NOT CUPTI: {self.clock_note} (events add a near-constant ~3 µs per "
                         "iteration)")
        return ", ".join(parts)

    def _rows(self) -> list:
        rows = [
            ["median", fmt_time(self.median_ms)],
            ["95% CI of median", f"{fmt_time(self.ci_low_ms)} .. {fmt_time(self.ci_high_ms)} "
                                 f"({self._ci_scope()})"],
            ["noise (CI half-width)", f"±{fmt(self.rel_noise * 100, 3)} %"],
            ["mean ± stdev", f"{fmt_time(self.mean_ms)} ± {fmt_time(self.stdev_ms)}"],
            ["min / max", f"{fmt_time(self.min_ms)} / {fmt_time(self.max_ms)}"],
            ["p10 / p90 / IQR", f"{fmt_time(self.p10_ms)} / {fmt_time(self.p90_ms)} / {fmt_time(self.iqr_ms)}"],
            ["iterations", f"{self.iterations} in {fmt(self.wall_s, 3)} s ({self._stop_text()})"],
            *([["round medians", ", ".join(map(fmt_time, self.round_medians_ms))]] if self.rounds > 1 else []),
            ["measured with", self._how()],
            *([["events would read", fmt_time(self.event_median_ms)]] if self.event_median_ms else []),
            ["host time per iteration", fmt_time(self.host_ms_per_iter)],
        ]
        if self.device:
            rows.append(["device", self.device])
        if self.world_size is not None:
            rows.append(["rank", f"{self.rank} of {self.world_size}"])
        if self.sm_clock_mhz_start is not None:
            clocks = f"{fmt(self.sm_clock_mhz_start)} -> {fmt(self.sm_clock_mhz_end)} MHz ({self.sm_clock_source})"
            if self.throttle_reasons:
                clocks += ", throttled: " + ", ".join(self.throttle_reasons)
            rows.append(["SM clock start -> end", clocks])
        if self.tflops is not None:
            rows.append(["TFLOP/s", _with_pct(self.tflops, self.pct_peak_flops, f"{self.peak_name} peak")])
        if self.gbps is not None:
            rows.append(["GB/s", _with_pct(self.gbps, self.pct_peak_bw, "DRAM peak")])
        if self.bound is not None:
            rows.append(["bound", f"{self.bound} (intensity {fmt(self.arithmetic_intensity)} FLOP/B, "
                                  f"ridge {fmt(self.ridge_point)} FLOP/B)"])
        return rows

    def _ci_scope(self) -> str:
        """What the interval covers, in words."""
        scope = "within one run" if self.rounds <= 1 else f"{self.rounds} rounds: spans their medians"
        if self.resolution_ms:
            scope += f", ±{fmt_time(self.resolution_ms)} clock resolution included"
        return scope

    def _stop_text(self) -> str:
        if self.stop_reason == "converged":
            text = f"noise <= {fmt(self.max_noise * 100, 3)} %"
            if self.rel_noise > self.max_noise:  # the clock's steps: more samples cannot help
                text += " before the clock's resolution"
            return text
        if self.stop_reason == "fixed":
            return "fixed count"
        return f"stopped at {self.stop_reason}, noise target {fmt(self.max_noise * 100, 3)} % not reached"

    def __repr__(self) -> str:
        rows = self._rows()
        width = max(len(key) for key, _ in rows)
        lines = [f"BenchmarkResult {self.name!r}"] + [f"  {key.ljust(width)}  {value}" for key, value in rows]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return html_table(["", ""], self._rows(), title=f"BenchmarkResult {self.name}")


def _checked_fields(cls, d: dict) -> dict:
    """The fields of `d` that from_dict passes on, each checked (_checked_field)."""
    kwargs = {}
    for name, annotation, required, plain in _loaded_fields(cls):
        if name in d:
            value = d[name]
            # a value of exactly the plain type needs no check (most fields of most files)
            kwargs[name] = value if type(value) is plain else _checked_field(name, annotation, value)
        elif required:
            raise ValueError(f"benchmark result: required field {name!r} is missing")
    return kwargs


@functools.cache
def _fast_fields(cls) -> tuple:
    """(names, checked, lists) for from_dict's fast path: the loaded fields' names; for each
    (keys, value types) of a result that _checked_fields passed unchanged, the keys that are
    no field and the fields it lacks: a result of exactly those keys and types passes unchanged
    too, so 400k results are not checked field by field; the list fields and the type of their
    items, which a type does not cover and which are always checked."""
    loaded = _loaded_fields(cls)
    assert not hasattr(cls, "__post_init__")  # from_dict's fast path does not call __init__
    return (tuple(n for n, *_ in loaded), {},
            {n: _LIST_ITEMS[n] for n, a, *_ in loaded if a.partition(" | ")[0] == "list"})


# The items of BenchmarkResult's list fields (a result of another class has none of these)
_LIST_ITEMS = {"throttle_reasons": str, "round_medians_ms": float}


def _checked_samples(samples):
    import numpy as np

    return np.asarray([_checked_field("samples", "float", x) for x in _checked_field("samples", "list", samples)],
                      dtype=np.float64)


@functools.cache
def _loaded_fields(cls) -> tuple:
    """(name, annotation, required, plain type) of the fields from_dict reads (all but the
    samples): worked out once, not per result (a compare of 200k results loads 400k). The plain
    type is the one a value needs no conversion for (float, int, bool, str), else None."""
    plain = {"float": float, "int": int, "bool": bool, "str": str}
    return tuple((f.name, f.type, f.default is MISSING and f.default_factory is MISSING,
                  plain.get(f.type.partition(" | ")[0])) for f in fields(cls) if f.name != "samples")


_JSON_TYPES = {"float": (int, float), "int": (int,), "bool": (bool,), "str": (str,), "list": (list,)}


def _checked_field(name: str, annotation: str, value):
    """A loaded field's value if it has the annotated JSON type (floats as float: an int too big
    for one is a ValueError; null, which save() writes for NaN and infinities, as NaN); TypeError
    naming the field otherwise."""
    base, _, optional = annotation.partition(" | ")
    if value is None and optional == "None":
        return None
    if value is None and base == "float":
        return math.nan
    if base == "Any":
        return value
    ok = _JSON_TYPES[base]
    if not isinstance(value, ok) or (isinstance(value, bool) and base in ("int", "float")):
        raise TypeError(f"benchmark result: field {name!r} must be {annotation}, got {type(value).__name__}")
    if base == "float":
        try:
            return float(value)
        except OverflowError:
            raise ValueError(f"benchmark result: field {name!r} is too large for a float") from None
    if name == "throttle_reasons" and not all(isinstance(x, str) for x in value):
        raise TypeError("benchmark result: field 'throttle_reasons' must be a list of str")
    if name == "round_medians_ms":
        return [_checked_field("round_medians_ms", "float", x) for x in value]
    return value


def _with_pct(value: float, pct: float | None, of: str) -> str:
    return fmt(value) if pct is None else f"{fmt(value)} ({fmt(pct, 3)} % of {of})"


def _nan_equal(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_nan_equal(a[k], b[k]) for k in a)
    return a == b


@dataclass
class ComparisonRow:
    name: str
    median_ms: float
    rel_noise: float
    ratio: float
    ratio_low: float
    ratio_high: float
    verdict: str
    why: str = ""  # the gate's line: ratio, interval, what it covers, threshold, why (gate.py)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Comparison(Tabular):
    """compare()'s table: each result's median against the baseline's, with the ratio's interval.

    ratio = median / baseline median. The interval [ratio_low, ratio_high] comes from the two
    95 % confidence intervals of the medians (low/high over high/low), so it covers the true
    ratio with at least ~90 % probability without assuming independent samples; a difference is
    judged by the gates' rule (bench/gate.py decide(): threshold, rounds, 'inconclusive').
    """

    baseline: str
    rows: list
    threshold_pct: float = 5.0  # the gate's minimum effect (bench/gate.py)

    def to_dict(self) -> dict:
        return {"baseline": self.baseline, "threshold_pct": self.threshold_pct,
                "rows": [r.to_dict() for r in self.rows]}

    def table_rows(self) -> list:
        """One row per result: name, median_ms, rel_noise, ratio and its bounds, verdict."""
        return [r.to_dict() for r in self.rows]

    def _table(self):
        headers = ["name", "median", "noise", "ratio", "ratio 95% bounds", "verdict"]
        body = []
        for r in self.rows:
            bounds = f"{fmt(r.ratio_low)} .. {fmt(r.ratio_high)}"
            body.append([r.name, fmt_time(r.median_ms), f"±{fmt(r.rel_noise * 100, 3)} %",
                         f"{fmt(r.ratio)}x", bounds, r.verdict])
        return headers, body

    def __repr__(self) -> str:
        headers, body = self._table()
        return text_table(headers, body, title=f"compare: vs {self.baseline}")

    def _repr_html_(self) -> str:
        headers, body = self._table()
        return html_table(headers, body, title=f"compare: vs {self.baseline}")


def compare(results, baseline=0, threshold=None) -> Comparison:
    """Compare benchmark results against a baseline (an index into results, or a name/label).

    `results` is a list of BenchmarkResult (named by .name) or a dict {label: BenchmarkResult}.
    Verdicts follow the gates' rule (bench/gate.py decide()): 'slower'/'faster' only beyond
    `threshold` percent (default 5 on the host clock, 2 on device clocks) on intervals that span rounds (3 or
    more on each side), 'inconclusive' where one run cannot tell a change from drift between
    runs. A result that a gate could not trust gets the verdict 'unknown'.
    """
    if isinstance(results, dict):
        items = list(results.items())
    else:
        items = [(r.name if isinstance(r, BenchmarkResult) else None, r) for r in results]
    if not items:
        raise ValueError("compare(results): results is empty")
    for _, r in items:
        if not isinstance(r, BenchmarkResult):
            raise TypeError(f"compare(results): expected BenchmarkResult items, got {type(r).__name__}")
    labels = [str(label) if label is not None else f"#{i}" for i, (label, _) in enumerate(items)]
    if isinstance(baseline, int) and not isinstance(baseline, bool):
        if not -len(items) <= baseline < len(items):
            raise ValueError(f"compare(baseline={baseline}): index out of range for {len(items)} results")
        base_index = baseline % len(items)
    elif baseline in labels:
        base_index = labels.index(baseline)
    else:
        raise ValueError(f"compare(baseline={baseline!r}): no result with that name; have {labels}")
    base = items[base_index][1]
    rows = [compared_row(label, r, base, threshold) for label, (_, r) in zip(labels, items, strict=True)]
    clocks = "+".join(sorted({r.clock for _, r in items}))
    return Comparison(labels[base_index], rows, gate.threshold_pct(threshold, clocks))


def compared_row(label: str, r: BenchmarkResult, base: BenchmarkResult, threshold=None, *,
                 trusted: bool = False) -> ComparisonRow:
    """compare()'s row for `r` against `base`. trusted: gate.problem() already found nothing
    wrong with either (`gpuprofile compare` checks each of 400k results once, not per pair)."""
    # the module, not the package's attribute: `from .. import x` runs importlib's Python code
    # on every call, 200k times in a compare of 200k pairs
    from .._stats import ratio_interval

    low, high = ratio_interval(*gate.interval(r), *gate.interval(base))
    ratio = r.median_ms / base.median_ms if base.median_ms > 0 else math.nan
    if r is base:
        judged, why = "baseline", ""
    else:  # a result that cannot be trusted (NaN, <= 0, median not its samples') is no "same"
        judged, why = "unknown", None if trusted else gate.problem(base) or gate.problem(r)
        if why is None:
            decision = gate.stored(ratio, low, high, r.rounds, base.rounds, threshold,
                                   f"{r.clock}+{base.clock}")
            judged, why = decision.verdict, decision.line(clock=r.clock)
    return ComparisonRow(label, r.median_ms, r.rel_noise, ratio, low, high, judged, why)
