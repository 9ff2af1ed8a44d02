"""Ground truth for timing benchmarks: CUPTI kernel durations, read through torch.profiler.

Run as its own process (CUPTI allows one subscriber per process, so the process that benchmarks
must not hold it):

    python benchmarks/cupti_truth.py --spin-ns 5000,50000,1000000 --read-mib 16 --gemm 1024,4096 \
        --out truth.json

For each workload it launches `reps` calls under torch.profiler and takes each call's kernel time
(the sum of its kernels' CUPTI durations; launch gaps excluded) from the Chrome trace, which kineto
writes with nanosecond resolution. Cold truth flushes L2 before every call (a read of 2x the L2,
its kernel excluded from the call); hot truth runs the calls back to back. Prints and writes
{workload: {"cold"|"hot": {"median_us", "p10_us", "p90_us", "n"}}}.

gpuprofile's own CUPTI tracing will replace torch.profiler here once it lands.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile


def kernel_events(trace_path):
    with open(trace_path, encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    kernels = [e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel"]
    return sorted(kernels, key=lambda e: float(e["ts"]))


def per_call_us(kernels, reps, delimited):
    """Split the kernel sequence into `reps` equal chunks (one per call; the first kernel of each
    chunk is the L2 flush when `delimited`) and sum each chunk's fn kernels."""
    if not kernels or len(kernels) % reps:
        raise RuntimeError(f"expected a multiple of {reps} kernels in the trace, found {len(kernels)} "
                           "(CUPTI dropped records, or other GPU work ran meanwhile)")
    m = len(kernels) // reps
    first = 1 if delimited else 0
    if m <= first:
        raise RuntimeError("the workload launched no kernel")
    return [sum(float(e["dur"]) for e in kernels[i * m + first:(i + 1) * m]) for i in range(reps)]


def measure(fn, reps, flush=None, warmup=10):
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        if flush:
            flush()
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            if flush:
                flush()
            fn()
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        calls = per_call_us(kernel_events(path), reps, delimited=flush is not None)
    finally:
        os.remove(path)
    calls.sort()
    return {"median_us": statistics.median(calls), "p10_us": calls[len(calls) // 10],
            "p90_us": calls[(9 * len(calls)) // 10], "n": len(calls)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spin-ns", default="5000,50000,1000000")
    parser.add_argument("--read-mib", type=int, default=16)
    parser.add_argument("--gemm", default="1024,4096", help="square bf16 GEMM sizes ('' for none)")
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    import torch

    import gpuprofile as gp
    from gpuprofile import kernels

    l2 = gp.device_info(torch.cuda.current_device()).l2_cache_bytes
    flush_buffer = kernels.DeviceBuffer(2 * l2)

    def flush():
        kernels.read(flush_buffer)

    truth = {}
    for ns in [int(x) for x in args.spin_ns.split(",") if x]:
        r = measure(lambda ns=ns: kernels.spin(ns), args.reps)
        truth[f"spin_{ns}ns"] = {"cold": r, "hot": r}  # a spin does not touch memory
    if args.read_mib:
        buf = kernels.DeviceBuffer(args.read_mib << 20)
        truth[f"read_{args.read_mib}MiB"] = {"cold": measure(lambda: kernels.read(buf), args.reps, flush),
                                            "hot": measure(lambda: kernels.read(buf), args.reps)}
    for n in [int(x) for x in args.gemm.split(",") if x]:
        a, b, c = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        gemm = lambda a=a, b=b, c=c: torch.mm(a, b, out=c)  # noqa: E731
        reps = max(20, args.reps // 4)
        truth[f"gemm_{n}"] = {"cold": measure(gemm, reps, flush), "hot": measure(gemm, reps)}
    text = json.dumps(truth, indent=1)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
