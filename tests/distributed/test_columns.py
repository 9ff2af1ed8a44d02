"""A profile as one columnar table (Profile.to_arrow, export_parquet, to_pandas('events')): the
rows and fields of the Chrome trace, with NCCL metadata, rank and clock pair, on fixed inputs."""

import json

import numpy as np
import pytest
import ranks_synthetic as R

from gpuprofile.tracing.columns import COLUMNS, META_KEY
from gpuprofile.tracing.rank_input import read_parquet, scan

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

STEPS = [(30_000, 31_000), (40_000, 41_000, 60_000)]
BASE = 3_000_000_000


def _profile():
    return R.rank_profile(1, STEPS, BASE, 40_000)


def test_to_arrow_has_every_row_with_the_trace_fields():
    t = _profile().to_arrow()
    assert t.column_names == [c for c, _ in COLUMNS]
    df = t.to_pandas()
    kinds = df["kind"].astype(str).value_counts().to_dict()
    # 2 kernels per step; 2 host regions per step; a GPU span per region with kernels
    assert kinds == {"kernel": 4, "region": 4, "region (GPU)": 4}
    k = df[df["kind"] == "kernel"].sort_values("start_ns")
    step = BASE + 1000
    assert k["start_ns"].tolist() == [step, step + 31_000, step + R.STEP, step + R.STEP + 41_000]
    assert k["end_ns"].tolist() == [step + 30_000, step + 50_000, step + R.STEP + 40_000,
                                    step + R.STEP + 60_000]
    assert k["collective"].astype(str).tolist() == ["", "AllReduce"] * 2
    assert k["nccl_algorithm"].astype(str).tolist() == ["", "RING"] * 2
    assert k["nccl_protocol"].astype(str).tolist() == ["", "LL"] * 2
    assert k["collective_bytes"].tolist() == [-1, R.NBYTES] * 2
    assert k["region"].astype(str).tolist() == ["step", f"collective AllReduce {R.NBYTES} B"] * 2
    assert (k["rank"] == 0).all()  # no RANK in the environment: a single process
    assert k["stream"].tolist() == [7, 13, 7, 13] and k["device"].tolist() == [1] * 4
    regions = df[df["kind"] == "region"].sort_values("record")
    # host regions moved onto the CUPTI clock by the profile's offset
    assert regions["start_ns"].tolist()[0] == step - 500
    assert regions["parent"].tolist() == [-1, 0, -1, 2]
    spans = df[(df["kind"] == "region (GPU)") & (df["name"] == "step")].sort_values("start_ns")
    # a step's GPU span: its first kernel to the last kernel of it or its collective region
    assert spans["start_ns"].tolist() == [step, step + R.STEP]
    assert spans["end_ns"].tolist() == [step + 50_000, step + R.STEP + 60_000]
    meta = json.loads(t.schema.metadata[META_KEY])
    assert meta["time_zero_cupti_ns"] == BASE  # the profile start, as in the JSON
    assert meta["clock_pair"] == {"cupti_ns": BASE + 10_000, "wall_ns": R.WALL0 + 50_000,
                                  "uncertainty_ns": 100}


def test_parquet_file_per_rank_reads_back(tmp_path, monkeypatch):
    paths = R.export_ranks(tmp_path, monkeypatch, [STEPS, STEPS], [BASE, BASE], [0, 0],
                           name="trace.parquet")
    assert [p.rsplit("/", 1)[1] for p in paths] == ["trace.rank0.parquet", "trace.rank1.parquet"]
    t = pq.read_table(paths[1])
    meta = json.loads(t.schema.metadata[META_KEY])
    assert (meta["rank"], meta["world_size"], meta["rank_source"]) == (1, 2, "env")
    assert set(t.column("rank").to_pylist()) == {1}
    assert pa.types.is_dictionary(t.schema.field("name").type)
    meta, cols = read_parquet(paths[1], ["kind", "start_ns"])
    kernel = cols["kind"][1].index("kernel")
    starts = np.sort(cols["start_ns"][cols["kind"][0] == kernel])
    assert starts.tolist() == [1000, 32_000, 101_000, 142_000]  # ns from the time zero


def test_events_frame_without_pyarrow_matches_arrow():
    p = _profile()
    a = p.to_arrow().to_pandas()
    b = p.to_pandas("events")
    assert list(a.columns) == list(b.columns)
    for c in ("start_ns", "end_ns", "record", "collective_bytes"):
        assert a[c].tolist() == b[c].tolist()
    assert a["name"].astype(str).tolist() == b["name"].astype(str).tolist()


def test_scan_reads_the_same_from_either_file(tmp_path, monkeypatch):
    kw = dict(per_rank=[STEPS], bases=[BASE], errors=[0])
    (j,) = R.export_ranks(tmp_path, monkeypatch, **kw)
    (q,) = R.export_ranks(tmp_path, monkeypatch, **kw, name="trace.parquet")
    a, b = scan(j, "step"), scan(q, "step")
    oa, ob = np.argsort(a.start), np.argsort(b.start)
    assert a.start[oa].tolist() == b.start[ob].tolist()
    assert a.end[oa].tolist() == b.end[ob].tolist()
    assert a.collective[oa].tolist() == b.collective[ob].tolist() == ["", "AllReduce"] * 2
    assert a.nbytes[oa].tolist() == b.nbytes[ob].tolist() == [-1, R.NBYTES] * 2
    assert a.steps.tolist() == b.steps.tolist() == [[1000, 51_000], [101_000, 161_000]]
    assert a.gpus == b.gpus == [0]


@pytest.mark.parametrize("damage", ["no metadata", "metadata not JSON", "zero not a number",
                                    "missing column", "nulls", "string times", "huge times",
                                    "device beyond int32", "huge stream", "not parquet", "kind"])
def test_bad_parquet_names_the_file(tmp_path, monkeypatch, damage):
    from gpuprofile.tracing.merge import TraceFileError, merge_traces

    (good,) = R.export_ranks(tmp_path, monkeypatch, [STEPS], [BASE], [0], name="trace.parquet")
    t = pq.read_table(good)
    bad = tmp_path / "bad.parquet"
    if damage == "no metadata":
        t = t.replace_schema_metadata({})
    elif damage == "metadata not JSON":
        t = t.replace_schema_metadata({b"gpuprofile": b"{nope"})
    elif damage == "zero not a number":
        meta = json.loads(t.schema.metadata[META_KEY])
        t = t.replace_schema_metadata({META_KEY: json.dumps({**meta, "time_zero_cupti_ns": "x"})})
    elif damage == "device beyond int32":
        t = t.set_column(5, "device", pa.array([2**33] * len(t), pa.int64()))
    elif damage == "huge stream":
        t = t.set_column(6, "stream", pa.array([2**50] * len(t), pa.int64()))
    elif damage == "huge times":
        t = t.set_column(3, "start_ns", pa.array([2**62] * len(t), pa.int64()))
    elif damage == "missing column":
        t = t.drop(["end_ns"])
    elif damage == "nulls":
        t = t.set_column(3, "start_ns", pa.array([None] * len(t), pa.int64()))
    elif damage == "string times":
        t = t.set_column(3, "start_ns", pa.array(["1"] * len(t)))
    elif damage == "kind":
        t = t.set_column(1, "kind", pa.array(["bogus"] * len(t)).dictionary_encode())
    if damage == "not parquet":
        bad.write_bytes(b"PAR1" + b"\0" * 64)
    else:
        pq.write_table(t, bad)
    with pytest.raises(TraceFileError, match="bad.parquet"):
        merge_traces([good, bad], tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


def test_an_empty_profile_exports_and_merges(tmp_path):
    import synthetic as S

    from gpuprofile.tracing.merge import merge_traces
    from gpuprofile.tracing.profile import Profile

    p = Profile._from_window(S.window(), None, S.LIMITS)
    assert p.to_arrow().num_rows == 0 and p.to_pandas("events").shape == (0, len(COLUMNS))
    result = merge_traces([p.export_parquet(tmp_path / "e.parquet")], tmp_path / "m.json")
    assert result.collectives == [] and result.steps.rows == [] and result.held_back.rows == []
    events = json.loads((tmp_path / "m.json").read_text())["traceEvents"]
    assert [e["name"] for e in events] == ["process_name", "process_sort_index"]


def test_without_pyarrow_the_error_says_how_to_get_it(monkeypatch, tmp_path):
    import builtins

    real = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name.split(".")[0] == "pyarrow":
            raise ImportError("No module named 'pyarrow'")
        return real(name, *args, **kwargs)

    p = _profile()
    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    for call in (p.to_arrow, lambda: p.export_parquet(tmp_path / "t.parquet")):
        with pytest.raises(ImportError, match="pip install pyarrow"):
            call()
    assert not list(tmp_path.iterdir())
    assert len(p.to_pandas("events")) == 12  # needs pandas only
    monkeypatch.setattr(builtins, "__import__", real)
    path = p.export_parquet(tmp_path / "t.parquet")
    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    from gpuprofile.tracing.merge import TraceFileError, merge_traces

    with pytest.raises(TraceFileError, match=r"t\.parquet: a Parquet trace, and .*pip install pyarrow"):
        merge_traces([path], tmp_path / "m.json")
