"""gpuprofile merge on synthetic per-rank traces written by the project's own exporter: one
process per rank, clocks aligned (a known wall-clock error between ranks is found and removed by
the collective ends), NCCL kernels named with bytes and bus bandwidth, and the straggler table's
arithmetic checked exactly."""

import gzip
import json

import pytest
import ranks_synthetic as R

import gpuprofile as gp
from gpuprofile.tracing.merge import merge_traces, read_trace

# (compute_end, allreduce_start) per step, ns after the step's start; allreduce ends at 50_000
RANK0 = [(30_000, 31_000), (30_000, 31_000), (45_000, 46_000)]
RANK1 = [(30_000, 31_500), (40_000, 41_000), (30_000, 31_000)]
BASES = [3_000_000_000, 7_500_000_123]  # unrelated CUPTI clocks
WALL_ERROR = [0, 40_000]  # rank 1's host wall clock runs 40 us ahead


def _merge(tmp_path, monkeypatch, align="auto", errors=WALL_ERROR):
    paths = R.export_ranks(tmp_path, monkeypatch, [RANK0, RANK1], BASES, errors)
    result = merge_traces(paths, tmp_path / "merged.json.gz", align=align)
    with gzip.open(result.path, "rt") as f:
        return paths, result, json.load(f)


def _kernels(trace, pid):
    return sorted((e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["pid"] == pid),
                  key=lambda e: e["ts"])


def test_per_rank_files_carry_rank_and_clock_pair(tmp_path, monkeypatch):
    paths = R.export_ranks(tmp_path, monkeypatch, [RANK0, RANK1], BASES, WALL_ERROR)
    assert [p.rsplit("/", 1)[1] for p in paths] == ["trace.rank0.json.gz", "trace.rank1.json.gz"]
    data = read_trace(paths[1])
    meta = data["otherData"]
    assert (meta["rank"], meta["world_size"], meta["local_rank"], meta["rank_source"]) == (1, 2, 1, "env")
    assert meta["clock_pair"] == {"cupti_ns": BASES[1] + 10_000, "wall_ns": R.WALL0 + 50_000,
                                  "uncertainty_ns": 100}
    names = {e["args"]["name"] for e in data["traceEvents"] if e.get("name") == "process_name"}
    assert "rank 1 / GPU 1" in names and any(n.startswith("rank 1 / Host") for n in names)


def test_merge_has_one_process_per_rank_on_one_time_line(tmp_path, monkeypatch):
    _, result, trace = _merge(tmp_path, monkeypatch)
    procs = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert sorted(procs) == [0, 1]
    assert procs[0].startswith("rank 0 (GPU 0, host ") and procs[1].startswith("rank 1 (GPU 1")
    assert {e["pid"] for e in trace["traceEvents"]} == {0, 1}
    threads = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert {"GPU 0 stream 7", "GPU 1 stream 13"} <= threads
    spans = [e for e in trace["traceEvents"] if e["ph"] in ("b", "e")]
    assert spans and all(e["id"].startswith(f"{e['pid']}:") for e in spans)  # unique per rank
    assert min(e["ts"] for e in trace["traceEvents"] if "ts" in e) >= 0
    # the collective ends removed the 40 us wall-clock error exactly: true times on both ranks
    for pid, steps in ((0, RANK0), (1, RANK1)):
        starts = [round(e["ts"] * 1000) for e in _kernels(trace, pid)]
        expect = []
        for s, (_, ar) in enumerate(steps):
            expect += [s * R.STEP + 1000, s * R.STEP + 1000 + ar]
        assert starts == expect  # time zero: the profiles' start, true time 0 on both ranks
    a = result.alignment
    assert a["method"] == "wall clock + collective ends"
    assert a["corrections_ns"] == [20_000, -20_000]
    assert a["spread_median_ns"] == a["spread_max_ns"] == 0
    assert a["wall_uncertainty_ns"] == 200
    assert a["collectives_matched"] == 3


def test_wall_only_alignment_keeps_the_wall_error(tmp_path, monkeypatch):
    _, result, trace = _merge(tmp_path, monkeypatch, align="wall")
    r0, r1 = _kernels(trace, 0), _kernels(trace, 1)
    assert round((r1[1]["ts"] + r1[1]["dur"]) * 1000) - round((r0[1]["ts"] + r0[1]["dur"]) * 1000) == 40_000
    assert result.alignment["method"] == "wall clock"
    assert result.alignment["spread_median_ns"] is None


def test_nccl_kernels_are_named_with_bytes_and_bus_bandwidth(tmp_path, monkeypatch):
    _, result, trace = _merge(tmp_path, monkeypatch)
    nccl = [e for e in _kernels(trace, 0) if e["name"].startswith("NCCL")]
    assert [e["name"] for e in nccl] == ["NCCL AllReduce (RING/LL)"] * 3
    args = nccl[0]["args"]
    assert args["kernel"] == R.NAMES[1] and args["collective"] == "AllReduce"
    assert args["bytes"] == R.NBYTES and args["wait_us"] == 0.5
    transfer = 50_000 - 31_500  # from the last rank's arrival to the last end
    assert args["transfer_us"] == transfer / 1000
    # two ranks: busbw = algbw x 2(n-1)/n = algbw
    assert args["algbw_GBps"] == args["busbw_GBps"] == round(R.NBYTES / transfer, 3)
    rows = result.collectives
    assert [r["last_rank"] for r in rows] == [1, 1, 0]
    assert [r["transfer_ns"] for r in rows] == [18_500, 9_000, 4_000]
    assert "NCCL collectives" in str(result) and "AllReduce" in str(result)


def test_straggler_table_is_exact(tmp_path, monkeypatch):
    _, result, _ = _merge(tmp_path, monkeypatch)
    t = result.straggler
    got = [(r["step"], r["rank"], r["compute_ns"], r["collective_ns"], r["wait_ns"]) for r in t.rows]
    assert got == [(0, 0, 30_000, 19_000, 500), (0, 1, 30_000, 18_500, 0),
                   (1, 0, 30_000, 19_000, 10_000), (1, 1, 40_000, 9_000, 0),
                   (2, 0, 45_000, 4_000, 0), (2, 1, 30_000, 19_000, 15_000)]
    assert t.last == [1, 1, 0]
    assert t.totals() == [
        {"rank": 0, "steps": 3, "compute_ns": 105_000, "collective_ns": 42_000, "wait_ns": 10_500,
         "arrived_last": 1},
        {"rank": 1, "steps": 3, "compute_ns": 100_000, "collective_ns": 46_500, "wait_ns": 15_000,
         "arrived_last": 2}]
    text = str(t)
    assert "total" in text and "2 of 3" in text and "last" in text
    assert "<table>" in t._repr_html_()
    json.dumps(result.to_dict())  # JSON-ready


def test_merge_errors(tmp_path, monkeypatch):
    paths = R.export_ranks(tmp_path, monkeypatch, [RANK0, RANK1], BASES, WALL_ERROR)
    with pytest.raises(ValueError, match="same rank"):
        merge_traces([paths[0], paths[0]], tmp_path / "m.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not a Chrome trace"):
        merge_traces([bad], tmp_path / "m.json")
    with pytest.raises(ValueError, match="align"):
        merge_traces(paths, tmp_path / "m.json", align="ntp")
    assert not (tmp_path / "m.json").exists()


def test_top_level_function_and_missing_step(tmp_path, monkeypatch):
    paths = R.export_ranks(tmp_path, monkeypatch, [RANK0, RANK1], BASES, WALL_ERROR)
    result = gp.merge_traces(paths, tmp_path / "m.json", step="epoch")
    assert "no step found" in str(result.straggler)
    assert len(gp.merge_traces(paths[0], tmp_path / "one.json").ranks) == 1  # a single path
    assert json.loads((tmp_path / "m.json").read_text())["traceEvents"]


def test_four_ranks_with_jittered_ends(tmp_path, monkeypatch):
    # every rank leaves each allreduce within +-300 ns of true time 50_000; wall clocks off by
    # up to 120 us; rank 2 is slow in step 1, rank 3 in step 0
    jitter = [[0, 300, -200], [-300, 100, 0], [200, -100, 300], [100, 0, -300]]
    per_rank = []
    for r in range(4):
        steps = []
        for s in range(3):
            slow = (r, s) in ((2, 1), (3, 0))
            steps.append((40_000 if slow else 30_000, 41_000 if slow else 31_000 + 10 * r,
                          50_000 + jitter[r][s]))
        per_rank.append(steps)
    bases = [1_000_000_000 * (r + 1) + 17 * r for r in range(4)]
    errors = [0, 120_000, -35_000, 60_000]
    paths = R.export_ranks(tmp_path, monkeypatch, per_rank, bases, errors)
    result = merge_traces(paths, tmp_path / "m.json")
    a = result.alignment
    # the wall errors are removed to within the jitter; the spread reported is the jitter's
    recovered = [c + e for c, e in zip(a["corrections_ns"], errors, strict=True)]
    assert max(recovered) - min(recovered) <= 600
    assert 0 < a["spread_median_ns"] <= a["spread_max_ns"] <= 600 + 600
    assert result.straggler.last == [3, 2, 3]  # step 2: rank 3 starts 30 ns after rank 2
    factor = 2 * 3 / 4  # AllReduce over 4 ranks
    for c in result.collectives:
        assert c["busbw_gbps"] == pytest.approx(c["algbw_gbps"] * factor)
        assert c["algbw_gbps"] == pytest.approx(R.NBYTES / c["transfer_ns"])


def test_sizes_from_the_flight_recorder_reach_the_merge(tmp_path, monkeypatch):
    """A rank whose profile read torch's NCCL Flight Recorder writes each NCCL kernel's size
    (nccl_bytes) into its trace; merge prefers it to a collective() region's."""
    def entry(seq):  # one all_reduce of 3000 floats, as torch 2.11's recorder keeps it
        return {"process_group": ["0", "default_pg"], "collective_seq_id": seq, "record_id": seq,
                "profiling_name": "nccl:all_reduce", "time_created_ns": 0,
                "input_sizes": [[3000]], "input_dtypes": ["Float"],
                "output_sizes": [[3000]], "output_dtypes": ["Float"]}

    recorded = 3000 * 4  # 3000 floats, not the regions' R.NBYTES
    paths = []
    for r, steps in enumerate([RANK0, RANK1]):
        monkeypatch.setenv("RANK", str(r))
        monkeypatch.setenv("WORLD_SIZE", "2")
        p = R.rank_profile(r, steps, BASES[r], WALL_ERROR[r])
        p._recorded_collectives = ([entry(s) for s in range(1, 6)], None)
        assert p.collectives["kernel"].tolist() == [1, 3, 5] and p.collective_notes == []
        assert p.collectives["bytes"].tolist() == [recorded] * 3
        paths.append(p.export_chrome_trace(tmp_path / "trace.json.gz"))
    result = merge_traces(paths, tmp_path / "merged.json.gz")
    assert [c["bytes"] for c in result.collectives] == [recorded] * 3
    with gzip.open(paths[0], "rt") as f:
        rank0 = json.load(f)
    sized = [e["args"]["nccl_bytes"] for e in rank0["traceEvents"] if "nccl_bytes" in e.get("args", {})]
    assert sized == [recorded] * 3
