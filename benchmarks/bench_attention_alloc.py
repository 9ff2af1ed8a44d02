"""Attention without `out=` against the same call with a preallocated `out=` (issue 10, part 1):
what the result allocation costs a loop of calls. Since the results come from gpuprofile's
stream-ordered pool, target: within 3 % at N=4096.

Both variants run interleaved (ABAB...) in one process on torch bf16 inputs, timed with CUDA
events around `--calls` back-to-back calls on the legacy default stream; the ratio of medians is
reported beside torch SDPA (flash backend) on the same inputs.

    python benchmarks/bench_attention_alloc.py --output docs/results/attention_alloc.json
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys

import gpuprofile as gp
from gpuprofile import _C, kernels
from gpuprofile.bench.ab import interleave


def _time_ms(torch, fn, calls: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    stream = torch.cuda.default_stream()
    with torch.cuda.stream(stream):
        start.record()
        for _ in range(calls):
            fn()
        end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def run(shape, causal: bool, calls: int, rounds: int) -> dict:
    import torch
    import torch.nn.functional as F

    b, h, n, d = shape
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=g)
               for _ in range(3))
    out = torch.empty_like(q)
    variants = {
        "no_out": lambda: kernels.attention(q, k, v, impl="auto", causal=causal),
        "out": lambda: kernels.attention(q, k, v, out=out, impl="auto", causal=causal),
    }

    def sdpa():
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    variants["sdpa_flash"] = sdpa
    for fn in variants.values():  # warm-up: kernels loaded, the pool grown
        _time_ms(torch, fn, 3)
    times = interleave({name: functools.partial(_time_ms, torch, fn, calls)
                        for name, fn in variants.items()}, rounds)
    flops = 4 * b * h * n * n * d * (0.5 if causal else 1.0)
    med = {name: statistics.median(t) for name, t in times.items()}
    return {
        "shape": list(shape), "causal": causal, "dtype": "bfloat16",
        "impl": _C._testing.attention_auto_impl("bfloat16", d, True),
        "ms": med, "tflops": {name: flops / (ms * 1e-3) / 1e12 for name, ms in med.items()},
        "no_out_over_out": med["out"] / med["no_out"],
        "spread_ms": {name: [min(t), max(t)] for name, t in times.items()},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq-lengths", default="4096")
    ap.add_argument("--head-dims", default="64,128")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--calls", type=int, default=20, help="back-to-back calls per timing")
    ap.add_argument("--rounds", type=int, default=15, help="timings per variant, interleaved")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--output", default=None)
    args = ap.parse_args(argv)
    if gp.device_count() == 0:
        print("bench_attention_alloc: no CUDA device; nothing measured", file=sys.stderr)
        return 0
    rows = []
    for n in map(int, args.seq_lengths.split(",")):
        for d in map(int, args.head_dims.split(",")):
            r = run((args.batch, args.heads, n, d), args.causal, args.calls, args.rounds)
            rows.append(r)
            t = r["tflops"]
            print(f"N={n:6d} D={d:4d}  no out= {t['no_out']:6.1f}  out= {t['out']:6.1f}  "
                  f"SDPA flash {t['sdpa_flash']:6.1f} TFLOP/s   no-out/out speed "
                  f"{r['no_out_over_out']:.3f}")
    result = {"device": gp.device_info(0).name, "command": " ".join(sys.argv), "rows": rows}
    if args.output:
        with open(args.output, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
