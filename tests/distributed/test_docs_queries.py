"""The three queries of docs/distributed.md ("Query it yourself"), run as the page prints them
on a job in the documented layout (job/rank=R/trace.parquet) whose answers are planted: rank
37's compute kernel grows by a fifth from step 900 on, rank 1's AllReduce takes twice as long,
and rank 37 arrives last at every AllReduce from step 900 on because of it. Only the paths are
replaced (the page's 'job/' and 'tables/' are relative). Also: a range of steps is a range of
start_ns, and the row groups' statistics let a reader skip the others."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import ranks_synthetic as R

duckdb = pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")

DOC = Path(__file__).resolve().parents[2] / "docs" / "distributed.md"
STEPS = 1000


def _queries() -> list:
    page = DOC.read_text()
    section = page[page.index("## Query it yourself"):]
    block = re.search(r"```sql\n(.*?)```", section, re.S).group(1)
    return [q.strip() for q in block.split(";") if q.strip()]


def _job(root: Path, monkeypatch) -> Path:
    job = root / "job"
    for rank in (0, 1, 37):  # three ranks of a job of 38: the others' files are elsewhere
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "38")
        monkeypatch.setenv("LOCAL_RANK", str(rank % 8))
        grown = 36_000 if rank == 37 else 30_000
        steps = [((grown if k >= 900 else 30_000), (grown if k >= 900 else 30_000) + 1000,
                  70_000 if rank == 1 else 50_000) for k in range(STEPS)]
        R.rank_profile(rank, steps, 1_000_000_000 * (rank + 1), 0).export_parquet(
            job / "rank={rank}" / "trace.parquet")
    return job


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    root = tmp_path_factory.mktemp("docs_queries")
    with pytest.MonkeyPatch.context() as monkeypatch:
        job = _job(root, monkeypatch)
    out = subprocess.run([sys.executable, "-m", "gpuprofile", "merge", "job/", "-o", "m.json.gz",
                          "--tables", "tables/", "--trace-ranks", "37"], cwd=root,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    con = duckdb.connect()
    results = []
    for q in _queries():
        q = q.replace("'job/", f"'{job.as_posix()}/").replace("'tables/", f"'{root.as_posix()}/tables/")
        results.append(con.execute(q).fetchall())
    return results


def test_the_page_has_three_queries():
    assert len(_queries()) == 3


def test_which_kernels_grew_on_rank_37_after_step_900(answers):
    assert answers[0] == [("gemm_kernel(float*)", 30_000.0, 36_000.0)]


def test_the_ranks_whose_allreduce_takes_longest(answers):
    assert answers[1][0] == (1, STEPS, 39.0)
    assert sorted(row[0] for row in answers[1]) == [0, 1, 37]


def test_who_held_the_job_back_and_why(answers):
    assert answers[2] == [(37, "compute", 100, pytest.approx(0.6))]


def test_a_range_of_steps_reads_only_its_row_groups(tmp_path, monkeypatch):
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from gpuprofile.tracing.columns import write_parquet

    job = _job(tmp_path, monkeypatch)
    path = job / "rank=37" / "trace.parquet"
    write_parquet(str(path), pq.read_table(path), row_group_rows=250)  # a real rank's 131 072
    con = duckdb.connect()
    lo, hi = con.execute(
        "WITH steps AS (SELECT row_number() OVER (ORDER BY min(start_ns)) - 1 AS step, "
        "min(start_ns) AS lo, max(end_ns) AS hi FROM read_parquet(?) "
        "WHERE kind = 'region (GPU)' AND name = 'step' GROUP BY record) "
        "SELECT min(lo), max(hi) FROM steps WHERE step BETWEEN 900 AND 909", [str(path)]).fetchone()
    wanted = (ds.field("start_ns") >= lo) & (ds.field("start_ns") < hi)
    fragment = next(iter(ds.dataset(job, format="parquet", partitioning="hive")
                         .get_fragments(filter=ds.field("rank") == 37)))
    groups = fragment.split_by_row_group(wanted)
    total = pq.ParquetFile(path).metadata.num_row_groups
    rows = sum(g.count_rows(filter=wanted & (ds.field("kind") == "kernel")) for g in groups)
    assert rows == 20  # the 10 steps' compute kernels and AllReduces
    assert total >= 12 and len(groups) <= 4  # kernels, host regions, GPU spans: one or two each
