"""Fuzzing summaries and the Chrome-trace writer with random synthetic records (marker `fuzz`):
any mix of kernels, copies, memory events and region trees that CUPTI and the region store could
hand over, including zero, reversed, equal and far-apart timestamps, ids out of range and odd
names, gives a summary and a trace file that parses as JSON."""

import gzip
import json

import numpy as np
import pytest
import synthetic as S
from hypothesis import given
from hypothesis import strategies as st

from gpuprofile.tracing.activity import MEMCPY_RAW, MEMSET_RAW
from gpuprofile.tracing.profile import Profile

pytestmark = pytest.mark.fuzz
NAMES = ["kernel", "void f<int>(float*)", 'quote"and\\back', "tab\tnew\nline", "ünïcødé ✓", "",
         "x" * 300, "\x00nul", "{}[],:"]


def _times(rng, n, mode):
    """Start and end timestamps (CUPTI ns) of n activities in one of several shapes."""
    start = S.T0 + rng.integers(0, 10**6, n)
    end = start + rng.integers(0, 10**4, n)
    if mode == "zeros":  # CUPTI leaves 0 in records it could not time
        start[rng.random(n) < 0.5] = 0
        end[rng.random(n) < 0.5] = 0
    elif mode == "reversed":
        end = start - rng.integers(0, 10**4, n)
    elif mode == "far":
        start = start + rng.integers(0, 2, n) * 2**61
        end = start + rng.integers(0, 10**9, n)
    elif mode == "equal":
        start[:] = S.T0 + 5
        end[:] = S.T0 + 5
    return start, end


def _regions(rng, n, mode):
    spec = []
    for j in range(n):
        parent = int(rng.integers(-1, j)) if j else -1
        start = S.T0 - S.OFFSET + int(rng.integers(-10**6, 10**6))
        end = start + int(rng.integers(-10, 10**6)) if mode != "zeros" else 0
        spec.append((NAMES[int(rng.integers(len(NAMES)))], parent, start, end, bool(rng.random() < 0.3)))
    recs = S.region_records(spec)
    recs["open"] = rng.random(n) < 0.2
    recs["thread"] = rng.choice([1, 4242, 2**63], n)
    return recs


def _copies(rng, n, dtype, mode, regions):
    c = np.zeros(n, dtype)
    c["start"], c["end"] = _times(rng, n, mode)
    for field, values in (("device", [0]), ("stream", [7, 8, 2**31]), ("bytes", [0, 1, 2**40]),
                          ("correlation_id", range(1, 100))):
        if field in c.dtype.names:
            c[field] = rng.choice(list(values), n)
    return c


@st.composite
def profiles(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    mode = draw(st.sampled_from(["normal", "zeros", "reversed", "far", "equal"]))
    n_regions = draw(st.integers(0, 12))
    recs = _regions(rng, n_regions, mode) if draw(st.booleans()) or n_regions else None
    n = draw(st.integers(0, 40))
    targets = rng.integers(-2, n_regions + 2, n) if n_regions else None
    k, ext = S.kernels(n, names=draw(st.integers(1, 5)), streams=draw(st.integers(1, 4)), regions=targets)
    k["start"], k["end"] = _times(rng, n, mode)
    k["name_id"] = rng.integers(0, 6, n)  # past the name table too
    k["registers_per_thread"] = rng.choice([0, 32, 255], n)
    k["block_x"] = rng.choice([0, 1, 256, 1024, 2048], n)
    k["dynamic_smem"] = rng.choice([0, 48 << 10, 1 << 30], n)
    names = [NAMES[int(i)] for i in rng.integers(0, len(NAMES), 5)]
    events = [(int(t), op, int(b), int(a)) for t, op, b, a in zip(
        _times(rng, draw(st.integers(0, 10)), mode)[0], rng.choice(["alloc", "free"], 10),
        rng.choice([0, 1, 1 << 30], 10), rng.choice([0xA0, 0xB0], 10), strict=False)]
    memcpy = _copies(rng, draw(st.integers(0, 5)), MEMCPY_RAW, mode, recs)
    memset = _copies(rng, draw(st.integers(0, 5)), MEMSET_RAW, mode, recs)
    w = S.window(k, ext, memcpy=memcpy, memset=memset, memory=S.memory_events(events), names=names,
                 t1=draw(st.sampled_from([None, S.T0, S.T0 + 10**7])), dropped=draw(st.integers(0, 3)))
    return Profile._from_window(w, recs, S.LIMITS)


@given(p=profiles(), gz=st.booleans(), details=st.booleans())
def test_summaries_and_traces_of_random_records(tmp_path_factory, p, gz, details):
    summary = p.summary()
    str(summary)
    summary._repr_html_()
    json.dumps(p.to_dict(), allow_nan=True)
    repr(p)
    path = tmp_path_factory.mktemp("trace") / ("t.json.gz" if gz else "t.json")
    assert p.export_chrome_trace(str(path), details=details) == str(path)
    with (gzip.open if gz else open)(path, "rt", encoding="utf-8") as f:
        trace = json.load(f)
    assert all({"ph", "pid"} <= e.keys() for e in trace["traceEvents"])
    assert all(e["ts"] >= 0 and e.get("dur", 0) >= 0 for e in trace["traceEvents"] if "ts" in e)
