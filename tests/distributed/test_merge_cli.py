"""`gpuprofile merge` from the command line: results on stdout, errors on stderr, exit codes."""

import json
import subprocess
import sys

import ranks_synthetic as R
from test_merge import BASES, RANK0, RANK1, WALL_ERROR


def gpuprofile(*args, cwd):
    return subprocess.run([sys.executable, "-m", "gpuprofile", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd)


def test_merge_command(tmp_path, monkeypatch):
    paths = R.export_ranks(tmp_path, monkeypatch, [RANK0, RANK1], BASES, WALL_ERROR)
    out = gpuprofile("merge", *paths, "-o", tmp_path / "m.json.gz", "--json", tmp_path / "m.json",
                     cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert "merged 2 ranks" in out.stdout and "collective ends agree within 0 us" in out.stdout
    assert "the wall clocks disagreed by 40 us" in out.stdout
    assert "stragglers per 'step' step (3 steps, 2 ranks)" in out.stdout
    summary = json.loads((tmp_path / "m.json").read_text())
    assert summary["straggler"]["last_rank"] == [1, 1, 0]
    assert (tmp_path / "m.json.gz").stat().st_size > 0
    # a --json path that cannot be written: the merge is printed, then exit 2 (an error) with
    # the reason
    out = gpuprofile("merge", *paths, "-o", tmp_path / "m2.json.gz", "--json", tmp_path,
                     cwd=tmp_path)
    assert out.returncode == 2 and "merged 2 ranks" in out.stdout
    assert f"gpuprofile merge: error: cannot write {tmp_path}: " in out.stderr


def test_merge_usage_and_file_errors(tmp_path):
    out = gpuprofile("merge", tmp_path / "a.json", cwd=tmp_path)  # no -o
    assert out.returncode == 2 and out.stdout == "" and "-o/--output" in out.stderr
    out = gpuprofile("merge", tmp_path / "missing.json", "-o", tmp_path / "m.json", cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == "" and "missing.json" in out.stderr
    assert not (tmp_path / "m.json").exists()


# The shape of torch.profiler's export_chrome_trace of one rank of a DDP job (values shortened):
# its own top-level metadata and distributedInfo, no otherData.
TORCH_TRACE = {
    "schemaVersion": 1,
    "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9}],
    "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2},
    "cupti_version": 24, "cuda_runtime_version": 12080, "cuda_driver_version": 12080,
    "displayTimeUnit": "ms", "baseTimeNanoseconds": 1732600000000000000,
    "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 4242, "tid": 4242,
         "ts": 5000000.25, "dur": 12.5, "args": {"External id": 3}},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
         "pid": 0, "tid": 7, "ts": 5000010.5, "dur": 30.0,
         "args": {"device": 0, "stream": 7, "correlation": 11}},
    ],
    "traceName": "trace.rank0.pt.trace.json",
}


def test_merge_names_a_foreign_trace(tmp_path, monkeypatch):
    """A torch.profiler trace next to ours is foreign (issue 25), not 'of the same rank'."""
    paths = R.export_ranks(tmp_path, monkeypatch, [RANK0, RANK1], BASES, WALL_ERROR)
    torch_trace = tmp_path / "torch.json"
    torch_trace.write_text(json.dumps(TORCH_TRACE))
    for files in ([torch_trace, paths[0]], [paths[1], torch_trace], [torch_trace]):
        out = gpuprofile("merge", *files, "-o", tmp_path / "m.json", cwd=tmp_path)
        assert out.returncode == 2 and out.stdout == ""
        assert out.stderr == (f"gpuprofile merge: error: {torch_trace}: a foreign trace (torch.profiler's "
                              "or another tool's: no otherData.gpuprofile): merge reads the per-rank "
                              "traces that gpuprofile's Profile.export_chrome_trace writes\n")
        assert not (tmp_path / "m.json").exists()


def test_merge_engine_and_trace_ranks_options(tmp_path, monkeypatch):
    paths = R.export_ranks(tmp_path, monkeypatch, [RANK0, RANK1], BASES, WALL_ERROR)
    runs = {}
    for engine in ("numpy", "duckdb"):
        out = gpuprofile("merge", *paths, "-o", tmp_path / f"{engine}.json", "--engine", engine,
                         "--trace-ranks", "1", "--json", tmp_path / f"{engine}-summary.json",
                         "--memory-limit", "200MB", "--temp-dir", tmp_path, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        runs[engine] = json.loads((tmp_path / f"{engine}-summary.json").read_text())
        events = json.loads((tmp_path / f"{engine}.json").read_text())["traceEvents"]
        assert {e["pid"] for e in events if e.get("ph") == "X"} == {1}
    assert runs["numpy"]["steps"] == runs["duckdb"]["steps"]
    assert runs["numpy"]["held_back"] == runs["duckdb"]["held_back"]
    out = gpuprofile("merge", *paths, "-o", tmp_path / "x.json", "--trace-ranks", "3-1", cwd=tmp_path)
    assert out.returncode == 2 and "expected ranks like 0,3,8-15" in out.stderr
