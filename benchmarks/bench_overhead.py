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
Baselines: `with threading.Lock()` (the with-statement on a C object) and time.perf_counter_ns().
Python-loop overhead (an empty `for` body) is subtracted from the Python rows. Variants are
interleaved round by round. Also: import time.

Usage: python benchmarks/bench_overhead.py [--n 20000] [--repeats 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import threading
import time

import gpuprofile as gp
from gpuprofile.bench.ab import rotation  # A/B's rotated order (bench/ab.py)


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


def lock_loop(n):
    lock = threading.Lock()
    for _ in range(n):
        with lock:
            pass


def clock_loop(n):
    clock = time.perf_counter_ns
    for _ in range(n):
        clock()


def torch_variants():
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
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
    return [("torch.cuda.Event pair record", torch_events, "python"),
            ("torch.cuda.nvtx push+pop", torch_nvtx, "python"),
            ("torch.profiler.record_function (profiler off)", torch_record_function, "python")]


def measure(n: int, repeats: int) -> dict:
    """Every variant once per round, rounds repeated: drift in the machine hits all rows alike."""
    variants = [("python empty loop", empty_loop, "python"),
                ("baseline: with threading.Lock()", lock_loop, "python"),
                ("baseline: time.perf_counter_ns()", clock_loop, "python")]
    if gp.device_count():
        variants.append(("floor: 2x cudaEventRecord (C)", gp._C._testing.floor_event_pair, "c"))
    variants.append(("floor: NVTX push+pop (C)", gp._C._testing.floor_nvtx_pair, "c"))
    variants += [("gp.region", region_loop, "region"),
                 ("gp.region reused object", make_reused_loop(), "region"),
                 ("gp.region nvtx=False", region_nonvtx_loop, "region"),
                 ("gp.region disabled", region_loop, "disabled"),
                 ("gp.region disabled, reused object", make_reused_loop(), "disabled")]
    variants += torch_variants()

    region_loop(n)  # grow the event pool once: the rounds measure the steady state
    gp.records()
    gp.reset()
    samples: dict[str, list] = {}
    for r in range(repeats):
        for name, body, kind in rotation(variants, r):  # no variant always first or last
            if kind == "disabled":
                gp.disable()
            t0 = time.perf_counter_ns()
            value = body(n)
            elapsed = (time.perf_counter_ns() - t0) / n
            gp.enable()
            samples.setdefault(name, []).append(value if kind == "c" else elapsed)
            if kind == "region":
                t1 = time.perf_counter_ns()
                gp.records()
                samples.setdefault(f"{name}: resolve per region", []).append((time.perf_counter_ns() - t1) / n)
                gp.reset()
    rows = {name: statistics.median(v) for name, v in samples.items()}
    loop_ns = rows["python empty loop"]
    python_rows = {name for name, _, kind in variants if kind != "c"} - {"python empty loop"}
    return {name: (ns - loop_ns if name in python_rows else ns) for name, ns in rows.items()}


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
