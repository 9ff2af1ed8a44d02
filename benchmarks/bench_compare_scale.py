"""`gpuprofile compare` at scale (issue 49): two saved runs of N results each, in the pytest
plugin's format (pytest --gpu-benchmark-save, without samples), compared phase by phase.

The files are made from one real result (gp.benchmark on the host clock, 3 rounds) renamed N
times, every 7th a little slower in the second file, so that the comparison has verdicts of every
kind ('same', 'slower', 'inconclusive'). The phases are those of `gpuprofile compare A B --json
OUT` (bench/cli.py compare_main), each timed with time.process_time:

  json      decoding both files (the floor no per-result work goes below)
  load      load_results(): JSON, then a BenchmarkResult for every result
  compare   compare_files(): the gate's check of every result, the matching, the verdicts
  table     str() of the comparison and the gate's lines, as printed
  write     the comparison's --json file

Usage:
  python benchmarks/bench_compare_scale.py [--results 200000] [--dir /tmp/compare_scale]
  /usr/bin/time -v gpuprofile compare DIR/base.json DIR/new.json --json DIR/out.json > /dev/null
The files are made once and reused while they hold --results results.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import time
from contextlib import redirect_stderr, redirect_stdout

import gpuprofile as gp


def template() -> dict:
    """One real result as the plugin saves it (no samples), its statistics set to fixed numbers
    (a 1 ms median measured in 3 rounds) so that the files are the same on every machine."""
    r = gp.benchmark(sum, [1, 2, 3], clock="host", warmup=0, min_time=0.002, max_time=0.01,
                     max_noise=0.5, name="t")
    fixed = dict(median_ms=1.0, mean_ms=1.002, stdev_ms=0.012, min_ms=0.97, max_ms=1.06,
                 p10_ms=0.985, p90_ms=1.018, iqr_ms=0.016, ci_low_ms=0.99, ci_high_ms=1.01,
                 rel_noise=0.01, first_call_ms=1.5, resolution_ms=1e-6, rounds=3,
                 round_medians_ms=[0.995, 1.0, 1.004], timestamp="2026-12-05T00:00:00+00:00")
    return {**r.to_dict(samples=False), **fixed}


SCALED = ("median_ms", "mean_ms", "stdev_ms", "min_ms", "max_ms", "p10_ms", "p90_ms", "iqr_ms",
          "ci_low_ms", "ci_high_ms", "first_call_ms")


def entries(n: int, slower: float) -> list:
    """n results: the template renamed and scaled (1 to 1.99 ms), every 7th `slower` times as long."""
    base = template()
    out = []
    for i in range(n):
        k = (1 + (i % 100) / 100) * (slower if i % 7 == 0 else 1.0)
        d = {**base, **{f: base[f] * k for f in SCALED},
             "round_medians_ms": [m * k for m in base["round_medians_ms"]]}
        name = f"tests/test_scale.py::test_case[{i}]"
        out.append({**d, "name": name, "test": name.split("[")[0], "group": None, "extra_info": {}})
    return out


def make(path: str, n: int, slower: float) -> None:
    from gpuprofile._files import write_json  # the plugin's writer: the same indented JSON

    if os.path.exists(path) and _count(path) == n:
        return
    write_json(path, {"gpuprofile_benchmark_file": 1, "results": entries(n, slower)})


def _count(path: str) -> int:
    """How many results a file made here holds (one `"name"` line each)."""
    with open(path, encoding="utf-8") as f:
        return sum(line.startswith('   "name": ') for line in f)


def phases(base: str, new: str, out: str) -> dict:
    from gpuprofile._cli_common import write_json
    from gpuprofile.bench.cli import _gate_exit
    from gpuprofile.bench.files import compare_files, file_labels, load_results

    t = {}
    t0 = time.process_time()
    for p in (base, new):
        with open(p, encoding="utf-8") as f:
            json.loads(f.read())
    t["json"] = time.process_time() - t0
    t0 = time.process_time()
    loaded = [load_results(p) for p in (base, new)]
    t["load"] = time.process_time() - t0
    t0 = time.process_time()
    c = compare_files(list(zip(file_labels([base, new]), loaded, strict=True)))
    t["compare"] = time.process_time() - t0
    t0 = time.process_time()
    sink = io.StringIO()
    with redirect_stdout(sink), redirect_stderr(io.StringIO()):
        print(c)
        print(c.scope_note())
        _gate_exit(c, None, False)
    t["table"] = time.process_time() - t0
    t0 = time.process_time()
    write_json("bench_compare_scale", out, c.to_dict())
    t["write"] = time.process_time() - t0
    t["verdicts"] = c.counts()
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=int, default=200_000)
    ap.add_argument("--dir", default="/tmp/compare_scale")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    base, new = (os.path.join(args.dir, f) for f in ("base.json", "new.json"))
    make(base, args.results, 1.0)
    make(new, args.results, 1.3)
    size = os.path.getsize(base) / 1e6
    from gpuprofile.bench.files import collector_paused

    with collector_paused():  # as compare_main runs them
        t = phases(base, new, os.path.join(args.dir, "out.json"))
    print(f"{args.results} results a file ({size:.0f} MB each), CPU seconds by phase:")
    for k in ("json", "load", "compare", "table", "write"):
        print(f"  {k:8} {t[k]:7.2f}")
    print(f"  total    {sum(t[k] for k in ('load', 'compare', 'table', 'write')):7.2f} (json is part of load)")
    print(f"  verdicts {t['verdicts']}")
    print(f"end to end: /usr/bin/time -v gpuprofile compare {base} {new} --json "
          f"{os.path.join(args.dir, 'out.json')} > /dev/null")


if __name__ == "__main__":
    main()
