"""Every engine of `gpuprofile merge` (tracing/engines.py) gives the same tables on the same
ranks: DuckDB's SQL and the hand-written NumPy pass on synthetic ranks with known answers, in
either file format and mixed, and the Dask engine on a local cluster of worker processes."""

import json
from pathlib import Path

import numpy as np
import pytest
import ranks_synthetic as R

from gpuprofile.tracing import engines
from gpuprofile.tracing.merge import merge_traces
from gpuprofile.tracing.trace_input import TraceFileError

pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")

TWO = [[(30_000, 31_000), (30_000, 31_000), (45_000, 46_000)],
       [(30_000, 31_500), (40_000, 41_000), (30_000, 31_000)]]
FOUR = [[(30_000, 31_000), (30_000, 31_000), (30_000, 31_000)],
        [(40_000, 41_000), (40_000, 41_000), (30_000, 31_000)],
        [(40_000, 41_000), (44_000, 45_000), (32_000, 33_000)],
        [(30_000, 31_000), (30_000, 31_000), (39_000, 40_000)]]


def _tables(result) -> dict:
    d = result.to_dict()
    d.pop("path")
    for r in d["ranks"]:
        r.pop("file")
    return d


def _ranks(tmp_path, monkeypatch, case: str, name: str) -> list:
    tmp_path.mkdir(parents=True, exist_ok=True)
    if case == "two":
        return R.export_ranks(tmp_path, monkeypatch, TWO, [3_000_000_000, 7_500_000_123],
                              [0, 40_000], name=name)
    if case == "four":
        bases = [1_000_000_000 * (r + 1) + 777 * r for r in range(4)]
        return R.export_ranks(tmp_path, monkeypatch, FOUR, bases, [0, 30_000, -20_000, 5_000],
                              name=name)
    world, steps = 6, 30  # the scale benchmark's ranks, small
    return R.export_ranks(tmp_path, monkeypatch, [None] * world, [0] * world, [0] * world, name=name,
                          make=lambda r, *_: R.scale_profile(r, world, steps, 20))


@pytest.mark.parametrize("case", ["two", "four", "scale"])
@pytest.mark.parametrize("name", ["trace.json.gz", "trace.parquet"])
def test_duckdb_numpy_and_the_default_give_identical_tables(tmp_path, monkeypatch, case, name):
    paths = _ranks(tmp_path, monkeypatch, case, name)
    a = merge_traces(paths, tmp_path / "a.json", engine="numpy")
    b = merge_traces(paths, tmp_path / "b.json", engine="duckdb",
                     engine_options={"memory_limit": "256MB", "temp_directory": str(tmp_path)})
    c = merge_traces(paths, tmp_path / "c.json")  # the default: each analysis's own engine
    assert _tables(a) == _tables(b) == _tables(c)
    assert a.steps.rows and a.collectives
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_mixed_formats_reach_one_query(tmp_path, monkeypatch):
    j = _ranks(tmp_path / "j", monkeypatch, "four", "trace.json.gz")
    q = _ranks(tmp_path / "q", monkeypatch, "four", "trace.parquet")
    mixed = [q[0], j[1], q[2], j[3]]
    a = merge_traces(mixed, tmp_path / "a.json", engine="numpy")
    b = merge_traces(mixed, tmp_path / "b.json", engine="duckdb")
    assert _tables(a) == _tables(b)


def test_rank_summaries_are_identical_array_by_array(tmp_path, monkeypatch):
    paths = _ranks(tmp_path, monkeypatch, "scale", "trace.parquet")
    for a, b in zip(engines.summaries(paths, "step", "numpy"),
                    engines.summaries(paths, "step", "duckdb"), strict=True):
        assert (a.rank, a.meta, a.gpus) == (b.rank, b.meta, b.gpus)
        np.testing.assert_array_equal(a.steps, b.steps)
        for f in a.per_step:
            np.testing.assert_array_equal(a.per_step[f], b.per_step[f])
        for f in a.nccl:
            assert a.nccl[f].tolist() == b.nccl[f].tolist(), f


def test_trace_ranks_writes_only_those(tmp_path, monkeypatch):
    paths = _ranks(tmp_path, monkeypatch, "four", "trace.parquet")
    every = merge_traces(paths, tmp_path / "all.json")
    some = merge_traces(paths, tmp_path / "some.json", trace_ranks=[1, 3])
    assert _tables(every) == _tables(some)  # the tables cover every rank
    events = json.loads((tmp_path / "some.json").read_text())["traceEvents"]
    assert {e["pid"] for e in events if e.get("ph") == "X"} == {1, 3}


def test_a_damaged_parquet_rank_is_named(tmp_path, monkeypatch):
    paths = _ranks(tmp_path, monkeypatch, "two", "trace.parquet")
    path = Path(paths[1])
    data = bytearray(path.read_bytes())
    data[len(data) // 3: len(data) // 3 + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    with pytest.raises(TraceFileError, match="rank1.parquet"):
        merge_traces(paths, tmp_path / "m.json", engine="duckdb")


def test_unknown_engine_is_refused(tmp_path, monkeypatch):
    paths = _ranks(tmp_path, monkeypatch, "two", "trace.parquet")
    with pytest.raises(ValueError, match="engine must be one of numpy, duckdb, dask"):
        merge_traces(paths, tmp_path / "m.json", engine="spark")


def test_dask_on_a_local_cluster_gives_identical_tables(tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    paths = _ranks(tmp_path, monkeypatch, "four", "trace.parquet")
    paths[1] = _ranks(tmp_path / "j", monkeypatch, "four", "trace.json.gz")[1]
    a = merge_traces(paths, tmp_path / "a.json", engine="duckdb")
    b = merge_traces(paths, tmp_path / "b.json", engine="dask", engine_options={"workers": 2})
    assert _tables(a) == _tables(b)
    foreign = tmp_path / "foreign.json"  # a worker's TraceFileError reaches the caller
    foreign.write_text(json.dumps({"traceEvents": []}))
    with pytest.raises(TraceFileError, match="foreign.json: a foreign trace"):
        merge_traces([paths[0], foreign], tmp_path / "c.json", engine="dask")


def test_the_partitioned_layout_merges_as_a_folder_and_prunes_by_rank(tmp_path, monkeypatch):
    import duckdb

    job = tmp_path / "job"
    paths = _ranks(job, monkeypatch, "four", "rank={rank}/trace.parquet")
    assert [Path(p).relative_to(job).as_posix() for p in paths] == [
        f"rank={r}/trace.parquet" for r in range(4)]
    flat = merge_traces(paths, tmp_path / "a.json")
    folder = merge_traces(job, tmp_path / "b.json")
    assert _tables(flat) == _tables(folder)
    con = duckdb.connect()
    glob = f"{job.as_posix()}/*/*.parquet"
    plan = con.execute(f"EXPLAIN ANALYZE SELECT count(*) FROM read_parquet('{glob}', "
                       "hive_partitioning = true) WHERE rank = 2").fetchall()[0][1]
    assert "Scanning Files: 1/4" in plan


def test_the_benchmarks_fast_ranks_equal_the_profiles_export(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    world, steps, per_step = 12, 10, 5  # planted: every rank but 1 and 8
    paths = R.export_ranks(tmp_path, monkeypatch, [None] * world, [0] * world, [0] * world,
                           name="trace.parquet",
                           make=lambda r, *_: R.scale_profile(r, world, steps, per_step))
    monkeypatch.setenv("LOCAL_RANK", "0")
    template = pq.read_table(paths[1])
    for r in range(world):
        want = pq.read_table(paths[r])
        got = R.scale_table(template, 1, r, world, steps, per_step)
        meta = json.loads(want.schema.metadata[b"gpuprofile"])
        meta["local_rank"] = r % 8
        assert json.loads(got.schema.metadata[b"gpuprofile"]) == meta
        for name in want.column_names:  # values; NaN (occupancy of non-kernels) as None
            values = [[None if x != x else x for x in t.column(name).to_pylist()] for t in (got, want)]
            assert values[0] == values[1], (r, name)


def test_the_default_picks_per_analysis_and_says_when_duckdb_is_missing(tmp_path, monkeypatch):
    import importlib.util

    paths = _ranks(tmp_path, monkeypatch, "four", "trace.parquet")
    assert engines.DEFAULTS == {"summaries": "numpy", "held_back": "duckdb"}
    default = merge_traces(paths, tmp_path / "a.json")
    assert default.notes == []
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "duckdb" else find_spec(name, *a))
    without = merge_traces(paths, tmp_path / "b.json")
    assert without.notes == ["held_back by NumPy: duckdb, faster at it, is not installed "
                             "(pip install duckdb); the tables are the same"]
    assert without.notes[0] in str(without).splitlines()
    assert _tables(without) == {**_tables(default), "notes": without.notes}
    assert default.held_back.rows
