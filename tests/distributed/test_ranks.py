"""Rank awareness without torch: rank_info() from the environment, per-rank paths, the
collective() region's name, the clock pair; torch.distributed is consulted only when imported."""

import sys
import types

import pytest

import gpuprofile as gp
from gpuprofile import distributed as D


@pytest.fixture(autouse=True)
def _no_launcher_env(monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)


def test_single_process_by_default():
    assert D.rank_info() == (0, 1, 0, "single")
    assert D.rank_path("trace.json.gz") == "trace.json.gz"
    assert D.rank_fields() == {}


def test_rank_from_the_launcher_environment(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert gp.rank_info() == (3, 4, 1, "env")
    assert D.rank_fields() == {"rank": 3, "world_size": 4}
    assert D.rank_path("out/trace.json.gz") == "out/trace.rank3.json.gz"
    assert D.rank_path("results.json") == "results.rank3.json"
    assert D.rank_path("trace") == "trace.rank3"
    assert D.rank_path("run.{rank}/t.json") == "run.3/t.json"  # a placeholder wins


@pytest.mark.parametrize("env", [{"RANK": "2", "WORLD_SIZE": "2"}, {"RANK": "x", "WORLD_SIZE": "2"},
                                 {"RANK": "0"}, {"RANK": "-1", "WORLD_SIZE": "2"}])
def test_inconsistent_environment_means_single(monkeypatch, env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert D.rank_info().source == "single"


def test_placeholder_in_a_single_process():
    assert D.rank_path("t.{rank}.json") == "t.0.json"


def _fake_dist(initialised=True, rank=1, world=2):
    dist = types.ModuleType("torch.distributed")
    dist.is_available = lambda: True
    dist.is_initialized = lambda: initialised
    dist.get_rank = lambda: rank
    dist.get_world_size = lambda: world
    return dist


def test_torch_distributed_when_imported_and_initialised(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.distributed", _fake_dist())
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "8")
    assert D.rank_info() == (1, 2, 1, "torch.distributed")
    monkeypatch.setitem(sys.modules, "torch.distributed", _fake_dist(initialised=False))
    assert D.rank_info() == (0, 8, 0, "env")


def test_torch_is_never_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.delitem(sys.modules, "torch.distributed", raising=False)
    D.rank_info()
    assert "torch" not in sys.modules


def test_collective_region_names_op_and_bytes():
    assert D.collective_region_name("all_reduce", 4096) == "collective AllReduce 4096 B"
    assert D.collective_region_name("AllGather", 0) == "collective AllGather 0 B"
    with pytest.raises(ValueError):
        D.collective_region_name("all_reduce", -1)
    gp.reset()
    with D.collective("reduce_scatter_tensor", 1 << 20):
        pass
    assert list(gp.records()["name"]) == ["collective ReduceScatter 1048576 B"]
    gp.reset()


def test_clock_pair_relates_cupti_to_wall_clock():
    import time

    before = time.time_ns()
    pair = D.clock_pair(offset_ns=1_000, offset_uncertainty_ns=30)
    after = time.time_ns()
    assert before <= pair["wall_ns"] <= after
    assert abs(pair["cupti_ns"] - 1_000 - time.monotonic_ns()) < 10**9
    assert pair["uncertainty_ns"] >= 30
    meta = D.trace_metadata(pair)
    assert meta["rank"] == 0 and meta["world_size"] == 1 and meta["clock_pair"] is pair


def test_region_report_names_the_rank(monkeypatch):
    gp.reset()
    with gp.region("fwd"):
        pass
    assert "rank" not in gp.report().to_dict() and "rank" not in str(gp.report())
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    report = gp.report()
    assert report.to_dict()["rank"] == 1 and report.to_dict()["world_size"] == 2
    assert str(report).startswith("gpuprofile regions (rank 1 of 2)")
    gp.reset()


def test_ddp_comm_hook_wraps_the_default_allreduce_in_a_collective_region(monkeypatch):
    seen = []

    def default_allreduce(process_group, bucket):
        seen.append(process_group)
        return "future"

    hooks = types.ModuleType("torch.distributed.algorithms.ddp_comm_hooks")
    hooks.default_hooks = types.SimpleNamespace(allreduce_hook=default_allreduce)
    for name in ("torch", "torch.distributed", "torch.distributed.algorithms"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "torch.distributed.algorithms.ddp_comm_hooks", hooks)
    buffer = types.SimpleNamespace(numel=lambda: 1000, element_size=lambda: 2)
    bucket = types.SimpleNamespace(buffer=lambda: buffer)
    gp.reset()
    assert D.allreduce_hook("group", bucket) == "future"
    assert seen == ["group"]
    assert list(gp.records()["name"]) == ["collective AllReduce 2000 B"]
    gp.reset()
