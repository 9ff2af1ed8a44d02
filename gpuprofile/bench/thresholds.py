"""--gpu-benchmark-compare-fail expressions: which statistic may grow by how much.

    median:5%          fail when the median is slower than the saved one by more than 5 % with 95 %
                       confidence (the two medians' confidence intervals: bench.gate)
    median:0.02ms      the same, as an absolute difference (units ns, us, ms, s; ms if none; the
                       micro sign µ or the Greek mu μ for the u of us)
    min:3%, mean:10us  fail when the statistic grew by more than that (a plain comparison, as
                       pytest-benchmark does: only the median has an interval)
    ops:5%             operations per second (1000 / mean ms): fail when it fell by more than 5 %

Expressions are separated by commas or given as repeated options. Pure: parse() and failure()
are tested with exact values; NumPy is not needed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# statistic -> the result field it reads (ops is derived from the mean)
STATS = {"median": "median_ms", "min": "min_ms", "max": "max_ms", "mean": "mean_ms",
         "stddev": "stdev_ms", "iqr": "iqr_ms", "p10": "p10_ms", "p90": "p90_ms", "ops": "mean_ms"}
_UNITS = {"": 1.0, "ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
_MICRO = ("\u00b5", "\u03bc")  # the micro sign and the Greek small mu, both written for "u"
# The unit is any run of letters, checked against _UNITS after the match: case-insensitive
# matching alone would take the long s (ſ) for s and the Kelvin sign for k, and then no unit
_EXPR = re.compile(r"^\s*([a-z0-9]+)\s*:\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(%|[^\W\d_]+)?\s*$",
                   re.IGNORECASE)


def _unit(piece: str, text: str) -> str:
    """The unit of _UNITS that `text` names (any case; µ or μ for u); ValueError otherwise."""
    unit = text.lower()
    for micro in _MICRO:
        unit = unit.replace(micro, "u")
    if unit not in _UNITS or not unit.isascii():
        raise ValueError(f"{piece.strip()!r}: unknown unit {text!r} (one of %, ns, us, ms, s; "
                         "µs is us)")
    return unit


@dataclass(frozen=True)
class Threshold:
    """One expression: `stat` may grow by `value` % (percent) or by `value` (ms; ops/s for ops)."""

    stat: str
    value: float
    percent: bool
    text: str


def parse(expressions) -> list:
    """Thresholds of expressions ('median:5%', 'min:0.5ms', ...; a string may hold several,
    comma-separated). ValueError naming the piece that is not one."""
    out = []
    for expression in expressions:
        for piece in str(expression).split(","):
            if not piece.strip():
                continue
            m = _EXPR.match(piece)
            if m is None:
                raise ValueError(f"{piece.strip()!r} is not STAT:N% or STAT:N[unit] (e.g. "
                                 "median:5%, min:0.02ms)")
            stat, number, unit = m.group(1).lower(), float(m.group(2)), m.group(3) or ""
            if not m.group(1).isascii():
                raise ValueError(f"{piece.strip()!r}: unknown statistic {m.group(1)!r} (one of "
                                 f"{', '.join(STATS)})")
            unit = unit if unit == "%" else _unit(piece, unit)
            if stat not in STATS:
                raise ValueError(f"{piece.strip()!r}: unknown statistic {stat!r} (one of "
                                 f"{', '.join(STATS)})")
            if not math.isfinite(number):
                raise ValueError(f"{piece.strip()!r}: the threshold must be a finite number")
            percent = unit == "%"
            if stat == "ops" and unit not in ("", "%"):
                raise ValueError(f"{piece.strip()!r}: ops takes a percent or operations per second")
            value = number if percent or stat == "ops" else number * _UNITS[unit]
            out.append(Threshold(stat, value, percent, piece.strip()))
    return out


def _number(x, zero_ok: bool) -> float | None:
    """x as a float when it is a finite number > 0 (>= 0 with zero_ok), else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        x = float(x)
    except OverflowError:
        return None
    return x if math.isfinite(x) and (x > 0 or (zero_ok and x == 0)) else None


def failure(t: Threshold, result: dict, base: dict, interval=None) -> str | None:
    """Why `result` fails threshold `t` against the saved `base` (both result dicts), or None.
    `interval` is the median ratio's 95 % interval (low, high) for a median threshold in percent,
    and the two medians' intervals ((low, high), (base low, base high)) for an absolute one;
    without it the median is compared plainly too. A value that is missing or not a finite
    positive number fails (a gate fails closed)."""
    key = STATS[t.stat]
    zero_ok = t.stat in ("stddev", "iqr")
    now, then = _number(result.get(key), zero_ok), _number(base.get(key), zero_ok)
    if now is None or then is None:
        return (f"{t.text}: cannot compare, {key} is {result.get(key)!r} now and "
                f"{base.get(key)!r} in the saved run")
    if t.stat == "ops":
        now, then = 1e3 / now, 1e3 / then
        drop = (1 - now / then) * 100 if t.percent else then - now
        if drop > t.value:
            unit = "%" if t.percent else " ops/s"
            return (f"{t.text}: {now:.6g} ops/s vs saved {then:.6g} ops/s, down by "
                    f"{drop:.4g}{unit} (more than {t.value:g}{unit})")
        return None
    if t.stat == "median" and interval is not None:
        return _median_failure(t, now, then, interval)
    if not t.percent:
        growth = now - then
    elif then > 0:
        growth = (now / then - 1) * 100
    else:  # stddev or iqr from 0: any growth is infinitely many percent
        growth = math.inf if now > 0 else 0.0
    if growth > t.value:
        unit = "%" if t.percent else " ms"
        return (f"{t.text}: {t.stat} {now:.6g} ms vs saved {then:.6g} ms, up by {growth:.4g}{unit} "
                f"(more than {t.value:g}{unit})")
    return None


def _median_failure(t: Threshold, now: float, then: float, interval) -> str | None:
    if t.percent:
        low, _ = interval
        if not low <= 1 + t.value / 100:  # NaN fails too
            return (f"{t.text}: median {now:.6g} ms vs saved {then:.6g} ms ({now / then:.3f}x); "
                    f"slower by more than {t.value:g} % with 95 % confidence (at least {low:.3f}x "
                    "from the two confidence intervals)")
        return None
    (low, _), (_, base_high) = interval
    least = low - base_high  # the smallest slow-down both intervals allow
    if not least <= t.value:
        return (f"{t.text}: median {now:.6g} ms vs saved {then:.6g} ms; slower by more than "
                f"{t.value:g} ms with 95 % confidence (at least {least:.6g} ms from the two "
                "confidence intervals)")
    return None
