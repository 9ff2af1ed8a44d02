"""Host cost of a region's enter+exit, beside the floor and the peers, in one run.

Measured (ns per enter+exit pair, median of --repeats runs of --n iterations each):
  floor: two raw cudaEventRecord calls from C (timing events) -- the least a CUDA-event region costs
  floor+nvtx: the floor plus an NVTX push/pop from C
  gp.region: `with gp.region("x"): pass` (construction included), events + NVTX
  gp.region reused: `with r: pass` on one region object
  gp.region nvtx=False
  gp.region disabled: after gp.disable()
  resolve: reading the GPU times afterwards (gp.records()), per region
  torch.cuda.Event pair: e0.record(); e1.record()
  torch.cuda.nvtx push/pop
  torch.profiler.record_function (profiler off)
Python-loop overhead (an empty `for` body) is subtracted from the Python rows. Also: import time.

Usage: python benchmarks/bench_overhead.py [--n 20000] [--repeats 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time

import gpuprofile as gp


def per_iter_ns(body, n: int, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        body(n)
        runs.append((time.perf_counter_ns() - t0) / n)
    return statistics.median(runs)


def empty_loop(n):
    for _ in range(n):
        pass


def region_loop(n):
    region = gp.region
    for _ in range(n):
        with region("x"):
            pass


def region_nonvtx_loop(n):
    region = gp.region
    for _ in range(n):
        with region("x", nvtx=False):
            pass


def make_reused_loop():
    r = gp.region("x")

    def loop(n):
        for _ in range(n):
            with r:
                pass

    return loop


def import_time_ms(repeats: int = 7) -> float:
    code = "import time; t=time.perf_counter(); import gpuprofile; print((time.perf_counter()-t)*1e3)"
    times = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  check=True).stdout) for _ in range(repeats)]
    return statistics.median(times)


def measure(n: int, repeats: int) -> dict:
    rows = {}
    loop_ns = per_iter_ns(empty_loop, n, repeats)
    rows["python empty loop"] = loop_ns

    def python_row(name, body):
        rows[name] = per_iter_ns(body, n, repeats) - loop_ns

    if gp.device_count():
        gp._C._floor_event_pair(1000)
        rows["floor: 2x cudaEventRecord (C)"] = statistics.median(gp._C._floor_event_pair(n) for _ in range(repeats))
    rows["floor: NVTX push+pop (C)"] = statistics.median(gp._C._floor_nvtx_pair(n) for _ in range(repeats))

    # Grow the event pool once, so the timed runs measure the steady state.
    region_loop(n)
    gp.reset()

    def timed_regions(name, body):
        runs = []
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            body(n)
            runs.append((time.perf_counter_ns() - t0) / n - loop_ns)
            t1 = time.perf_counter_ns()
            gp.records()
            rows.setdefault(f"{name}: resolve per region", []).append((time.perf_counter_ns() - t1) / n)
            gp.reset()
        rows[name] = statistics.median(runs)
        rows[f"{name}: resolve per region"] = statistics.median(rows[f"{name}: resolve per region"])

    timed_regions("gp.region", region_loop)
    timed_regions("gp.region reused object", make_reused_loop())
    timed_regions("gp.region nvtx=False", region_nonvtx_loop)
    gp.disable()
    python_row("gp.region disabled", region_loop)
    python_row("gp.region disabled, reused object", make_reused_loop())
    gp.enable()
    gp.reset()

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def torch_events(k):
            for _ in range(k):
                e0.record()
                e1.record()

        def torch_nvtx(k):
            push, pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
            for _ in range(k):
                push("x")
                pop()

        def torch_record_function(k):
            rf = torch.profiler.record_function
            for _ in range(k):
                with rf("x"):
                    pass

        torch_events(100)
        python_row("torch.cuda.Event pair record", torch_events)
        python_row("torch.cuda.nvtx push+pop", torch_nvtx)
        python_row("torch.profiler.record_function (profiler off)", torch_record_function)
        torch.cuda.synchronize()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = measure(args.n, args.repeats)
    imp = import_time_ms()
    device = gp.device_info(0).name if gp.device_count() else "no GPU"
    floor = rows.get("floor: 2x cudaEventRecord (C)")
    print(f"\nregion overhead, ns per enter+exit (median of {args.repeats} x {args.n}); device: {device}; "
          f"python {platform.python_version()}")
    for name, ns in rows.items():
        extra = f"   (floor + {ns - floor:+.0f} ns)" if floor and name.startswith("gp.region") and \
            "disabled" not in name and "resolve" not in name else ""
        print(f"  {name:52s} {ns:9.1f}{extra}")
    print(f"  {'import gpuprofile (ms, median of 7 processes)':52s} {imp:9.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "n": args.n, "repeats": args.repeats, "ns": rows,
                       "import_ms": imp, "python": platform.python_version(),
                       "date": time.strftime("%Y-%m-%d")}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
