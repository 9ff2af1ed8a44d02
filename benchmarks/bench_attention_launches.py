"""What each attention implementation launches, per shape: kernel names, grid, block, registers and
shared memory of flash_wgmma (the schedule chosen per shape) and of torch SDPA's cuDNN and
FlashAttention-2 backends, read from gpuprofile's own kernel trace (issue 27: what the peer does
where it is faster).

    python benchmarks/bench_attention_launches.py --output launches.json
    python benchmarks/bench_attention_launches.py --head-dims 128 --impls cudnn

One call of each implementation per grid case (bench_attention_grid.py's cases, --quick its
fourteen), after one untraced warm-up call, under one gpuprofile.profile(kernels only); blocks per
SM are the trace's theoretical occupancy (active_blocks_per_sm). Prints a table, writes JSON.
Needs a CUDA device and torch.
"""

from __future__ import annotations

import argparse
import sys
import time

from bench_attention_grid import (
    Case,
    backend,
    grid_cases,
    make_call,
    parse_head_dims,
    schedule_of,
    write_json,
)

IMPLS = ("gp", "cudnn", "fa2")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="only bench_attention_grid's --quick cases")
    p.add_argument("--impls", default=",".join(IMPLS),
                   help=f"comma-separated subset of {','.join(IMPLS)} (default: all)")
    p.add_argument("--head-dims", type=parse_head_dims, default=(64, 128),
                   help="comma-separated subset of 64,128 (default: both)")
    p.add_argument("--output", help="write the rows as JSON here")
    args = p.parse_args(argv)
    impls = tuple(s.strip() for s in args.impls.split(",") if s.strip())
    unknown = [s for s in impls if s not in IMPLS]
    if unknown or not impls:
        p.error(f"--impls: choose from {','.join(IMPLS)}, got {args.impls!r}")
    args.impls = impls
    return args


def launches_of(impl, case, causal):
    """[{name, grid, block, registers, smem, blocks_per_sm, us}] of one call of impl on case."""
    import torch

    import gpuprofile as gp

    call = make_call(impl, case, causal)
    with backend(impl):
        call()  # warm-up: lazy loading and the backend's plan, outside the trace
        torch.cuda.synchronize()
        with gp.profile(memcpy=False, memset=False, memory=False, stream_attribution=False) as p:
            call()
            torch.cuda.synchronize()
    out = []
    for k in sorted(p.kernels, key=lambda r: r["start_ns"]):
        out.append({"name": str(k["name"]),
                    "grid": [int(k["grid_x"]), int(k["grid_y"]), int(k["grid_z"])],
                    "block": [int(k["block_x"]), int(k["block_y"]), int(k["block_z"])],
                    "registers": int(k["registers_per_thread"]),
                    "smem": int(k["static_smem"]) + int(k["dynamic_smem"]),
                    "blocks_per_sm": int(k["active_blocks_per_sm"]),
                    "us": float(k["duration_ns"]) / 1e3})
    return out


def main(argv=None):
    args = parse_args(argv)
    import torch

    import gpuprofile as gp

    cases = [c for c in grid_cases(args.quick) if c[0][3] in args.head_dims]
    rows, current = [], None
    for shape, dtype, causal in cases:
        if current is None or (current.shape, current.dtype) != (shape, dtype):
            current = Case(shape, dtype, torch)
        for impl in args.impls:
            row = {"impl": impl, "shape": list(shape), "dtype": dtype, "causal": causal,
                   "schedule": schedule_of(impl, shape, causal)}
            try:
                row["kernels"] = launches_of(impl, current, causal)
            except Exception as exc:  # a backend that does not take the shape
                row["status"] = f"failed: {type(exc).__name__}: {exc}".splitlines()[0][:200]
            rows.append(row)
            for k in row.get("kernels", ()):
                print(f"{impl:5} {str(tuple(shape)):22} {dtype[:4]} {'causal' if causal else '':6} "
                      f"{k['us']:8.1f} us grid {k['grid']} block {k['block'][0]} "
                      f"regs {k['registers']} smem {k['smem'] // 1024} KB "
                      f"x{k['blocks_per_sm']}/SM  {k['name'][:110]}", flush=True)
            if "status" in row:
                print(f"{impl:5} {tuple(shape)} {row['status']}", flush=True)
    if args.output:
        write_json(args.output, {"config": {"device": gp.device_info(0).to_dict(), "torch": torch.__version__,
                                            "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                            "argv": sys.argv},
                                 "results": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
