"""Benchmark gpuprofile's attention kernels (and torch SDPA's backends, when torch is installed).

    python benchmarks/benchmark_attention.py --seq-lengths 128,256,512,1024,2048 \\
        --impls naive,flash,flash_tc,sdpa,sdpa_cudnn --dtype bf16 --head-dim 64 --output r.json

Every implementation's output is first checked against a float64 reference on two (batch, head)
slices, with the derived tolerance (docs/attention.md); an implementation that fails is reported
and not timed. Timing uses gpuprofile.benchmark (cold L2, noise-based stopping). Prints a table,
writes JSON. Shapes follow the FlashAttention papers: batch·seq = 16k tokens and heads·head_dim =
2048; without --impls and --seq-lengths, gpuprofile/kernels/attention_plan.py picks them for the
machine, as for `gpuprofile attention`. The sweep lives in gpuprofile/kernels/attention_bench.py;
`gpuprofile attention` runs it too, with the plots.
"""

from __future__ import annotations

import argparse
import json
import sys

import gpuprofile as gp
from gpuprofile.kernels.attention_bench import (  # noqa: F401  (check_attention.py and tests use these)
    OURS,
    SDPA_BACKENDS,
    Inputs,
    add_arguments,
    all_ok,
    environment,
    finish_arguments,
    import_torch,
    peak_for,
    print_table,
    run_all,
    run_case,
    shape_for,
    table_row,
    title_for,
)
from gpuprofile.kernels.attention_plan import plan_here


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.add_argument("--output", default=None, help="JSON file for the results")
    return finish_arguments(p, p.parse_args(argv))


def main(argv=None):
    args = parse_args(argv)
    if gp.device_count() == 0:
        print("benchmark_attention.py needs a CUDA device", file=sys.stderr)
        return 2
    torch = import_torch()
    plan = plan_here(args, torch)
    print(plan.describe(args.dtype), file=sys.stderr, flush=True)
    args.seq_lengths, args.impls = plan.seqs, plan.impls
    rows = run_all(args.impls, args.seq_lengths, args.dtype, args.head_dim, args.causal,
                   args.batch, args.heads, args.max_time, torch, left_out=plan.left_out,
                   auto={n: impl for n, (impl, _) in plan.auto.items()})
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump({"config": {**vars(args), **environment(torch)}, "results": rows}, f, indent=1)
    print_table(rows, title_for(args))
    return 0 if all_ok(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
