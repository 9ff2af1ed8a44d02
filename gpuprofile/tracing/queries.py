"""The per-rank analyses of `gpuprofile merge` as SQL, run by DuckDB in-process (engine
'duckdb', engines.py). One query reduces every rank at once, out of core under a memory limit:
per step, compute, communication, their overlap, exposed communication and idle time; per NCCL
kernel, its times and how long the GPU sat idle right before it. analyses.summarize computes
the same numbers with NumPy a rank at a time; the tests hold the two to identical results.

The query reads two relations, whatever the files were:
- kernels(idx, row, s, e, op, alg, proto, nbytes): idx is the file's position in the merge,
  row the kernel's row (Parquet) or event index (Chrome JSON) in its file, s and e ns from the
  rank's time zero, op NCCL's collective ('' for compute), nbytes -1 when unknown;
- windows(idx, step, lo, hi): the step region's windows, step k being the k-th by (lo, hi).
Parquet files that Profile.export_parquet wrote are read by DuckDB directly
(parquet_kernels / parquet_windows); any other file (Chrome JSON, or Parquet of another shape)
is scanned and checked by rank_input.scan and handed to DuckDB as arrays.

Union of intervals in SQL: a sweep (STEPS says how). It replaced run numbering by window
functions and ASOF joins, which took 2.2x as long on the same ranks (docs/distributed.md,
"Engines").
"""

from __future__ import annotations

INT64_MAX = 2**63 - 1

# the kernels and step windows of the Parquet files in `files` (file, idx, zero)
PARQUET_KERNELS = """
SELECT f.idx, p.file_row_number AS row, p.start_ns - f.zero AS s, p.end_ns - f.zero AS e,
       p.collective AS op, p.nccl_algorithm AS alg, p.nccl_protocol AS proto,
       p.collective_bytes AS nbytes
FROM read_parquet({files}, filename = true, file_row_number = true) p
JOIN files f ON p.filename = f.file
WHERE p.kind = 'kernel'
"""

PARQUET_WINDOWS = """
WITH spans AS (
    SELECT f.idx, p.kind, p.record, min(p.start_ns - f.zero) AS lo, max(p.end_ns - f.zero) AS hi
    FROM read_parquet({files}, filename = true) p JOIN files f ON p.filename = f.file
    WHERE p.name = {step} AND p.kind IN ('region (GPU)', 'region')
    GROUP BY ALL),
-- the GPU span of the step region when the rank has one, else its host region
pick AS (
    SELECT idx, CASE WHEN bool_or(kind = 'region (GPU)') THEN 'region (GPU)' ELSE 'region' END AS kind
    FROM spans GROUP BY idx)
SELECT idx, row_number() OVER (PARTITION BY idx ORDER BY lo, hi) - 1 AS step, lo, hi
FROM spans JOIN pick USING (idx, kind)
"""

# per file: what rank_input.read_parquet checks of the scanned columns, and the devices seen
PARQUET_CHECKS = """
SELECT f.idx,
       count(*) FILTER (WHERE p.kind IS NULL OR p.name IS NULL OR p.start_ns IS NULL
                        OR p.end_ns IS NULL OR p.device IS NULL OR p.record IS NULL
                        OR p.collective IS NULL OR p.nccl_algorithm IS NULL
                        OR p.nccl_protocol IS NULL OR p.collective_bytes IS NULL) AS nulls,
       count(*) FILTER (WHERE p.kind NOT IN {kinds}) AS unknown_kinds,
       coalesce(max(greatest(abs(p.start_ns), abs(p.end_ns))), 0) AS max_clock,
       coalesce(max(greatest(abs(p.start_ns - f.zero), abs(p.end_ns - f.zero))), 0) AS max_time,
       coalesce(min(p.device), -1) AS min_device, coalesce(max(p.device), -1) AS max_device,
       list(DISTINCT p.device ORDER BY p.device) FILTER (WHERE p.kind <> 'region'
                                                         AND p.device <> -1) AS gpus
FROM read_parquet({files}, filename = true) p JOIN files f ON p.filename = f.file
GROUP BY f.idx
"""

# per step of every rank: STEP_FIELDS (analyses.py). A sweep over each rank's kernel starts
# (+1) and ends (-1), with the step windows' bounds among them as points that add nothing:
# one sort gives, at every point, how many kernels of each class run (all, compute, NCCL) and
# the length to the next point; a second running sum gives the covered length before each
# point, before(t); a window's covered length is before(hi) - before(lo). Ties in t need no
# order in the first pass (only the last row of a tie has a length); in the second, the row
# with a length comes last, so that every row at t sums only what lies before t.
STEPS = """
WITH pts AS (
    SELECT idx, unnest([s, e]) AS t, unnest([1, -1]) AS d0,
           unnest(CASE WHEN op = '' THEN [1, -1] ELSE [0, 0] END) AS d1,
           unnest(CASE WHEN op = '' THEN [0, 0] ELSE [1, -1] END) AS d2,
           NULL AS step, 0 AS q
    FROM kernels WHERE e > s
    UNION ALL SELECT idx, lo, 0, 0, 0, step, -1 FROM windows
    UNION ALL SELECT idx, greatest(hi, lo), 0, 0, 0, step, 1 FROM windows),
lvl AS (
    SELECT idx, t, step, q, lead(t, 1, t) OVER w - t AS len,
           sum(d0) OVER w > 0 AS o0, sum(d1) OVER w > 0 AS o1, sum(d2) OVER w > 0 AS o2
    FROM pts WINDOW w AS (PARTITION BY idx ORDER BY t ROWS UNBOUNDED PRECEDING)),
cum AS (
    SELECT idx, step, q,
           sum(CASE WHEN o0 THEN len ELSE 0 END) OVER w - CASE WHEN o0 THEN len ELSE 0 END AS c0,
           sum(CASE WHEN o1 THEN len ELSE 0 END) OVER w - CASE WHEN o1 THEN len ELSE 0 END AS c1,
           sum(CASE WHEN o2 THEN len ELSE 0 END) OVER w - CASE WHEN o2 THEN len ELSE 0 END AS c2
    FROM lvl WINDOW w AS (PARTITION BY idx ORDER BY t, len ROWS UNBOUNDED PRECEDING)),
per AS (  -- q: -1 at a window's lo, +1 at its hi
    SELECT idx, step, sum(q * c0) AS busy, sum(q * c1) AS compute, sum(q * c2) AS comm
    FROM cum WHERE q <> 0 GROUP BY idx, step)
SELECT w.idx, w.step, w.lo, w.hi, greatest(w.hi - w.lo, 0) AS step_ns,
       CAST(p.compute AS BIGINT) AS compute_ns, CAST(p.comm AS BIGINT) AS collective_ns,
       CAST(p.compute + p.comm - p.busy AS BIGINT) AS overlap_ns,
       CAST(p.busy - p.compute AS BIGINT) AS exposed_ns,
       CAST(greatest(w.hi - w.lo, 0) - p.busy AS BIGINT) AS idle_ns
FROM windows w JOIN per p USING (idx, step)
ORDER BY w.idx, w.step
"""

# every NCCL kernel of every rank, by start, with the GPU's idle time right before it (since
# the end of every kernel that started earlier; the rank's first kernel: INT64_MAX, "since ever")
NCCL = f"""
WITH prior AS (
    SELECT idx, row, s, e, op, alg, proto, nbytes,
           max(e) OVER (PARTITION BY idx ORDER BY s, row
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS latest
    FROM kernels)
SELECT idx, s, e, op, alg, proto, nbytes, row,
       CASE WHEN latest IS NULL THEN {INT64_MAX} ELSE greatest(s - latest, 0) END AS idle_before
FROM prior WHERE op <> ''
ORDER BY idx, s, row
"""

# the held-back table (analyses.held_back defines it) from arrivals(step, pos, rank, s, idle,
# own, lo, compute, who) and labels(step, collective): per step with a first collective, every rank's aligned
# start s there, its GPU's idle time before it (idle, unclipped), its own-clock start own, its
# step's start lo and compute, the position `who` of the last to arrive. The late group is
# late_group()'s, in integers: 4 d > 2 median(d) + 2 max(d), d = s - min(s).
HELD_BACK = """
WITH a AS (
    SELECT *, greatest(least(idle, own - lo), 0) AS idle_c,
           s - min(s) OVER (PARTITION BY step) AS d,
           row_number() OVER (PARTITION BY step ORDER BY s) - 1 AS k,
           count(*) OVER (PARTITION BY step) AS n
    FROM arrivals),
m AS (
    SELECT step, sum(d) FILTER (WHERE k = (n - 1) // 2) + sum(d) FILTER (WHERE k = n // 2) AS twice,
           max(d) AS latest
    FROM a GROUP BY step),
g AS (SELECT a.*, 4 * a.d > m.twice + 2 * m.latest AS late FROM a JOIN m USING (step)),
t AS (
    SELECT step,
           max(s) FILTER (WHERE pos = who) - max(s) FILTER (WHERE NOT late) AS held,
           max(rank) FILTER (WHERE pos = who) AS rank,
           list(rank ORDER BY rank) FILTER (WHERE late) AS ranks,
           max(idle_c) FILTER (WHERE pos = who) AS idle_before_ns,
           CAST(round_even(median(idle_c) FILTER (WHERE NOT late), 0) AS BIGINT) AS others_idle,
           max(compute) FILTER (WHERE pos = who) AS compute_ns,
           CAST(round_even(median(compute) FILTER (WHERE NOT late), 0) AS BIGINT) AS others_compute
    FROM g GROUP BY step HAVING bool_or(late))
SELECT step, rank, ranks, l.collective, held, idle_before_ns, others_idle, compute_ns,
       others_compute,
       CASE WHEN idle_before_ns - others_idle > compute_ns - others_compute THEN 'late launch'
            WHEN compute_ns - others_compute > idle_before_ns - others_idle THEN 'compute'
            ELSE 'unclear' END AS reason
FROM t JOIN labels l USING (step) WHERE held > 0
ORDER BY held DESC, step
"""
