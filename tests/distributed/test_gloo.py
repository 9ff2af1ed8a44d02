"""Two CPU ranks with torch.distributed's gloo backend (skipped without torch): rank_info()
comes from torch.distributed once the group is initialised, and regions, benchmark results and
trace paths are per rank."""

import json
import os

import pytest

torch = pytest.importorskip("torch")
mp = pytest.importorskip("torch.multiprocessing")
dist = pytest.importorskip("torch.distributed")

import dist_workers as W  # noqa: E402

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")


def test_two_gloo_ranks_know_who_they_are(tmp_path, monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    mp.spawn(W.gloo_rank, args=(2, W.free_port(), str(tmp_path)), nprocs=2, join=True)
    for r in range(2):
        got = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert got["before"] == [0, 1, 0, "single"]
        assert got["info"] == [r, 2, r, "torch.distributed"]
        assert got["sum"] == 3.0  # the all_reduce ran: 1 + 2
        assert got["path"] == os.path.join(tmp_path, f"trace.rank{r}.json.gz")
        assert sorted(got["regions"]) == ["collective AllReduce 4096 B", "step"]
        assert got["report_rank"] == r
        assert got["saved"] == os.path.join(tmp_path, f"bench.rank{r}.json")
        saved = json.loads((tmp_path / f"bench.rank{r}.json").read_text())
        assert (saved["rank"], saved["world_size"]) == (r, 2)
