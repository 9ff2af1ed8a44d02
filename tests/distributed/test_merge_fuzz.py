"""Fuzzing `gpuprofile merge` (marker `fuzz`, issue 23): valid per-rank traces, then corrupted at
the byte level (a truncated or damaged .gz, bad UTF-8) and at the JSON level (junk in any field
of any event, in otherData and its clock pair, events that are not objects). The oracle: merge
either writes a trace that reads back, or raises TraceFileError naming the file (ValueError for
align='collectives' without collectives); anything else is a finding. The CLI turns each into
exit 2 with one line on stderr naming the file."""

import copy
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
import ranks_synthetic as R
from fuzzing import json_values
from hypothesis import given
from hypothesis import strategies as st
from test_merge import BASES, RANK0, RANK1, WALL_ERROR

from gpuprofile.tracing.merge import TraceFileError, merge_traces

pytestmark = pytest.mark.fuzz


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    """Two ranks' traces: (paths, their parsed JSON, their raw .gz bytes)."""
    d = tmp_path_factory.mktemp("ranks")
    with pytest.MonkeyPatch.context() as mp:
        paths = R.export_ranks(d, mp, [RANK0, RANK1], BASES, WALL_ERROR)
    raw = [p.read_bytes() for p in map(Path, paths)]
    return paths, [json.loads(gzip.decompress(b)) for b in raw], raw


def _check_merge(paths, out, align="auto"):
    try:
        result = merge_traces(paths, out, align=align)
    except TraceFileError as exc:
        assert any(str(p) in str(exc) for p in paths), str(exc)
        return "error"
    except ValueError as exc:
        assert align == "collectives" and "no NCCL collective" in str(exc), repr(exc)
        return "error"
    with gzip.open(result.path, "rt") if str(out).endswith(".gz") else open(out) as f:
        assert isinstance(json.load(f)["traceEvents"], list)
    json.dumps(result.to_dict(), allow_nan=True)
    str(result), repr(result), result._repr_html_()
    return "merged"


_FIELDS = ["ts", "dur", "ph", "name", "cat", "pid", "tid", "id", "args"]
_META = ["rank", "time_zero_cupti_ns", "clock_pair", "hostname", "world_size"]
_PAIR = ["cupti_ns", "wall_ns", "uncertainty_ns"]


def _mutation():
    """(where, key, value): set or delete (value None-marker) one field."""
    value = st.one_of(json_values(), st.sampled_from([float("nan"), float("inf"), -1e300, 2**63,
                                                      -(2**70), True, "1", [], {}]))
    return st.one_of(
        st.tuples(st.just("event"), st.integers(0, 10_000), st.sampled_from(_FIELDS),
                  st.one_of(value, st.just("<delete>"))),
        st.tuples(st.just("event_args"), st.integers(0, 10_000),
                  st.sampled_from(["name", "sort_index", "region", "kernel"]), value),
        st.tuples(st.just("replace_event"), st.integers(0, 10_000), st.none(), value),
        st.tuples(st.just("meta"), st.none(), st.sampled_from(_META), st.one_of(value, st.just("<delete>"))),
        st.tuples(st.just("pair"), st.none(), st.sampled_from(_PAIR), st.one_of(value, st.just("<delete>"))),
        st.tuples(st.just("top"), st.none(), st.sampled_from(["otherData", "traceEvents"]), value),
    )


def _set(target, key, value):
    if not isinstance(target, dict):
        return  # an earlier mutation replaced it
    if value == "<delete>":
        target.pop(key, None)
    else:
        target[key] = value


def _apply(data, mutation):
    where, index, key, value = mutation
    value = copy.deepcopy(value)  # hypothesis may hand the same object to two mutations
    events = data.get("traceEvents")
    if where in ("event", "event_args", "replace_event"):
        if not isinstance(events, list) or not events:
            return
        k = index % len(events)
        if where == "replace_event":
            events[k] = value
        elif where == "event":
            _set(events[k], key, value)
        elif isinstance(events[k], dict):
            _set(events[k].setdefault("args", {}), key, value)
    elif where == "meta":
        _set(data.setdefault("otherData", {}), key, value)
    elif where == "pair":
        meta = data.get("otherData")
        if isinstance(meta, dict):
            _set(meta.setdefault("clock_pair", {}), key, value)
    else:
        data[key] = value


@given(mutations=st.lists(st.tuples(st.integers(0, 1), _mutation()), min_size=1, max_size=4),
       align=st.sampled_from(["auto", "wall", "collectives"]), gz=st.booleans())
def test_merge_of_junk_fields(valid, tmp_path_factory, mutations, align, gz):
    _, datas, _ = valid
    datas = copy.deepcopy(datas)
    for which, m in mutations:
        _apply(datas[which], m)
    d = tmp_path_factory.mktemp("junk")
    paths = []
    for r, data in enumerate(datas):
        text = json.dumps(data, allow_nan=True).encode()
        p = d / f"rank{r}.json{'.gz' if gz else ''}"
        p.write_bytes(gzip.compress(text) if gz else text)
        paths.append(p)
    _check_merge(paths, d / "merged.json.gz", align)


@given(cut=st.integers(0, 10**6), flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)),
                                                 max_size=3), which=st.integers(0, 1),
       unzip=st.booleans())
def test_merge_of_damaged_bytes(valid, tmp_path_factory, cut, flips, which, unzip):
    """A .gz (or its JSON) truncated anywhere, and bytes flipped: truncated gzip streams, CRC and
    zlib errors, bad UTF-8, broken JSON."""
    paths, _, raw = valid
    data = bytearray(gzip.decompress(raw[which]) if unzip else raw[which])
    del data[cut % (len(data) + 1):]
    for at, bits in flips:
        if data:
            data[at % len(data)] ^= bits
    d = tmp_path_factory.mktemp("bytes")
    bad = d / ("rank.json" if unzip else "rank.json.gz")
    bad.write_bytes(bytes(data))
    others = [paths[1 - which]]
    _check_merge([bad, *others], d / "merged.json")


_CASES = {
    "truncated.json.gz": lambda raw: raw[: len(raw) // 2],
    "corrupt.json.gz": lambda raw: raw[:20] + bytes(b ^ 0x5A for b in raw[20:60]) + raw[60:],
    "badcrc.json.gz": lambda raw: raw[:-8] + bytes(8),
    "latin1.json": lambda raw: b'{"traceEvents": [{"name": "\xe9"}]}',
    "events.json": lambda raw: b'{"traceEvents": [1, 2]}',
    "ts.json": lambda raw: b'{"traceEvents": [{"ph": "X", "ts": "soon"}]}',
    "huge.json": lambda raw: b'{"traceEvents": [{"ph": "X", "ts": 1e300}]}',
    "args.json": lambda raw: b'{"traceEvents": [{"ph": "X", "ts": 1, "cat": "kernel", "args": [1]}]}',
    "pair.json": lambda raw: b'{"otherData": {"clock_pair": {"wall_ns": 1}}, "traceEvents": []}',
    "meta.json": lambda raw: b'{"otherData": [1], "traceEvents": []}',
    "deep.json": lambda raw: b'{"traceEvents": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "zero.json": lambda raw: b'{"otherData": {"time_zero_cupti_ns": 1e300}, "traceEvents": []}',
    "nan.json": lambda raw: b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": NaN, "name": "k"}]}',
    "id.json": lambda raw: b'{"traceEvents": [{"ph": "b", "ts": 1, "cat": "region (GPU)", '
                           b'"name": "step", "id": [1]}]}',
}


@pytest.mark.parametrize("name", sorted(_CASES))
def test_cli_gives_one_error_line_naming_the_file(valid, tmp_path, name):
    """Each kind of malformed input that escaped as a traceback before issue 23: exit 2, one
    line on stderr that names the file, no traceback, no output written."""
    paths, _, raw = valid
    bad = tmp_path / name
    bad.write_bytes(_CASES[name](raw[0]))
    out = subprocess.run([sys.executable, "-m", "gpuprofile", "merge", str(bad), str(paths[1]),
                          "-o", str(tmp_path / "m.json")], capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert out.stdout == "" and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gpuprofile merge: error: {bad}"), out.stderr
    assert not (tmp_path / "m.json").exists()
