"""The streaming merge (issue 28): Parquet ranks merge into the same trace and tables as Chrome
ones; compute/communication overlap, exposed communication, idle time and the held-back list
have known answers on synthetic ranks; a time window or a range of steps writes only those."""

import gzip
import json
from collections import Counter

import pytest
import ranks_synthetic as R

from gpuprofile.tracing.merge import merge_traces

pytest.importorskip("pyarrow")

RANK0 = [(30_000, 31_000), (30_000, 31_000), (45_000, 46_000)]
RANK1 = [(30_000, 31_500), (40_000, 41_000), (30_000, 31_000)]
BASES = [3_000_000_000, 7_500_000_123]
WALL_ERROR = [0, 40_000]


def _read(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def _kernels(events, pid):
    out = [e for e in events if e.get("cat") == "kernel" and e["pid"] == pid]
    return sorted(((round(e["ts"] * 1000), round(e["dur"] * 1000), e["name"],
                    {k: v for k, v in e.get("args", {}).items() if k not in ("grid", "block", "regs", "smem", "occ")})
                   for e in out), key=lambda x: x[0])


def _merge(tmp_path, monkeypatch, name, per_rank=(RANK0, RANK1), make=R.rank_profile, **kw):
    paths = R.export_ranks(tmp_path, monkeypatch, list(per_rank), BASES, WALL_ERROR, name=name,
                           make=make)
    out = tmp_path / f"merged-{name}.json.gz"
    return merge_traces(paths, out, **kw), _read(out)


def test_parquet_ranks_merge_like_chrome_ranks(tmp_path, monkeypatch):
    a, ea = _merge(tmp_path, monkeypatch, "trace.json.gz")
    b, eb = _merge(tmp_path, monkeypatch, "trace.parquet")
    assert a.alignment == b.alignment
    assert a.alignment["corrections_ns"] == [20_000, -20_000]
    assert a.collectives == b.collectives
    assert a.straggler.rows == b.straggler.rows and a.straggler.last == b.straggler.last == [1, 1, 0]
    assert a.steps.rows == b.steps.rows and a.held_back.rows == b.held_back.rows
    for pid in (0, 1):
        assert _kernels(ea, pid) == _kernels(eb, pid)  # times, names, NCCL arguments
    nccl = [k for k in _kernels(eb, 0) if k[2].startswith("NCCL")]
    assert [k[2] for k in nccl] == ["NCCL AllReduce (RING/LL)"] * 3
    assert nccl[0][3]["bytes"] == R.NBYTES and nccl[0][3]["wait_us"] == 0.5
    assert nccl[0][3]["kernel"] == R.NAMES[1]

    def names(events, what):
        return sorted(e["args"]["name"] for e in events if e.get("name") == what)

    assert names(ea, "process_name") == names(eb, "process_name")
    gpu_threads = [n for n in names(eb, "thread_name") if n.startswith("GPU")]
    assert gpu_threads == [n for n in names(ea, "thread_name") if n.startswith("GPU")]
    assert gpu_threads == ["GPU 0 stream 13", "GPU 0 stream 7", "GPU 1 stream 13", "GPU 1 stream 7"]

    def spans(events):
        return sorted((e["ph"], e["id"], round(e["ts"] * 1000)) for e in events if e["ph"] in "be")

    def host(events):
        return sorted((e["pid"], e["name"], round(e["ts"] * 1000)) for e in events
                      if e.get("cat") == "region")

    assert spans(ea) == spans(eb) and host(ea) == host(eb)


def test_mixed_formats_and_a_single_rank(tmp_path, monkeypatch):
    j = R.export_ranks(tmp_path, monkeypatch, [RANK0, RANK1], BASES, WALL_ERROR)
    q = R.export_ranks(tmp_path, monkeypatch, [RANK0, RANK1], BASES, WALL_ERROR, name="t.parquet")
    mixed = merge_traces([q[1], j[0]], tmp_path / "m.json")
    assert [r["rank"] for r in mixed.ranks] == [0, 1]
    assert mixed.straggler.last == [1, 1, 0]
    one = merge_traces(q[0], tmp_path / "one.json")
    assert one.held_back.rows == [] and len(one.steps.rows) == 3


# Per step: kernels (name id 0 compute / 1 NCCL, start, end, stream), ns after the step's start.
# Step 0: compute [0, 30k) and [40k, 50k); NCCL [20k, 45k) beside them: window [0, 50k).
# Step 1: compute [0, 10k), NCCL [20k, 30k), compute [35k, 40k): window [0, 40k).
OVERLAP = [[(0, 0, 30_000, 7), (1, 20_000, 45_000, 13), (0, 40_000, 50_000, 7)],
           [(0, 0, 10_000, 7), (1, 20_000, 30_000, 13), (0, 35_000, 40_000, 7)]]


@pytest.mark.parametrize("name", ["trace.json.gz", "trace.parquet"])
def test_overlap_exposed_and_idle_are_exact(tmp_path, monkeypatch, name):
    result, _ = _merge(tmp_path, monkeypatch, name, per_rank=[OVERLAP, OVERLAP],
                       make=R.kernels_profile)
    rows = [(r["step"], r["rank"], r["step_ns"], r["compute_ns"], r["collective_ns"],
             r["overlap_ns"], r["exposed_ns"], r["idle_ns"]) for r in result.steps.rows]
    # step 0: compute 30k + 10k; comm 25k, of which [20k, 30k) and [40k, 45k) overlap compute;
    # exposed [30k, 40k); never idle. step 1: nothing overlaps; idle [10k, 20k) and [30k, 35k)
    expect0 = (50_000, 40_000, 25_000, 15_000, 10_000, 0)
    expect1 = (40_000, 15_000, 10_000, 0, 10_000, 15_000)
    assert rows == [(0, 0, *expect0), (0, 1, *expect0), (1, 0, *expect1), (1, 1, *expect1)]
    totals = result.steps.totals()
    assert totals[0] == {"rank": 0, "steps": 2, "step_ns": 90_000, "compute_ns": 55_000,
                         "collective_ns": 35_000, "overlap_ns": 15_000, "exposed_ns": 20_000,
                         "idle_ns": 15_000}
    df = result.steps.to_pandas()  # named and scaled as printed: "overlap ms" -> overlap_ms
    assert list(df.columns) == ["step", "rank", "step_ms", "compute_ms", "comm_ms", "overlap_ms",
                                "exposed_ms", "idle_ms"]
    assert list(df["overlap_ms"]) == [0.015, 0.015, 0, 0]
    assert "exposed ms" in str(result.steps)


# Step 0: rank 1 computes 10 us longer, then launches its allreduce 1 us later, as every rank
# does: compute. Step 1: both compute 30 us; rank 0 launches its allreduce 15 us after its
# compute ended (the other rank 1 us): a late launch. Step 2: rank 1 computes 1 us longer.
HELD0 = [(30_000, 31_000, 60_000), (30_000, 45_000, 60_000), (30_000, 31_000, 60_000)]
HELD1 = [(40_000, 41_000, 60_000), (30_000, 31_000, 60_000), (31_000, 32_000, 60_000)]


@pytest.mark.parametrize("name", ["trace.json.gz", "trace.parquet"])
def test_held_back_names_the_rank_and_why(tmp_path, monkeypatch, name):
    result, _ = _merge(tmp_path, monkeypatch, name, per_rank=[HELD0, HELD1])
    got = [(r["step"], r["rank"], r["collective"], r["held_ns"], r["idle_before_ns"],
            r["others_idle_before_ns"], r["compute_ns"], r["others_compute_ns"], r["reason"])
           for r in result.held_back.rows]
    assert got == [(1, 0, "AllReduce #1", 14_000, 15_000, 1_000, 30_000, 30_000, "late launch"),
                   (0, 1, "AllReduce #0", 10_000, 1_000, 1_000, 40_000, 30_000, "compute"),
                   (2, 1, "AllReduce #2", 1_000, 1_000, 1_000, 31_000, 30_000, "compute")]
    assert result.straggler.last == [1, 0, 1]
    skew = [c["skew_ns"] for c in result.collectives]
    assert skew == [10_000, 14_000, 1_000]
    assert [c["last_rank"] for c in result.collectives] == [1, 0, 1]
    text = str(result.held_back)
    assert "late launch" in text and "compute" in text
    assert len(result.held_back.to_pandas()) == 3
    json.dumps(result.to_dict())


@pytest.mark.parametrize("name", ["trace.json.gz", "trace.parquet"])
def test_a_range_of_steps_or_a_window_writes_only_those(tmp_path, monkeypatch, name):
    full, events = _merge(tmp_path, monkeypatch, name)
    part, some = _merge(tmp_path, monkeypatch, name, steps=(1, 2))
    # step 1 on the merged line: rank 0 from 101_000 (aligned, true time) to 150_000
    assert part.window_ns == (R.STEP + 1000, R.STEP + 1000 + 50_000)
    for pid in (0, 1):
        kept = _kernels(some, pid)
        assert [k[0] for k in kept] == [k[0] for k in _kernels(events, pid)][2:4]
    assert {e["ph"] for e in some} >= {"M", "X", "b", "e"}
    pairs = Counter((e["id"], e["ph"]) for e in some if e["ph"] in "be")
    assert pairs and set(pairs.values()) == {1}  # whole b/e pairs, never half of one
    assert {i for i, _ in pairs} == {i for i, ph in pairs if ph == "b"} == {i for i, ph in pairs if ph == "e"}
    assert part.straggler.rows == full.straggler.rows  # the tables cover every step
    w, few = _merge(tmp_path, monkeypatch, name, window=(0, 20_000))
    assert [k[0] for k in _kernels(few, 0)] == [1000]
    with pytest.raises(ValueError, match="out of range"):
        _merge(tmp_path, monkeypatch, name, steps=(2, 9))
    with pytest.raises(ValueError, match="not both"):
        _merge(tmp_path, monkeypatch, name, steps=(0, 1), window=(0, 1))


def test_many_ranks_find_the_slow_one(tmp_path, monkeypatch):
    # 8 ranks, rank 5 computes 9 us longer in step 1; wall clocks off by up to 70 us
    per_rank = [[(30_000, 31_000), (39_000 if r == 5 else 30_000, 40_000 if r == 5 else 31_000),
                 (30_000, 31_000)] for r in range(8)]
    bases = [1_000_000_000 * (r + 1) for r in range(8)]
    errors = [10_000 * r - 35_000 for r in range(8)]
    paths = R.export_ranks(tmp_path, monkeypatch, per_rank, bases, errors, name="t.parquet")
    result = merge_traces(paths, tmp_path / "m.json")
    assert result.alignment["spread_max_ns"] == 0
    assert result.straggler.last[1] == 5
    top = result.held_back.rows[0]
    assert (top["step"], top["rank"], top["held_ns"], top["reason"]) == (1, 5, 9_000, "compute")
    waits = {r["rank"]: r["wait_ns"] for r in result.straggler.rows if r["step"] == 1}
    assert waits == {r: (0 if r == 5 else 9_000) for r in range(8)}


def test_late_group_is_closer_to_the_latest_than_to_the_median():
    from gpuprofile.tracing.analyses import late_group

    assert late_group([0, 10]) == [1] and late_group([5, 5]) == []  # two ranks: as before
    assert late_group([0, 10, 10, 0]) == [1, 2]  # a tie for last: both, the lower index first
    assert late_group([0, 10, 14, 0]) == [2, 1]  # median 5: 10 > 5 + (14 - 5) / 2
    assert late_group([0, 9, 14, 0]) == [2]  # median 4.5: 9 is not above 4.5 + 9.5 / 2
    assert late_group([0, 8, 12, 0]) == [2] and late_group([0, 9, 12, 0]) == [2, 1]  # 8 is on the line
    assert late_group([0, 10, 10, 10]) == []  # the latest is the median: three arrived together
    base = 1_790_000_000_000_000_000  # ns since an epoch: beyond a float's 53 bits
    assert late_group([base, base + 2, base + 4, base]) == [2]
    assert late_group([base, base + 3, base + 4, base]) == [2, 1]


# Four ranks, three steps (compute end, allreduce start). Step 0: ranks 1 and 2 compute 10 us
# longer, alike: one row naming both. Step 1: rank 2 14 us longer, rank 1 10 us: both late, rank
# 2 last. Step 2: only rank 3 is slow (9 us); rank 2 is 2 us late, nearer the median than
# rank 3: not in the group, and the row is what one late rank always gave.
FOUR = [[(30_000, 31_000), (30_000, 31_000), (30_000, 31_000)],
        [(40_000, 41_000), (40_000, 41_000), (30_000, 31_000)],
        [(40_000, 41_000), (44_000, 45_000), (32_000, 33_000)],
        [(30_000, 31_000), (30_000, 31_000), (39_000, 40_000)]]


@pytest.mark.parametrize("name", ["trace.json.gz", "trace.parquet"])
def test_two_slow_ranks_at_once_are_one_row(tmp_path, monkeypatch, name):
    bases = [1_000_000_000 * (r + 1) + 777 * r for r in range(4)]
    paths = R.export_ranks(tmp_path, monkeypatch, FOUR, bases, [0, 30_000, -20_000, 5_000], name=name)
    result = merge_traces(paths, tmp_path / "m.json")
    assert result.alignment["spread_max_ns"] == 0
    assert result.straggler.last == [1, 2, 3]
    got = [(r["step"], r["rank"], r["ranks"], r["held_ns"], r["idle_before_ns"], r["others_idle_before_ns"],
            r["compute_ns"], r["others_compute_ns"], r["reason"]) for r in result.held_back.rows]
    assert got == [(1, 2, [1, 2], 14_000, 1_000, 1_000, 44_000, 30_000, "compute"),
                   (0, 1, [1, 2], 10_000, 1_000, 1_000, 40_000, 30_000, "compute"),
                   # the old definition: rank 3's start minus the next latest (rank 2's)
                   (2, 3, [3], 7_000, 1_000, 1_000, 39_000, 30_000, "compute")]
    text = str(result.held_back)
    assert "late ranks" in text and "1,2" in text
    assert "late ranks" in result.held_back._repr_html_()
    result.held_back.to_csv(tmp_path / "held.csv")
    lines = (tmp_path / "held.csv").read_text().splitlines()
    assert lines[0].split(",") == ["step", "rank", "late_ranks", "collective", "held_us",
                                   "gpu_idle_before_us", "others_idle_us", "compute_ms",
                                   "others_compute_ms", "why"]
    held_us = result.held_back.rows[0]["held_ns"] / 1e3  # as printed: us
    assert '"[1, 2]"' in lines[1] and float(lines[1].split(",")[-6]) == held_us == 14.0
    waits = {r["rank"]: r["wait_ns"] for r in result.straggler.rows if r["step"] == 0}
    assert waits == {0: 10_000, 1: 0, 2: 0, 3: 10_000}
    json.dumps(result.to_dict())


@pytest.mark.parametrize("name", ["trace.json.gz", "trace.parquet"])
def test_scale_generator_answers_are_found(tmp_path, monkeypatch, name):
    # the benchmark's ranks (bench_merge.py), small: 6 ranks of 40 steps x 20 kernels
    world, steps = 6, 40
    paths = R.export_ranks(tmp_path, monkeypatch, [None] * world, [0] * world, [0] * world,
                           name=name, make=lambda r, *_: R.scale_profile(r, world, steps, 20))
    result = merge_traces(paths, tmp_path / "m.json")
    assert result.alignment["spread_max_ns"] == 0  # every wall-clock error removed
    assert result.straggler.last == [R.planted(k, world)[0] for k in range(steps)]
    found = sorted((row["step"], row["rank"], row["reason"], row["held_ns"])
                   for row in result.held_back.rows)
    expect = []
    for k in range(steps):
        who, why, late = R.planted(k, world)
        # compute: each of 20 kernels longer by late // 20 + 1 ns; late launch: exactly `late`
        expect.append((k, who, why, late if why == "late launch" else 20 * (late // 20 + 1)))
    assert found == expect


def _with_copies(rank, steps, base, error):
    """rank_profile plus a copy, a set and an allocation and free in step 0."""
    import dataclasses

    import numpy as np
    import synthetic as S

    from gpuprofile.tracing.activity import MEMCPY_RAW, MEMSET_RAW, Window

    p = R.rank_profile(rank, steps, base, error)
    w = p._window
    mc = np.zeros(1, MEMCPY_RAW)
    mc["start"], mc["end"], mc["bytes"], mc["copy_kind"] = base + 2000, base + 3000, 1 << 20, 1
    ms = np.zeros(1, MEMSET_RAW)
    ms["start"], ms["end"], ms["bytes"], ms["memory_kind"] = base + 4000, base + 4500, 4096, 3
    for t in (mc, ms):
        t["device"], t["stream"], t["correlation_id"] = rank, 7, 900
    mem = S.memory_events([(base + 1500, "alloc", 1 << 20, 0xA000), (base + 9000, "free", 1 << 20, 0xA000)])
    mem["device"] = rank
    chunk = dataclasses.replace(w.chunk, memcpy=mc, memset=ms, memory=mem)
    window = Window(t0=w.t0, t1=w.t1, offset_ns=w.offset_ns, offset_uncertainty_ns=20, chunk=chunk,
                    clock_pair=w.clock_pair)
    return type(p)._from_window(window, p._records, S.LIMITS | {1: S.LIMITS[0]})


def test_copies_sets_and_memory_merge_alike_from_either_format(tmp_path, monkeypatch):
    _, ea = _merge(tmp_path, monkeypatch, "trace.json.gz", make=_with_copies)
    _, eb = _merge(tmp_path, monkeypatch, "trace.parquet", make=_with_copies)

    def of(events, cats):
        return sorted((e["pid"], e.get("tid", -1), e.get("cat", ""), e["name"], round(e["ts"] * 1000),
                       round(e.get("dur", 0) * 1000), json.dumps(e.get("args"), sort_keys=True))
                      for e in events if e.get("cat") in cats or e.get("ph") == "C")

    a, b = of(ea, ("memcpy", "memset")), of(eb, ("memcpy", "memset"))
    assert a == b and len(a) == 2 * 4  # per rank: a copy, a set, an allocation and a free
    names = {x[3] for x in a}
    assert {"Memcpy HtoD", "Memset (device)", "device memory (GPU 0)", "device memory (GPU 1)"} <= names
    counters = [x for x in b if x[3].startswith("device memory")]
    assert [json.loads(x[6])["bytes"] for x in counters if x[0] == 0] == [1 << 20, 0]


def test_flight_recorder_sizes_reach_the_columns_and_the_merge(tmp_path, monkeypatch):
    """As test_merge's JSON test: a size from torch's NCCL Flight Recorder wins over a
    collective() region's, in the Parquet column and in the merge of Parquet ranks."""
    def entry(seq):
        return {"process_group": ["0", "default_pg"], "collective_seq_id": seq, "record_id": seq,
                "profiling_name": "nccl:all_reduce", "time_created_ns": 0,
                "input_sizes": [[3000]], "input_dtypes": ["Float"],
                "output_sizes": [[3000]], "output_dtypes": ["Float"]}

    def make(r, steps, base, error):
        p = R.rank_profile(r, steps, base, error)
        p._recorded_collectives = ([entry(s) for s in range(1, 6)], None)
        return p

    paths = R.export_ranks(tmp_path, monkeypatch, [RANK0, RANK1], BASES, WALL_ERROR,
                           name="trace.parquet", make=make)
    import pyarrow.parquet as pq

    t = pq.read_table(paths[0]).to_pandas()
    k = t[t["kind"] == "kernel"].sort_values("start_ns")
    assert k["collective_bytes"].tolist() == [-1, 12_000] * 3  # not the regions' R.NBYTES
    result = merge_traces(paths, tmp_path / "m.json")
    assert [c["bytes"] for c in result.collectives] == [12_000] * 3
