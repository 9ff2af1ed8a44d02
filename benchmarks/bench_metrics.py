"""Hardware counters: accuracy against Nsight Compute, and what collecting them costs.

    python benchmarks/bench_metrics.py --output bench_metrics.json [--skip-ncu]

1. Offline: CUPTI host init, validation and config-image time for the named sets (no GPU work).
2. SOL values of gpuprofile.metrics() (L2 flushed, its default) against `ncu --clock-control none
   --cache-control all --print-units base --metrics <same names>` on the same calibration
   kernel, each in its own process (bench_ncu_agreement.py compares kernels of every kind).
3. Cost: metrics(per="call") with the SOL set, a region with a one-pass set (user range), a
   region with the SOL set (kernel replay), and the per-kernel cost of kernel replay; each
   against passes x the plain run time. One-time setup is reported separately.
4. Cost of PC sampling and PM sampling on 20 copies.

Prints a table last and writes JSON. Needs a GPU; ncu is looked up on PATH, then in
CUDA_HOME/bin and /usr/local/cuda/bin.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import gpuprofile as gp
from gpuprofile import _C
from gpuprofile.counters import catalog as _catalog
from gpuprofile.counters.metric_sets import DRAM_READ, DRAM_SOL, DURATION, MEMORY_SOL, SETS, SM_SOL
from gpuprofile.counters.ncu import find_ncu, parse_ncu_csv

SOL_NAMES = [DURATION, SM_SOL, MEMORY_SOL, DRAM_SOL]
KERNELS = {"copy": "gp_copy_kernel", "ffma": "gp_ffma_kernel", "chase": "gp_chase_kernel",
           "mma": "gp_mma_kernel"}


def median_ms(workload, repeats=20) -> float:
    return statistics.median(workload.time(repeats=repeats))


# ---- 1. offline ---------------------------------------------------------------------------------


def bench_offline() -> dict:
    t = time.perf_counter()
    _C.MetricsHost("GH100").close()
    init_s = time.perf_counter() - t
    host = _catalog.host("GH100")
    names = list(SETS["sol"].metrics)
    samples = []
    for _ in range(50):
        t = time.perf_counter()
        _catalog.validate(names, "GH100")
        samples.append(time.perf_counter() - t)
    configs = {}
    for set_name, s in SETS.items():
        t = time.perf_counter()
        passes = _catalog.configure(s.metrics, "GH100")[1]
        configs[set_name] = {"passes": passes, "config_s": time.perf_counter() - t}
    assert host is _catalog.host("GH100")
    return {"host_init_s": init_s, "validate_sol_median_s": statistics.median(samples),
            "validate_sol_max_s": max(samples), "sets": configs}


# ---- 2. against Nsight Compute -------------------------------------------------------------------


def ncu_target(kind: str) -> None:
    """Run inside ncu: one warm-up and one measured launch of the workload."""
    w = _C.Workload(kind)
    w.launch()
    w.launch()
    _C._synchronize()


def run_ncu(ncu: str, kind: str) -> dict:
    cmd = [ncu, "--clock-control", "none", "--cache-control", "all", "--print-units", "base", "--csv", "--metrics",
           ",".join(SOL_NAMES), "--kernel-name", f"regex:{KERNELS[kind]}", "--launch-skip", "1",
           "--launch-count", "1", sys.executable, os.path.abspath(__file__), "--ncu-target", kind]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if out.returncode != 0:
        raise RuntimeError(f"ncu failed ({out.returncode}): {out.stderr[-2000:]}")
    try:
        return parse_ncu_csv(out.stdout)[0]["values"]
    except (ValueError, IndexError) as e:
        raise RuntimeError(f"no kernel in ncu's output ({e}): {out.stdout[-2000:]}") from e


def agrees(ours: float, theirs: float) -> bool:
    """Within 3 % relative, or 0.5 percentage points for small percentages."""
    return abs(ours - theirs) <= max(0.03 * abs(theirs), 0.5 if theirs < 5 else 0.0)


def bench_vs_ncu(skip: bool) -> dict:
    out = {}
    ncu = None if skip else find_ncu()
    for kind in KERNELS:
        w = _C.Workload(kind)
        try:
            r = gp.metrics(w.launch, metrics=SOL_NAMES)
        finally:
            w.close()
        k = next(k for k in r.kernels if KERNELS[kind] in k.name)
        entry = {"ours": {m: k[m] for m in SOL_NAMES}, "passes": r.passes}
        if ncu is not None:
            try:
                theirs = run_ncu(ncu, kind)
                entry["ncu"] = {m: theirs.get(m, float("nan")) for m in SOL_NAMES}
                entry["agree"] = {m: agrees(entry["ours"][m], entry["ncu"][m]) for m in SOL_NAMES}
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                entry["ncu_error"] = str(e)
        out[kind] = entry
    return out


# ---- 3. cost ---------------------------------------------------------------------------------------


def bench_cost() -> dict:
    ffma, copy = _C.Workload("ffma"), _C.Workload("copy")
    try:
        out = {}
        fn_ms = median_ms(ffma)
        r = gp.metrics(ffma.launch, metrics="sol", per="call")
        out["metrics_call_sol"] = {"fn_ms": fn_ms, "passes": r.passes, "calls": r.calls,
                                   "cost_s": r.cost_s, "setup_s": r.setup_s,
                                   "bound_s": r.calls * fn_ms / 1e3 + 0.010}
        r = gp.metrics(ffma.launch, metrics="sol", per="call")
        out["metrics_call_sol_again"] = {"cost_s": r.cost_s, "setup_s": r.setup_s,
                                         "bound_s": r.calls * fn_ms / 1e3 + 0.010}
        copy_ms = median_ms(copy)
        costs = []
        for _ in range(5):
            with gp.region("bench-one-pass", metrics=[DRAM_READ]):
                copy.launch()
            costs.append(gp.region_metrics("bench-one-pass").cost_s)
        out["region_one_pass"] = {"region_ms": copy_ms, "passes": 1, "cost_s_median": statistics.median(costs),
                                  "cost_s_first": costs[0], "bound_s": copy_ms / 1e3 + 0.010}
        costs = []
        for _ in range(3):
            with gp.region("bench-sol", metrics="sol"):
                ffma.launch()
            res = gp.region_metrics("bench-sol")
            costs.append(res.cost_s)
        out["region_sol_kernel_replay"] = {
            "region_ms": fn_ms, "passes": res.passes, "cost_s_median": statistics.median(costs),
            "bound_s": res.passes * fn_ms / 1e3 + 0.010}
        n = 10
        t = time.perf_counter()
        for _ in range(n):
            gp.kernels.spin(10_000)
        _C._synchronize()
        plain_s = time.perf_counter() - t
        with gp.region("bench-replay", metrics="sol"):
            for _ in range(n):
                gp.kernels.spin(10_000)
        res = gp.region_metrics("bench-replay")
        out["kernel_replay_per_kernel"] = {"kernels": len(res.kernels), "passes": res.passes,
                                           "cost_s": res.cost_s,
                                           "per_kernel_s": (res.cost_s - plain_s) / n}
        return out
    finally:
        ffma.close()
        copy.close()


def bench_sampling() -> dict:
    copy = _C.Workload("copy")
    try:
        def twenty():
            for _ in range(20):
                copy.launch()
            _C._synchronize()

        twenty()
        t = time.perf_counter()
        twenty()
        plain = time.perf_counter() - t
        t = time.perf_counter()
        report = gp.stalls(twenty)
        pc = time.perf_counter() - t
        t = time.perf_counter()
        s = gp.sample(twenty, interval_us=20)
        pm = time.perf_counter() - t
        kernel = report.kernels[0] if report.kernels else None
        return {"plain_s": plain, "stalls_s": pc, "sample_s": pm, "pm_samples": len(s),
                "top_stall": kernel.top(1) if kernel else None}
    finally:
        copy.close()


def bench_sampling_fresh() -> dict:
    """bench_sampling in a fresh process: PC sampling cannot attribute kernels whose counters
    this process already collected (see gpuprofile.stalls)."""
    out = subprocess.run([sys.executable, __file__, "--sampling-only"], capture_output=True,
                         text=True, timeout=300)
    if out.returncode != 0:
        return {"error": out.stderr[-2000:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- report ---------------------------------------------------------------------------------------


def fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def table(results: dict) -> str:
    lines = ["", "== SOL: gpuprofile vs ncu --clock-control none =="]
    lines.append(f"{'kernel':6} {'metric':62} {'ours':>12} {'ncu':>12} {'ok':>4}")
    for kind, e in results["vs_ncu"].items():
        for m in SOL_NAMES:
            theirs = e.get("ncu", {}).get(m, float("nan"))
            ok = e.get("agree", {}).get(m, "-")
            lines.append(f"{kind:6} {m:62} {fmt(e['ours'][m]):>12} {fmt(theirs):>12} {fmt(ok):>4}")
        if "ncu_error" in e:
            lines.append(f"{kind:6} ncu error: {e['ncu_error'][:200]}")
    lines.append("")
    lines.append("== cost (s) ==")
    for name, e in results["cost"].items():
        lines.append(f"{name:28} " + "  ".join(f"{k}={fmt(v)}" for k, v in e.items()))
    lines.append("")
    lines.append("== offline (CPU) ==")
    off = results["offline"]
    lines.append(f"host init {fmt(off['host_init_s'])} s, validate SOL median "
                 f"{fmt(off['validate_sol_median_s'] * 1e3)} ms (max {fmt(off['validate_sol_max_s'] * 1e3)} ms)")
    lines.append("passes: " + ", ".join(f"{k}={v['passes']}" for k, v in off["sets"].items()))
    lines.append("")
    lines.append("== sampling (s, 20 x 1 GiB copy) ==")
    lines.append("  ".join(f"{k}={fmt(v)}" for k, v in results["sampling"].items()))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", default="bench_metrics.json")
    ap.add_argument("--skip-ncu", action="store_true")
    ap.add_argument("--ncu-target", choices=sorted(KERNELS), help=argparse.SUPPRESS)
    ap.add_argument("--sampling-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.ncu_target:
        ncu_target(args.ncu_target)
        return 0
    if args.sampling_only:
        print(json.dumps(bench_sampling(), default=str))
        return 0
    info = gp.device_info(_C._current_device())
    results = {"device": info.name, "uuid": info.uuid}
    sections = [("offline", bench_offline),
                ("cost", bench_cost),  # before the others: includes this process's one-time setup
                ("vs_ncu", lambda: bench_vs_ncu(args.skip_ncu)),
                ("sampling", bench_sampling_fresh)]
    for name, run in sections:
        t = time.perf_counter()
        results[name] = run()
        print(f"[bench_metrics] {name}: {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
        with open(args.output, "w") as f:  # after every section, so a timeout keeps what ran
            json.dump(results, f, indent=1, default=str)
    print(table(results))
    print(f"\nwrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
