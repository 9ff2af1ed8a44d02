"""`gpuprofile merge` at scale (issue 28): time and peak memory of merging 2 to 64 synthetic
ranks of N events each, on the CPU (no GPU needed), and whether the merge found the rank planted
as the straggler of every step, and why.

    python benchmarks/bench_merge.py --ranks 2,4,8,16,32,64 --events 200000 --output merge.json
    python benchmarks/bench_merge.py --format json --ranks 2,4,8 --events 200000
    python benchmarks/bench_merge.py --ranks 2,8,64,256,1024 --engines default,duckdb,numpy,dask --trace-ranks 2

The ranks come from tests/distributed/ranks_synthetic.scale_profile: steps of compute kernels
then an AllReduce in a collective() region, each rank on its own CUPTI clock with its own
wall-clock error; in every step one rank holds the others back, by slower compute (even steps)
or a late launch of its AllReduce (odd steps). They are exported with the project's own writers
(Profile.export_parquet / export_chrome_trace) into --data (kept, reused when it matches).
Parquet ranks after the first are derived from a rank planted in no step
(ranks_synthetic.scale_table: the same table as the export, tested, in a fraction of the time).

--engines picks who computes the tables (tracing/engines.py); each point runs once per engine.
`default` names none: each analysis by the engine engines.DEFAULTS gives it.
--trace-ranks N writes only the first N ranks' events to the merged trace (0: every rank):
the tables still cover every rank, and a trace of a thousand ranks is one nobody opens.
Peak RSS: the merge's process; for dask also its largest worker process (RUSAGE_CHILDREN).

Each point merges in a child process of its own, so its peak RSS (VmHWM) is the merge's
alone: `import gpuprofile` (and pyarrow) plus the merge; the import alone is shown beside it. The output trace is written to --out-dir and removed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "tests", "distributed"), os.path.join(HERE, "..", "tests")]

from _children import run_child, write_json  # noqa: E402

PER_STEP_EXTRA = 5  # per step besides compute kernels: the AllReduce, 2 regions, 2 GPU spans


def _layout(events: int) -> tuple:
    """(steps, compute kernels per step) for about `events` rows per rank."""
    per_step = 195
    return max(1, round(events / (per_step + PER_STEP_EXTRA))), per_step


def _generate(folder: str, world: int, events: int, fmt: str) -> list:
    """The per-rank files (made once per folder and settings)."""
    import ranks_synthetic as R

    steps, per_step = _layout(events)
    stamp = os.path.join(folder, "settings.json")
    settings = {"world": world, "steps": steps, "per_step": per_step, "format": fmt}
    ext = "parquet" if fmt == "parquet" else "json.gz"
    paths = [os.path.join(folder, f"trace.rank{r}.{ext}") for r in range(world)]
    if os.path.exists(stamp) and all(map(os.path.exists, paths)):
        with open(stamp) as f:
            if json.load(f) == settings:
                return paths
    os.makedirs(folder, exist_ok=True)
    unplanted = sorted(set(range(world)) - {R.planted(k, world)[0] for k in range(steps)})
    if fmt == "parquet" and unplanted:
        _derive(folder, paths, unplanted[0], world, steps, per_step)
        write_json(stamp, settings)
        return paths
    for r in range(world):
        os.environ.update(RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r % 8))
        p = R.scale_profile(r, world, steps, per_step)
        base = os.path.join(folder, f"trace.{ext}")
        (p.export_parquet if fmt == "parquet" else p.export_chrome_trace)(base)
        print(f"  made rank {r} of {world}", end="\r", file=sys.stderr)
    write_json(stamp, settings)
    return paths


def _derive(folder: str, paths: list, template: int, world: int, steps: int, per_step: int) -> None:
    """Rank `template` exported by its Profile, every other rank derived from it."""
    import pyarrow.parquet as pq
    import ranks_synthetic as R

    from gpuprofile.tracing.columns import write_parquet

    os.environ.update(RANK=str(template), WORLD_SIZE=str(world), LOCAL_RANK=str(template % 8))
    R.scale_profile(template, world, steps, per_step).export_parquet(os.path.join(folder, "trace.parquet"))
    table = pq.read_table(paths[template])
    for r in range(world):
        if r != template:
            write_parquet(paths[r], R.scale_table(table, template, r, world, steps, per_step))
        print(f"  made rank {r} of {world}", end="\r", file=sys.stderr)


def _hwm_mb() -> float:
    """This process's peak resident memory (VmHWM), MB. Not ru_maxrss: on Linux that keeps the
    peak of the process before exec, i.e. of the parent that forked it."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def child(args) -> dict:
    import ranks_synthetic as R

    import gpuprofile as gp

    base_rss = _hwm_mb()
    paths, out = args.paths, args.out
    options = {"dask": {"workers": 2},
               "duckdb": {"memory_limit": args.memory_limit, "temp_directory": args.out_dir}}
    trace_ranks = range(args.trace_ranks) if args.trace_ranks else None
    t0 = time.perf_counter()
    engine = None if args.engine == "default" else args.engine
    result = gp.merge_traces(paths, out, engine=engine, trace_ranks=trace_ranks,
                             engine_options=options.get(args.engine))
    seconds = time.perf_counter() - t0
    peak = _hwm_mb()
    import resource

    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    size = os.path.getsize(out)
    os.remove(out)
    steps = len(result.straggler.last)
    # the straggler was planted among all the ranks generated: only steps whose planted rank
    # is among those merged have an answer to find
    planted = [R.planted(k, args.world) for k in range(steps)]
    eligible = [k for k, (who, _, _) in enumerate(planted) if who < len(paths)]
    found = {row["step"]: row for row in result.held_back.rows}
    right_rank = sum(1 for k in eligible if result.straggler.last[k] == planted[k][0])
    right_why = sum(1 for k in eligible if k in found and found[k]["rank"] == planted[k][0]
                    and found[k]["reason"] == planted[k][1])
    return {"ranks": len(paths), "engine": args.engine, "seconds": seconds, "peak_rss_mb": peak,
            "worker_peak_rss_mb": workers if args.engine == "dask" else None,
            "import_rss_mb": base_rss, "output_mb": size / 2**20,
            "events_in": None, "steps": steps, "collectives": len(result.collectives),
            "spread_max_ns": result.alignment["spread_max_ns"], "steps_with_answer": len(eligible),
            "straggler_right": right_rank, "reason_right": right_why}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", default="2,4,8,16,32,64")
    ap.add_argument("--events", type=int, default=200_000, help="rows per rank (about)")
    ap.add_argument("--format", choices=("parquet", "json"), default="parquet")
    ap.add_argument("--data", default=None, help="folder for the per-rank files (default: a "
                                                  "folder in the temp dir named after the settings)")
    ap.add_argument("--out-dir", default=tempfile.gettempdir())
    ap.add_argument("--gzip", action="store_true", help="write the merged trace gzipped")
    ap.add_argument("--output", default=None, help="write the results as JSON")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--engines", default="default", help="comma-separated: default, duckdb, "
                                                            "numpy, dask")
    ap.add_argument("--trace-ranks", type=int, default=0, help="write only the first N ranks' "
                                                                  "events to the trace (0: all)")
    ap.add_argument("--memory-limit", default="2GB", help="duckdb's memory_limit")
    ap.add_argument("--engine", help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--paths", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--world", type=int, default=None,
                    help="ranks of the job the data is made for (default: the largest of --ranks); "
                         "smaller points merge its first ranks")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    counts = [int(x) for x in args.ranks.split(",")]
    world = max(args.world or 0, *counts)
    data = args.data or os.path.join(tempfile.gettempdir(), f"gp-merge-{args.format}-{world}x{args.events}")
    t0 = time.perf_counter()
    paths = _generate(data, world, args.events, args.format)
    print(f"{world} ranks of ~{args.events} events in {data} ({time.perf_counter() - t0:.0f} s)",
          file=sys.stderr)
    out = os.path.join(args.out_dir, f"gp-merged-{os.getpid()}.json" + (".gz" if args.gzip else ""))
    rows = []
    print(f"{'ranks':>5} {'engine':>6} {'events':>10} {'seconds':>8} {'peak RSS MB':>11} {'import MB':>9} "
          f"{'output MB':>9} {'straggler':>9} {'why':>9}")
    for n in counts:
        for engine in args.engines.split(","):
            extra = ["--engine", engine, "--trace-ranks", str(args.trace_ranks),
                     "--memory-limit", args.memory_limit, "--out-dir", args.out_dir]
            r = run_child(__file__, ["--paths", *paths[:n], "--out", out, "--world", str(world), *extra],
                          args.timeout, error_lines=5)
            if "error" in r:
                print(f"{n:>5} {engine:>6} failed: {r['error']}")
                rows.append({"ranks": n, "engine": engine, **r})
                continue
            r["events_in"] = n * args.events
            rows.append(r)
            worker = f" (worker {r['worker_peak_rss_mb']:.0f})" if r["worker_peak_rss_mb"] else ""
            print(f"{n:>5} {engine:>6} {r['events_in']:>10} {r['seconds']:>8.2f} {r['peak_rss_mb']:>11.0f} "
                  f"{r['import_rss_mb']:>9.0f} {r['output_mb']:>9.0f} "
                  f"{r['straggler_right']:>4}/{r['steps_with_answer']:<4} "
                  f"{r['reason_right']:>4}/{r['steps_with_answer']:<4}{worker}", flush=True)
    if args.output:
        write_json(args.output, {"format": args.format, "events_per_rank": args.events,
                                 "trace_ranks": args.trace_ranks, "memory_limit": args.memory_limit,
                                 "gzip": args.gzip, "cpus": os.cpu_count(), "rows": rows})


if __name__ == "__main__":
    main()
