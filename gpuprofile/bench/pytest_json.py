"""pytest-benchmark's JSON schema, written and read, so that tools reading pytest-benchmark files
(github-action-benchmark's `tool: pytest`, pytest-benchmark's own compare, dashboards) read
gpuprofile's results, and `gpuprofile compare` reads theirs.

The file (pytest-benchmark's --benchmark-json layout):

    {"machine_info": {...}, "commit_info": {...}, "datetime": ISO, "version": gpuprofile's,
     "benchmarks": [{"group", "name", "fullname", "params", "param", "extra_info", "options",
                     "stats": {min, max, mean, stddev, rounds, median, iqr, q1, q3, iqr_outliers,
                               stddev_outliers, outliers, ld15iqr, hd15iqr, ops, total,
                               iterations[, data]}}]}

Stats are in seconds, as pytest-benchmark writes them; `rounds` is the number of timed samples
and `iterations` the calls per sample (pytest-benchmark's words; gpuprofile's own `rounds`, whole
measurements repeated, is in extra_info). `extra_info["gpuprofile"]` holds the whole result
(median interval, clock, mode, ...) without its samples, so that reading the file back loses
nothing a gate needs; `data` (the samples, in seconds) is written only on request.
"""

from __future__ import annotations

import math

_KEYS = ("machine_info", "benchmarks")


def is_pytest_benchmark(data) -> bool:
    """Whether a loaded JSON document has pytest-benchmark's layout (and only that: the pytest
    plugin's saved runs carry pytest-benchmark's "benchmarks" beside their own "results")."""
    return isinstance(data, dict) and isinstance(data.get("benchmarks"), list) and all(
        k in data for k in _KEYS) and "results" not in data


def _stats(samples_ms, inner: int, include_data: bool) -> dict:
    """pytest-benchmark's stats of per-call samples given in ms, in seconds."""
    import numpy as np

    s = np.asarray(samples_ms, dtype=np.float64) / 1e3
    n = int(s.size)
    if n == 0:
        return {"rounds": 0, "iterations": inner}
    q1, median, q3 = (float(x) for x in np.percentile(s, [25, 50, 75]))
    iqr = q3 - q1
    mean = float(s.mean())
    stddev = float(s.std(ddof=1)) if n > 1 else 0.0
    low_fence, high_fence = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    inside = s[(s >= low_fence) & (s <= high_fence)]
    iqr_outliers = n - int(inside.size)
    stddev_outliers = int(((s < mean - stddev) | (s > mean + stddev)).sum())
    out = {
        "min": float(s.min()), "max": float(s.max()), "mean": mean, "stddev": stddev,
        "rounds": n, "median": median, "iqr": iqr, "q1": q1, "q3": q3,
        "iqr_outliers": iqr_outliers, "stddev_outliers": stddev_outliers,
        "outliers": f"{stddev_outliers};{iqr_outliers}",
        "ld15iqr": float(inside.min()) if inside.size else float(s.min()),
        "hd15iqr": float(inside.max()) if inside.size else float(s.max()),
        "ops": 1.0 / mean if mean > 0 else None, "total": float(s.sum()) * inner,
        "iterations": inner,
    }
    if include_data:
        out["data"] = [float(x) for x in s]
    return out


def benchmark_entry(name: str, test: str, group, result: dict, include_data: bool,
                    extra_info=None) -> dict:
    """One element of "benchmarks" from a gpuprofile result dict (samples in ms); `extra_info`
    is the test's (the fixture's extra_info), beside gpuprofile's own."""
    options = {"min_time": None, "max_time": result.get("wall_s"), "min_rounds": None,
               "timer": f"gpuprofile ({result.get('clock')})", "warmup": result.get("warmup_s"),
               "disable_gc": False}
    own = {k: v for k, v in result.items() if k != "samples"}
    short = test.rpartition("::")[2] if "::" in test else name
    suffix = name[len(test):] if name.startswith(test) else ""  # "#2" of a second call
    return {"group": group, "name": short + suffix, "fullname": name, "params": None,
            "param": None, "extra_info": {**(extra_info or {}), "gpuprofile": own}, "options": options,
            "stats": _stats(result.get("samples") or [], int(result.get("inner") or 1),
                            include_data)}


def export(entries, machine: dict, commit: dict, date: str, version: str, include_data=False) -> dict:
    """The pytest-benchmark document of the plugin's entries ({name, test, group, result})."""
    return {"machine_info": dict(machine), "commit_info": dict(commit),
            "benchmarks": [benchmark_entry(e["name"], e["test"], e["group"], e["result"],
                                           include_data, e.get("extra_info")) for e in entries],
            "datetime": date, "version": version}


def _seconds(stats: dict, key: str, where: str) -> float:
    value = stats.get(key)
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: stats[{key!r}] must be a number, got {type(value).__name__}")
    try:
        return float(value) * 1e3
    except OverflowError:  # an int beyond any float
        raise ValueError(f"{where}: stats[{key!r}] is too large for a number of seconds") from None


def _foreign_result(b: dict, where: str) -> dict:
    """A gpuprofile result dict from a benchmark pytest-benchmark measured (host timer)."""
    from .. import _stats

    stats = b.get("stats")
    if not isinstance(stats, dict):
        raise ValueError(f"{where}: no 'stats'")
    data = stats.get("data")
    samples = [_seconds({"x": x}, "x", f"{where} data") for x in data] if isinstance(data, list) else []
    ms = {k: _seconds(stats, k, where) for k in ("min", "max", "mean", "stddev", "median", "iqr")}
    low = high = math.nan
    if samples:
        low, high, _ = _stats.resolved_median_ci(samples)
        ms["median"] = _stats.summary(samples)["median"]
    p10, p90 = (_stats.percentile(samples, q) for q in (10, 90))
    rounds = stats.get("rounds")
    return {
        "name": b.get("fullname") or b.get("name"), "samples": samples, "median_ms": ms["median"],
        "mean_ms": ms["mean"], "stdev_ms": ms["stddev"], "min_ms": ms["min"], "max_ms": ms["max"],
        "p10_ms": p10, "p90_ms": p90, "iqr_ms": ms["iqr"], "ci_low_ms": low, "ci_high_ms": high,
        "rel_noise": _stats.rel_half_width(low, high, ms["median"]),
        "iterations": rounds if isinstance(rounds, int) and not isinstance(rounds, bool) else len(samples),
        "mode": "pytest-benchmark", "clock": "host", "flush_l2": False, "l2_flush_bytes": 0,
        "gated": False, "host_ms_per_iter": ms["mean"], "wall_s": math.nan, "warmup_s": math.nan,
        "first_call_ms": math.nan, "converged": True, "stop_reason": "pytest-benchmark",
        "max_noise": math.nan, "inner": 1,
    }


def results_of(data, where: str = "file") -> list:
    """gpuprofile result dicts of a pytest-benchmark document: gpuprofile's own results where
    extra_info holds them (its samples from stats.data when saved), else results rebuilt from
    pytest-benchmark's stats (a median interval only when the samples were saved, with
    --benchmark-save-data). ValueError naming the benchmark for a malformed entry."""
    out = []
    for k, b in enumerate(data["benchmarks"]):
        here = f"{where}: benchmarks[{k}]"
        if not isinstance(b, dict) or not isinstance(b.get("fullname") or b.get("name"), str):
            raise ValueError(f"{here} is not a benchmark with a name")
        extra = b.get("extra_info")
        own = extra.get("gpuprofile") if isinstance(extra, dict) else None
        if isinstance(own, dict):
            result = dict(own)
            data_s = b.get("stats", {}).get("data") if isinstance(b.get("stats"), dict) else None
            if isinstance(data_s, list):
                result["samples"] = [_seconds({"x": x}, "x", f"{here} data") for x in data_s]
        else:
            result = _foreign_result(b, here)
        out.append(result)
    return out
