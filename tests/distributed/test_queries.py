"""The analyses' SQL (gpuprofile/tracing/queries.py) against the hand-written NumPy pass
(analyses.summarize) on random ranks made to hit the edge cases of a union of intervals:
kernels that overlap, touch, nest, tie in start or end, or have no length; step windows that overlap, touch, are empty or inverted, or hold no kernel."""

import numpy as np
import pytest

from gpuprofile.tracing import analyses, engines, queries
from gpuprofile.tracing.rank_input import Scan

duckdb = pytest.importorskip("duckdb")


def _scan(rng, n: int, m: int) -> Scan:
    grid = int(rng.integers(5, 200))  # a coarse grid makes ties and touching intervals common
    start = rng.integers(0, grid, n) * 10
    end = start + rng.integers(0, 8, n) * 10  # the readers refuse a kernel that ends first
    collective = np.where(rng.random(n) < 0.3, rng.choice(["AllReduce", "AllGather"], n), "")
    lo = np.sort(rng.integers(-5, grid + 5, m) * 10)
    hi = lo + rng.integers(-1, 30, m) * 10
    steps = np.array(sorted(zip(lo.tolist(), hi.tolist(), strict=True)), np.int64).reshape(-1, 2)
    return Scan({"rank": 0}, start.astype(np.int64), end.astype(np.int64),
                collective.astype(object), np.full(n, "RING", object), np.full(n, "LL", object),
                rng.integers(-1, 5, n).astype(np.int64), np.arange(n, dtype=np.int64) * 3,
                steps, [0])


def _by_sql(scans: dict) -> list:
    con = duckdb.connect()
    kernels, windows = engines._scanned_relations(con, scans)
    con.execute(f"CREATE TEMP VIEW kernels AS {kernels}")
    con.execute(f"CREATE TEMP VIEW windows AS {windows}")
    step_cols = con.execute(queries.STEPS).fetchnumpy()
    nccl_cols = con.execute(queries.NCCL).fetchnumpy()
    return [engines._rank_summary(i, "x", s.meta, s.gpus, step_cols, nccl_cols)
            for i, s in scans.items()]


@pytest.mark.parametrize("seed", range(8))
def test_the_sql_and_the_numpy_pass_agree_on_random_ranks(seed):
    rng = np.random.default_rng(seed)
    scans = {i: _scan(rng, int(rng.integers(0, 60)), int(rng.integers(1, 12))) for i in range(6)}
    for i, b in enumerate(_by_sql(scans)):
        a = analyses.summarize(0, "x", scans[i])
        for f in analyses.STEP_FIELDS:
            assert a.per_step[f].tolist() == b.per_step[f].tolist(), (seed, i, f)
        for f in a.nccl:
            assert a.nccl[f].tolist() == b.nccl[f].tolist(), (seed, i, f)


def _arrivals(rng, world: int, n: int) -> tuple:
    """Ranks, matched collectives, aligned starts, last and first of analyses.straggler's
    shape: one collective per step (some steps without one), starts on a coarse grid (ties,
    groups of late ranks, a latest start that is also the median)."""
    from types import SimpleNamespace

    starts = rng.integers(0, 6, (n, world)) * 1000 + rng.integers(0, 3, (n, world))
    ranks = []
    for i in range(world):
        lo = np.arange(n, dtype=np.int64) * 100_000 - rng.integers(0, 5000, n)
        own = starts[:, i] + 40
        idle = np.where(rng.random(n) < 0.1, np.iinfo(np.int64).max, rng.integers(0, 9, n) * 500)
        ranks.append(SimpleNamespace(
            rank=3 * i + 1, steps=np.stack([lo, lo + 90_000], axis=1),
            nccl={"start": own.astype(np.int64), "idle_before": idle.astype(np.int64)},
            per_step={"compute_ns": (rng.integers(0, 9, n) * 500).astype(np.int64)}))
    matched = {"op": ["AllReduce"] * n, "index": np.arange(n),
               "pos": np.tile(np.arange(n)[:, None], (1, world))}
    first = [None if rng.random() < 0.2 else k for k in range(n)]
    last = [None if c is None else int(np.argmax(starts[c])) for c in first]
    return ranks, matched, starts.astype(np.int64), last, first


@pytest.mark.parametrize("seed", range(6))
def test_the_held_back_sql_and_the_numpy_pass_agree(seed):
    rng = np.random.default_rng(100 + seed)
    for world in (1, 2, 3, 4, 7):
        args = _arrivals(rng, world, 40)
        want = analyses.held_back(*args)
        got = engines.held_back(*args, engine="duckdb")
        assert got == want, (seed, world)
        assert [list(row) for row in got] == [list(row) for row in want]  # the keys' order
    assert want  # the cases reach the table
