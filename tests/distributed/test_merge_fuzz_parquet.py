"""Fuzzing `gpuprofile merge` on Parquet ranks (marker `fuzz`, issue 28): valid per-rank files
from Profile.export_parquet, then a column replaced by junk of any Arrow type (out-of-range
integers, floats, strings, nulls, labels that are no kind), single values changed, the metadata
changed, or the file's bytes damaged. The oracle is test_merge_fuzz's: a merged trace that reads
back, or TraceFileError naming one of the inputs."""

import io
import json

import pytest
import ranks_synthetic as R
from hypothesis import given
from hypothesis import strategies as st
from test_merge import BASES, RANK0, RANK1, WALL_ERROR
from test_merge_fuzz import _check_merge

from gpuprofile.tracing.columns import COLUMNS, META_KEY

pytestmark = pytest.mark.fuzz
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

_NAMES = [c for c, _ in COLUMNS]


class _Valid(tuple):
    def __repr__(self):  # hypothesis prints the arguments of a failing example
        return "<two valid Parquet ranks>"


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    """Two ranks' Parquet files: (paths, tables, raw bytes)."""
    d = tmp_path_factory.mktemp("parquet")
    with pytest.MonkeyPatch.context() as mp:
        paths = R.export_ranks(d, mp, [RANK0, RANK1], BASES, WALL_ERROR, name="trace.parquet")
    raw = []
    for p in paths:
        with open(p, "rb") as f:
            raw.append(f.read())
    return _Valid((paths, [pq.read_table(p) for p in paths], raw))


_INTS = st.sampled_from([0, 1, -1, -2, 2**31, -(2**31) - 1, 2**40, 2**60, 2**62, -(2**63), 2**63 - 1])
_JUNK = st.one_of(
    st.lists(_INTS, min_size=1, max_size=3).map(lambda v: ("int64", v)),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=3).map(lambda v: ("float64", v)),
    st.lists(st.sampled_from(["", "kernel", "region", "region (GPU)", "step", "bogus", "\x00",
                              "collective AllReduce 99999999999999999999 B", "AllReduce"]),
             min_size=1, max_size=3).map(lambda v: ("string", v)),
    st.just(("null", [None])),
)


def _column(kind, values, n):
    values = (values * (n // len(values) + 1))[:n]
    if kind == "null":
        return pa.array([None] * n, pa.int64())
    typ = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string()}[kind]
    return pa.array(values, typ)


def _mutate(table, mutation):
    what, name, junk, row = mutation
    if what != "meta" and name not in table.column_names:
        return table  # an earlier mutation dropped it
    i = table.column_names.index(name) if what != "meta" else None
    if what == "column":
        return table.set_column(i, name, _column(*junk, len(table)))
    if what == "drop":
        return table.drop([name])
    if what == "value":  # one cell, keeping the column's type where the junk fits it
        col = table.column(name).to_pylist()
        if not col:
            return table
        col[row % len(col)] = junk[1][0]
        try:
            return table.set_column(i, name, pa.array(col))
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return table
    meta = json.loads(table.schema.metadata[META_KEY])
    meta[name] = junk[1][0]
    return table.replace_schema_metadata({META_KEY: json.dumps(meta, allow_nan=True).encode()})


def _mutation():
    return st.tuples(st.sampled_from(["column", "value", "drop", "meta"]), st.sampled_from(_NAMES),
                     _JUNK, st.integers(0, 10_000)).map(
        lambda m: m if m[0] != "meta" else (m[0], m[1] if m[1] in ("rank",) else
                                            "time_zero_cupti_ns", m[2], m[3]))


@given(rank=st.integers(0, 1), mutations=st.lists(_mutation(), min_size=1, max_size=3))
def test_junk_in_columns_and_metadata(valid, tmp_path_factory, rank, mutations):
    paths, tables, _ = valid
    d = tmp_path_factory.mktemp("fz")
    table = tables[rank]
    for m in mutations:
        table = _mutate(table, m)
    bad = d / f"trace.rank{rank}.parquet"
    buf = io.BytesIO()
    pq.write_table(table, buf)
    bad.write_bytes(buf.getvalue())
    inputs = [bad if r == rank else paths[r] for r in range(2)]
    _check_merge([str(p) for p in inputs], d / "m.json")


@given(rank=st.integers(0, 1), cut=st.integers(0, 10**9), flips=st.lists(st.integers(0, 10**9), max_size=4))
def test_damaged_bytes(valid, tmp_path_factory, rank, cut, flips):
    paths, _, raw = valid
    data = bytearray(raw[rank])
    for f in flips:
        data[f % len(data)] ^= 0xFF
    data = data[: len(data) - cut % (len(data) + 1)] if cut % 3 == 0 else data
    d = tmp_path_factory.mktemp("fb")
    bad = d / "trace.rank1.parquet"
    bad.write_bytes(bytes(data))
    inputs = [bad if r == rank else paths[r] for r in range(2)]
    _check_merge([str(p) for p in inputs], d / "m.json")
