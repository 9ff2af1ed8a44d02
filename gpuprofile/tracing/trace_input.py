"""The per-rank Chrome traces that `gpuprofile merge` reads: reading one (gzip or plain JSON)
and checking every field merge uses, so that a malformed file gives one TraceFileError naming
the file and what is wrong in it, never a traceback from deep inside the merge."""

from __future__ import annotations

import gzip
import json
import math
import os
import zlib

# Times are kept in int64 ns: trace times (us) and clock fields are bounded so that every sum
# merge forms (a time plus a rank's clock shift) stays within int64.
_MAX_TIME_NS = 2**60
_MAX_CLOCK_NS = 2**61
_TIMED_PHASES_WITHOUT_TS = ("M",)  # metadata events carry no time


class TraceFileError(ValueError):
    """A trace file that merge cannot use (unreadable, not a Chrome trace, or a field of the
    wrong type or out of range); the message names the file."""


def read_trace(path) -> dict:
    """A Chrome trace file (gzip or plain JSON) as a dict; TraceFileError naming the file when
    it cannot be read or is not one."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            head = f.read(2)
        opener = gzip.open if head == b"\x1f\x8b" else open
        with opener(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, EOFError, zlib.error, ValueError, RecursionError) as exc:
        # OSError: missing, a folder, a bad gzip header; EOFError: a truncated gzip; zlib.error:
        # corrupt gzip data; ValueError: bad JSON or UTF-8; RecursionError: JSON nested too deep
        raise TraceFileError(f"{path}: not a Chrome trace ({type(exc).__name__}: {exc})") from None
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceFileError(f"{path}: not a Chrome trace (no traceEvents list)")
    check_trace(path, data)
    return data


def _number(value, what: str, limit: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or abs(value) > limit:
        raise ValueError(f"{what} out of range: {value!r}")


def _check_meta(meta) -> None:
    if meta is None:
        return
    if not isinstance(meta, dict):
        raise ValueError(f"otherData must be an object, got {type(meta).__name__}")
    if meta.get("time_zero_cupti_ns") is not None:
        _number(meta["time_zero_cupti_ns"], "otherData.time_zero_cupti_ns", _MAX_CLOCK_NS)
    pair = meta.get("clock_pair")
    if isinstance(pair, dict):
        for key in ("cupti_ns", "wall_ns"):
            if key not in pair:
                raise ValueError(f"otherData.clock_pair lacks {key!r}")
            _number(pair[key], f"otherData.clock_pair.{key}", _MAX_CLOCK_NS)
        if "uncertainty_ns" in pair and pair["uncertainty_ns"] is None:
            del pair["uncertainty_ns"]  # the same as none given (align.py reads 0)
        if "uncertainty_ns" in pair:
            _number(pair["uncertainty_ns"], "otherData.clock_pair.uncertainty_ns", _MAX_CLOCK_NS)


def _check_event(e) -> None:
    if not isinstance(e, dict):
        raise ValueError(f"an event must be an object, got {type(e).__name__}")
    ph = e.get("ph")
    if ph is not None and not isinstance(ph, str):
        raise ValueError(f"ph must be a string, got {type(ph).__name__}")
    if "name" in e and not isinstance(e["name"], str):
        raise ValueError(f"name must be a string, got {type(e['name']).__name__}")
    if ph == "C" and "name" not in e:
        raise ValueError("a counter event (ph 'C') has no name")
    if "ts" in e or ph not in _TIMED_PHASES_WITHOUT_TS:
        if "ts" not in e:
            raise ValueError(f"an event of ph {ph!r} has no ts")
        _number(e["ts"], "ts", _MAX_TIME_NS / 1000)
    if e.get("dur") is not None:
        _number(e["dur"], "dur", _MAX_TIME_NS / 1000)
        if e["dur"] < 0:
            raise ValueError(f"dur is {e['dur']!r}: the event ends before it starts")
    if isinstance(e.get("id"), (list, dict)):
        raise ValueError(f"id must be a string or a number, got {type(e['id']).__name__}")
    if "args" in e and e["args"] is None:
        del e["args"]  # the same as no args
    args = e.get("args", {})
    if not isinstance(args, dict):
        raise ValueError(f"args must be an object, got {type(args).__name__}")
    if ph == "M" and e.get("name") == "thread_name" and not isinstance(args.get("name"), str):
        raise ValueError("a thread_name event needs args.name, a string")
    if ph == "M" and e.get("name") == "thread_sort_index":
        index = args.get("sort_index")
        if isinstance(index, bool) or not isinstance(index, int) or abs(index) > 2**31:
            raise ValueError("a thread_sort_index event needs args.sort_index, an int")


def check_trace(path: str, data: dict) -> None:
    """TraceFileError naming `path` (and the event's index) unless every field merge reads has
    the right type and range. Drops `args: null` and a clock pair's `uncertainty_ns: null` (the
    same as none given)."""
    try:
        _check_meta(data.get("otherData"))
    except ValueError as exc:
        raise TraceFileError(f"{path}: {exc}") from None
    meta = data.get("otherData") or {}
    where = f"{path}: rank {meta['rank']}" if "rank" in meta else path
    for k, e in enumerate(data["traceEvents"]):
        try:
            _check_event(e)
        except ValueError as exc:
            raise TraceFileError(f"{where}: traceEvents[{k}]: {exc}") from None
