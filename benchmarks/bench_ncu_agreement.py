"""gpuprofile.metrics() against Nsight Compute on kernels of different kinds (issue 47).

    python benchmarks/bench_ncu_agreement.py --output ncu_agreement.json
        [--case gemm --case attention ...] [--cache-control all --cache-control none]

For each case and cache_control, in this process: gpuprofile.metrics(fn, metrics=AGREEMENT_METRICS,
cache_control=...) (the SOL set and the DRAM/L2 byte counters) and gpuprofile.benchmark(fn) for
the run-to-run noise of the time; in a child process under ncu, the same fn once inside an NVTX
range "measure" after a warm-up, collected with
`ncu --clock-control none --cache-control {all|none} --replay-mode {kernel|application} --metrics
... --csv --print-units base --nvtx --nvtx-include measure/` (gpuprofile.counters.ncu.ncu_command).
Kernels are compared in launch order: every metric within 3 % (a percentage below 5 within 0.5
points), the duration within max(3 %, 3 x the benchmark's relative noise).

With cache_control="all" both flush L2 before each kernel: the numbers must agree. With "none"
both leave caches as the program left them and rerun the whole program per pass (ncu's
application replay): memory counters then depend on what ran before in each tool's run, and the
table shows by how much they differ.

Cases (CASES): a bf16 GEMM, an elementwise add and a row reduction (torch), gpuprofile's own
attention kernel (gpuprofile.kernels, no torch needed), a small torch op sequence (linear, gelu,
linear, softmax), and the framework-free copy workload. A case whose framework is missing is
reported as skipped. Needs a GPU and ncu (PATH, CUDA_HOME/bin or /usr/local/cuda/bin).
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys

from _children import write_json

import gpuprofile as gp
from gpuprofile.counters.ncu import (
    AGREEMENT_METRICS,
    TOLERANCE,
    compare,
    find_ncu,
    ncu_command,
    parse_ncu_csv,
)
from gpuprofile.counters.result import CACHE_CONTROL

NVTX_RANGE = "measure"


def _torch():
    import torch

    torch.manual_seed(0)
    return torch


def gemm():
    torch = _torch()
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    return lambda: torch.matmul(a, b)


def elementwise():
    torch = _torch()
    x = torch.randn(1 << 26, device="cuda")
    y = torch.randn(1 << 26, device="cuda")
    return lambda: torch.add(x, y)


def reduction():
    torch = _torch()
    x = torch.randn(8192, 8192, device="cuda")
    return lambda: x.sum(dim=1)


def op_sequence():
    torch = _torch()
    x = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)
    w1 = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)
    w2 = torch.randn(1024, 4096, device="cuda", dtype=torch.bfloat16)

    def step():
        h = torch.nn.functional.gelu(torch.nn.functional.linear(x, w1))
        return torch.softmax(torch.nn.functional.linear(h, w2), dim=-1)

    return step


def attention():
    import numpy as np

    rng = np.random.default_rng(0)
    q, k, v = (gp.kernels.to_device(rng.standard_normal((4, 16, 2048, 128), dtype=np.float32),
                                    "bfloat16") for _ in range(3))
    out = gp.kernels.empty((4, 16, 2048, 128), "bfloat16")
    return lambda: gp.kernels.attention(q, k, v, impl="auto", out=out)


def copy():
    from gpuprofile import _C

    w = _C.Workload("copy", bytes=1 << 30)
    return w.launch


# name -> (what it is, the framework it needs, the builder of fn)
CASES = {
    "gemm": ("bf16 GEMM 4096^3 (cuBLAS)", "torch", gemm),
    "elementwise": ("fp32 add of 2^26 elements", "torch", elementwise),
    "reduction": ("fp32 row sums of 8192x8192", "torch", reduction),
    "attention": ("gpuprofile attention, bf16 4x16x2048x128", "numpy", attention),
    "sequence": ("torch linear, gelu, linear, softmax", "torch", op_sequence),
    "copy": ("gpuprofile copy workload, 1 GiB", None, copy),
}

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", action="append", choices=sorted(CASES), dest="cases",
                   help="a case to run (repeatable; default: all)")
    p.add_argument("--cache-control", action="append", choices=CACHE_CONTROL, dest="caches",
                   help="a cache_control to compare (repeatable; default: all and none)")
    p.add_argument("--output", default=None, metavar="PATH", help="write the rows as JSON")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.cases = args.cases or list(CASES)
    args.caches = args.caches or list(CACHE_CONTROL)
    return args


def child(case: str) -> None:
    """Under ncu: one warm-up run, then one run inside the NVTX range ncu profiles."""
    from gpuprofile import _C

    fn = CASES[case][2]()
    fn()
    _C._synchronize()
    gp.nvtx.push(NVTX_RANGE)
    fn()
    gp.nvtx.pop()
    _C._synchronize()


def run_ncu(ncu: str, case: str, cache_control: str) -> list:
    cmd = ncu_command(AGREEMENT_METRICS, cache_control, [sys.executable, __file__, "--child", case],
                      nvtx_range=NVTX_RANGE)
    cmd[0] = ncu
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"ncu exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return parse_ncu_csv(proc.stdout)


def measure(case: str, cache_control: str, ncu: str) -> dict:
    """One case in one cache state: the comparison rows, or why there are none."""
    need = CASES[case][1]
    if need is not None:
        try:
            __import__(need)
        except ImportError:
            return {"case": case, "cache_control": cache_control, "skipped": f"needs {need}"}
    fn = CASES[case][2]()
    ours = gp.metrics(fn, metrics=list(AGREEMENT_METRICS), cache_control=cache_control)
    noise = gp.benchmark(fn).rel_noise
    time_tolerance = max(TOLERANCE, 3 * noise) if math.isfinite(noise) else TOLERANCE
    theirs = run_ncu(ncu, case, cache_control)
    rows = compare(ours.kernels, theirs, time_tolerance=time_tolerance)
    return {"case": case, "cache_control": cache_control, "kernels": len(ours.kernels),
            "time_tolerance": time_tolerance, "rows": rows, "ok": all(r["ok"] for r in rows),
            "state": ours.state()}


def summary_rows(results: list) -> list:
    """Per case, cache state and metric: the worst relative difference over the kernels."""
    out = []
    for res in results:
        if "rows" not in res:
            out.append([res["case"], res["cache_control"], "-", "-", res.get("skipped") or res.get("error")])
            continue
        for m in AGREEMENT_METRICS:
            rows = [r for r in res["rows"] if r["metric"] == m]
            worst = max(rows, key=lambda r: abs(r["rel_diff"]) if math.isfinite(r["rel_diff"]) else math.inf)
            out.append([res["case"], res["cache_control"], m, f"{worst['rel_diff'] * 100:+.2f} %",
                        "ok" if all(r["ok"] for r in rows) else "DIFFERS"])
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child is not None:
        child(args.child)
        return 0
    ncu = find_ncu()
    if ncu is None:
        print("bench_ncu_agreement: ncu not found (PATH, CUDA_HOME/bin, /usr/local/cuda/bin)",
              file=sys.stderr)
        return 1
    results = []
    for case in args.cases:
        for cache_control in args.caches:
            try:
                results.append(measure(case, cache_control, ncu))
            except (RuntimeError, ValueError, subprocess.TimeoutExpired, gp.GpuProfileError) as e:
                results.append({"case": case, "cache_control": cache_control, "error": str(e)})
    from gpuprofile._format import text_table

    print(text_table(["case", "cache", "metric", "worst diff", "verdict"], summary_rows(results),
                     title=f"gpuprofile.metrics vs ncu ({gp.device_info().name})"))
    if args.output:
        write_json(args.output, {"device": gp.device_info().name, "results": results})
    agreed = all(r.get("ok", True) for r in results if r["cache_control"] == "all")
    return 0 if agreed and not any("error" in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
