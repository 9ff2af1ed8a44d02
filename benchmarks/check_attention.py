"""One command for the attention kernels on a GPU machine: correctness, sanitizers, performance.

    python benchmarks/check_attention.py --output attention_check.json

1. the GPU tests of tests/kernels/test_attention_gpu.py (float64 reference, derived tolerance, ragged
   sequences 1..4097, batch/head variety, causal, NaN/Inf propagation, poisoned outputs,
   strided and misaligned inputs, torch/CuPy interop where installed);
2. compute-sanitizer memcheck, racecheck and synccheck on benchmarks/attention_smoke.py (every
   kernel on small shapes), when compute-sanitizer is on PATH or in $CUDA_HOME/bin;
3. the performance table at seq 4096, bf16, head_dim 64 and 128, causal and not, batch 4 and
   heads·head_dim = 2048 (the FlashAttention papers' shapes), ours (flash_tc, flash, naive, and
   flash_wgmma on Hopper) against torch SDPA's flash and cuDNN backends when torch is installed;
4. with --sweep FILE: benchmark_attention.py's sequence-length sweep (128..4096, bf16, head_dim
   64, non-causal) into FILE, and with --plots DIR its plots (visualize_results.py).
Prints each step's outcome and, last, the compact table; writes everything to the JSON file.
Exit status 0 only when every test, sanitizer run and validation of our kernels passed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

PERF_IMPLS = ["flash_tc", "flash", "naive", "sdpa", "sdpa_cudnn"]
SWEEP = ["--seq-lengths", "128,256,512,1024,2048,4096", "--impls", "naive,flash,flash_tc,sdpa,sdpa_cudnn",
         "--dtype", "bf16", "--head-dim", "64"]


def tail(text, lines=4):
    return "\n".join(text.strip().splitlines()[-lines:])


def run_tests():
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
           os.path.join(ROOT, "tests", "kernels", "test_attention_gpu.py")]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    print(proc.stdout[-4000:], proc.stderr[-2000:], sep="\n", flush=True)
    return {"step": "pytest -m gpu tests/kernels/test_attention_gpu.py", "ok": proc.returncode == 0,
            "summary": tail(proc.stdout, 1), "seconds": time.perf_counter() - t0}


def find_sanitizer():
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        path = os.path.join(home or "", "bin", "compute-sanitizer")
        if home and os.path.isfile(path):
            return path
    return None


def run_sanitizers(tools=("memcheck", "racecheck", "synccheck")):
    tool_path = find_sanitizer()
    if tool_path is None:
        return [{"step": "compute-sanitizer", "ok": None, "summary": "not found: skipped"}]
    results = []
    for tool in tools:
        cmd = [tool_path, "--tool", tool, "--error-exitcode", "97", sys.executable,
               os.path.join(HERE, "attention_smoke.py")]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        out = proc.stdout + proc.stderr
        print(f"--- compute-sanitizer {tool} (exit {proc.returncode})\n{tail(out, 12)}", flush=True)
        results.append({"step": f"compute-sanitizer --tool {tool}", "ok": proc.returncode == 0,
                        "summary": tail(out, 2), "seconds": time.perf_counter() - t0})
    return results


def run_perf(max_time, impls):
    import benchmark_attention as ba

    torch = ba.import_torch()
    rows = []
    for head_dim in (64, 128):
        for causal in (False, True):
            print(f"--- perf: bf16 seq 4096 head_dim {head_dim} {'causal' if causal else 'non-causal'}",
                  flush=True)
            rows += ba.run_all(impls, [4096], "bfloat16", head_dim, causal, 4, 2048 // head_dim,
                               max_time, torch)
    return rows, ba.environment(torch)


def run_sweep(output, plots, max_time):
    import benchmark_attention as ba
    import visualize_results as vr

    print("--- sweep: " + " ".join(SWEEP), flush=True)
    t0 = time.perf_counter()
    rc = ba.main([*SWEEP, "--max-time", str(max_time), "--output", output])
    if rc == 0 and plots:
        rc = vr.main(["--input", output, "--output-dir", plots])
    return {"step": f"seq-length sweep -> {output}" + (f", plots in {plots}" if plots else ""),
            "ok": rc == 0, "summary": f"exit status {rc}", "seconds": time.perf_counter() - t0}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output", default="attention_check.json")
    p.add_argument("--max-time", type=float, default=1.0, help="seconds per timed benchmark")
    p.add_argument("--sanitizers", default="memcheck,racecheck,synccheck",
                   help="comma list of compute-sanitizer tools to run on attention_smoke.py")
    p.add_argument("--skip-tests", action="store_true")
    p.add_argument("--skip-sanitizers", action="store_true")
    p.add_argument("--skip-perf", action="store_true")
    p.add_argument("--sweep", default=None, help="also run the seq-length sweep into this JSON file")
    p.add_argument("--plots", default=None, help="with --sweep: draw its plots into this folder")
    args = p.parse_args(argv)
    import gpuprofile

    if gpuprofile.device_count() == 0:
        print("check_attention.py needs a CUDA device", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    steps = [] if args.skip_tests else [run_tests()]
    tools = [t for t in args.sanitizers.split(",") if t]
    steps += [] if args.skip_sanitizers else run_sanitizers(tools)
    impls = PERF_IMPLS
    if gpuprofile.device_info().compute_capability == (9, 0):
        impls = ["flash_wgmma", *impls]
    rows, env = run_perf(args.max_time, impls) if not args.skip_perf else ([], {})
    if args.sweep:
        steps.append(run_sweep(args.sweep, args.plots, args.max_time))
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump({"steps": steps, "perf": rows, "environment": env,
                   "seconds": time.perf_counter() - t0}, f, indent=1)

    import benchmark_attention as ba

    print("\n=== attention check", f"({time.perf_counter() - t0:.0f} s, JSON: {args.output})")
    for s in steps:
        verdict = {True: "PASS", False: "FAIL", None: "SKIP"}[s["ok"]]
        print(f"{verdict:4}  {s['step']}: {s['summary'].splitlines()[-1] if s['summary'] else ''}")
    ours_ok = all(r.get("status") == "ok" for r in rows if r["impl"] in ba.OURS)
    if rows:
        print(f"{'PASS' if ours_ok else 'FAIL'}  validation of our kernels before timing")
        ba.print_table(rows, "bf16, seq 4096, batch 4, heads = 2048 // head_dim "
                             "(rows in order: head_dim 64 non-causal, 64 causal, 128 non-causal, 128 causal)")
    return 0 if ours_ok and all(s["ok"] is not False for s in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
