"""Metric names: validation with suggestions, pass counts and listing, through CUPTI's profiler
host API (works offline for a chip name such as "GH100", without a GPU).

One validation host object is kept per (chip, kind, counter availability); each configuration
gets a fresh one, because CUPTI accumulates the metrics added to a host object.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from .. import _C
from .metric_sets import split

_HOSTS: dict = {}
_BASES: dict = {}
_PROPERTIES: dict = {}  # (chip, kind, availability, name) -> properties of a valid metric name
_DEVICE: dict = {}  # device index -> (chip, range availability, pm availability)

# The submetric suggested first for each metric type.
_DEFAULT_SUFFIX = {"counter": ".sum", "ratio": ".pct", "throughput": ".avg.pct_of_peak_sustained_elapsed"}


@dataclass(frozen=True)
class MetricInfo:
    """What CUPTI says about a metric name."""

    name: str
    type: str  # counter, ratio or throughput
    description: str
    hw_unit: str
    unit: str

    def to_dict(self) -> dict:
        return {"name": self.name, "type": self.type, "description": self.description,
                "hw_unit": self.hw_unit, "unit": self.unit}


def host(chip: str, kind: str = "range", availability: bytes | None = None):
    """The cached validation/evaluation host object for chip and kind."""
    key = (chip, kind, availability)
    h = _HOSTS.get(key)
    if h is None:
        h = _HOSTS[key] = _C.MetricsHost(chip, kind, availability)
    return h


def properties(name: str, chip: str, kind: str = "range", availability: bytes | None = None):
    """(description, hw_unit, dim_unit, type) of metric `name`, or None if the chip has no such
    metric. Valid names are cached: CUPTI keeps the strings of every answer in the host object
    until it is destroyed (about 64 bytes a call), and host objects are kept for the process."""
    key = (chip, kind, availability, name)
    props = _PROPERTIES.get(key)
    if props is None:
        props = host(chip, kind, availability).properties(name)
        if props is not None:
            _PROPERTIES[key] = props
    return props


def require_counters_free(what: str) -> None:
    """GpuProfileError if another gpuprofile counter collection runs (they cannot overlap):
    checked before running any user code, so nothing runs in vain."""
    holder = _C._counters_holder()
    if holder is not None:
        raise _C.GpuProfileError(
            f"cannot start {what}: gpuprofile is already collecting counters ({holder}). Counter "
            f"collections cannot nest or overlap: gpuprofile.metrics(), region(metrics=...), "
            f"stalls() and sample() each need the GPU's counters alone.")


def device_chip(kind: str = "range"):
    """(chip, counter availability image) of the current device, cached per device. Raises
    NoDeviceError without a device."""
    device = _C._current_device()
    if device not in _DEVICE:
        _DEVICE[device] = {"chip": _C._chip_name()}
    entry = _DEVICE[device]
    if kind not in entry:
        entry[kind] = _C._counter_availability(kind)
    return entry["chip"], entry[kind]


def chip_or_device(chip: str | None, kind: str = "range"):
    """(chip, availability): offline for a given chip name, else the current device's."""
    if chip is not None:
        if not isinstance(chip, str):
            raise TypeError(f"chip must be a str such as 'GH100', got {type(chip).__name__}")
        return chip, None
    from ..device import device_count

    if device_count() == 0:
        raise _C.NoDeviceError("no usable CUDA device: pass chip='GH100' (or another name from "
                               "gpuprofile.list_chips()) to work offline")
    return device_chip(kind)


def base_metrics(chip: str, kind: str = "range") -> dict:
    """{base metric name: type} for the chip (offline), cached."""
    key = (chip, kind)
    if key not in _BASES:
        _BASES[key] = dict(host(chip, kind).base_metrics())
    return _BASES[key]


def suggestions(name: str, chip: str, kind: str = "range", n: int = 5) -> list:
    """Close valid metric names for a misspelled `name` (difflib over base names and
    submetrics)."""
    h = host(chip, kind)
    base, suffix = split(name)
    bases = base_metrics(chip, kind)
    if base in bases or properties(base, chip, kind) is not None:
        mtype = bases.get(base) or properties(base, chip, kind)[3]
        subs = h.submetrics(base, mtype)
        return [base + s for s in difflib.get_close_matches(suffix, subs, n=n, cutoff=0.4)] or \
            [base + s for s in subs[:n]]
    out = []
    for b in difflib.get_close_matches(base, list(bases), n=n, cutoff=0.6):
        subs = h.submetrics(b, bases[b])
        if suffix in subs:
            out.append(b + suffix)
        else:
            close = difflib.get_close_matches(suffix, subs, n=1, cutoff=0.4)
            out.append(b + (close[0] if close else _DEFAULT_SUFFIX.get(bases[b], "")))
    return out


def validate(names, chip: str, kind: str = "range", availability: bytes | None = None) -> dict:
    """{name: MetricInfo} for valid full metric names; ValueError naming every bad one with
    close matches. A bare base name (no rollup such as .sum) is refused: CUPTI cannot collect
    it."""
    h = host(chip, kind, availability)
    infos, problems = {}, []
    for name in names:
        props = properties(name, chip, kind, availability)
        base, suffix = split(name)
        if props is None:
            close = suggestions(name, chip, kind)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            where = "PM sampling" if kind == "pm" else "the range profiler"
            problems.append(f"{name!r} is not a {chip} metric for {where}{hint}")
        elif not suffix:
            subs = h.submetrics(base, props[3])
            first = _DEFAULT_SUFFIX.get(props[3])
            subs = sorted(subs, key=lambda sub: sub != first)
            problems.append(f"{name!r} needs a rollup or submetric, e.g. "
                            f"{', '.join(base + s for s in subs[:4])}")
        else:
            infos[name] = MetricInfo(name, props[3], props[0], props[1], props[2])
    if problems:
        raise ValueError("unknown metric" + ("s" if len(problems) > 1 else "") + ": "
                         + "; ".join(problems))
    return infos


def configure(names, chip: str, kind: str = "range", availability: bytes | None = None):
    """(config image, passes) for valid names, from a fresh host object."""
    h = _C.MetricsHost(chip, kind, availability)
    try:
        return h.configure(list(names))
    finally:
        h.close()


def list_metrics(pattern: str | None = None, chip: str | None = None, kind: str = "range",
                 submetrics: bool = False) -> list:
    """MetricInfo of every base metric of `chip` whose name matches the regular expression
    `pattern` (re.search). With submetrics=True, one entry per full name (base + each rollup)."""
    chip, _ = chip_or_device(chip, kind)
    regex = re.compile(pattern) if pattern else None
    h = host(chip, kind)
    out = []
    for base, mtype in sorted(base_metrics(chip, kind).items()):
        full = [base + s for s in h.submetrics(base, mtype)] if submetrics else [base]
        for name in full:
            if regex is not None and not regex.search(name):
                continue
            props = properties(name, chip, kind)
            if props is not None:
                out.append(MetricInfo(name, props[3], props[0], props[1], props[2]))
    return out


def list_chips() -> list:
    """Chip names CUPTI's host API knows (for list_metrics(chip=...) offline)."""
    return _C._list_chips()
