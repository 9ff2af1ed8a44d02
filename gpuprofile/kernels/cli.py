"""`gpuprofile attention` (the attention benchmark sweep with its table, JSON and plots) and
`gpuprofile profile-kernels` (the bundled kernels traced, with hardware counters when this
machine permits them). gpuprofile/cli.py dispatches here."""

from __future__ import annotations

import sys

from .._files import write_json

ATTENTION_EXAMPLE = """\
examples:
  gpuprofile attention --plots plots/
  gpuprofile attention --seq-lengths 512,1024,2048 --impls flash,flash_tc,sdpa --output r.json

Without --impls and --seq-lengths the sweep fits the machine: on Hopper flash_wgmma (what
impl="auto" picks there) and the other kernels of ours, at seq 512 to 16384; elsewhere up to
flash_tc at seq 128 to 2048; torch SDPA's cuDNN, FlashAttention-2 and math backends when torch
is installed. It first says what "auto" picks for each shape and why, the cases and an estimate
of the time (about a minute on an H100). Each implementation is checked against a float64
reference, then timed with gpuprofile.benchmark; the tables (all rows; ours against SDPA's) go to
stdout, each case's status to stderr. TFLOP/s counts 4·B·H·N²·D per call (halved when causal).
--plots writes latency.png, tflops.png, speedup.png, memory.png and, with SDPA rows,
versus_sdpa.png (needs matplotlib). Without a CUDA device it says so and exits 0 (nothing to
measure is not a failure of this command). Exit status: 0 every kernel of ours validated and
timed, or no device; 1 one failed its check; 2 bad arguments, or plots that cannot be made.
"""

PROFILE_EXAMPLE = """\
examples:
  gpuprofile profile-kernels --seq-len 512 --trace t.json
  gpuprofile profile-kernels --impl naive --set roofline --json naive.json

Validates the kernel once, then traces --iters calls under gpuprofile.profile() (kernels, copies,
device memory) inside a region, prints the kernel summary and writes the Chrome trace (open it in
ui.perfetto.dev). Then, unless --no-counters, collects the hardware counters of one call with
gpuprofile.metrics(); where counters are not permitted it says why on stderr and goes on.
Exit status: 0 done; 1 a wrong result; 2 bad arguments, no device, or tracing failed.
"""


def add_parsers(sub, formatter) -> None:
    from . import attention_bench as ab

    p = sub.add_parser("attention", help="the attention demo: benchmark table and plots",
                       description="Benchmark the bundled attention kernels (and torch SDPA "
                                   "when installed) over sequence lengths.",
                       epilog=ATTENTION_EXAMPLE, formatter_class=formatter)
    ab.add_arguments(p)
    p.add_argument("--output", default=None, metavar="PATH", help="write the rows and config as JSON")
    p.add_argument("--plots", default=None, metavar="DIR", help="write the plots into DIR (needs matplotlib)")
    p.set_defaults(func=attention_main, parser=p)

    p = sub.add_parser("profile-kernels", help="trace the bundled attention kernels (+ counters)",
                       description="Trace one bundled attention kernel, and collect its hardware "
                                   "counters when permitted.",
                       epilog=PROFILE_EXAMPLE, formatter_class=formatter)
    p.add_argument("--impl", default="auto", choices=ab.OURS,
                   help="which kernel (default auto: the one gp.kernels.attention picks)")
    p.add_argument("--seq-len", type=int, default=512, metavar="N", help="sequence length (default 512)")
    p.add_argument("--dtype", default="bf16", choices=sorted(ab.DTYPES))
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--batch", type=int, default=None, help="default: 16384 // seq-len")
    p.add_argument("--heads", type=int, default=None, help="default: 2048 // head-dim")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--iters", type=int, default=10, metavar="N", help="calls traced (default 10)")
    p.add_argument("--trace", default=None, metavar="PATH", help="Chrome trace (gzip if PATH ends in .gz)")
    p.add_argument("--set", default="sol", metavar="NAME", help="metric set for the counters (default sol)")
    p.add_argument("--no-counters", action="store_true", help="trace only")
    p.add_argument("--json", default=None, metavar="PATH", help="write config, trace summary and counters")
    p.set_defaults(func=profile_kernels_main, parser=p)


def no_device_reason() -> str | None:
    from .. import _C
    from ..device import device_count

    return None if device_count() else (_C._cuda_status()["reason"] or "none found")


def attention_main(args) -> int:
    from . import attention_bench as ab
    from .attention_plan import plan_here

    ab.finish_arguments(args.parser, args)
    reason = no_device_reason()
    if reason is not None:
        print(f"gpuprofile attention: no CUDA device here ({reason}), so there is nothing to "
              "benchmark. On a machine with an NVIDIA GPU this command validates and times the "
              "attention kernels and draws their plots. `gpuprofile info` shows what this machine "
              "can measure.", file=sys.stderr)
        return 0
    torch = ab.import_torch()
    plan = plan_here(args, torch)
    print(plan.describe(args.dtype), file=sys.stderr, flush=True)
    args.seq_lengths, args.impls = plan.seqs, plan.impls
    rows = ab.run_all(args.impls, args.seq_lengths, args.dtype, args.head_dim, args.causal,
                      args.batch, args.heads, args.max_time, torch, left_out=plan.left_out,
                      auto={n: impl for n, (impl, _) in plan.auto.items()})
    print(ab.table(rows, ab.title_for(args)), flush=True)
    versus = ab.versus_table(rows, args.causal)
    if versus is not None:
        print(f"\n{versus}", flush=True)
    code = 0 if ab.all_ok(rows) else 1
    if args.output:
        config = {k: v for k, v in vars(args).items() if k not in ("func", "parser")}
        config["auto"] = {str(n): {"impl": impl, "reason": why} for n, (impl, why) in plan.auto.items()}
        config["estimate_s"] = {"about": plan.estimate_s, "at_most": plan.at_most_s}
        write_json(args.output, {"config": {**config, **ab.environment(torch)}, "results": rows})
        print(f"gpuprofile attention: results written to {args.output}", file=sys.stderr)
    if args.plots:
        code = max(code, _plots(rows, ab.environment(torch), args.plots))
    return code


def _plots(rows, env, output_dir) -> int:
    from .attention_plots import write_plots

    try:
        paths = write_plots(rows, env, output_dir)
    except ImportError:
        print("gpuprofile attention: --plots needs matplotlib (pip install matplotlib)", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"gpuprofile attention: no plots: {e}", file=sys.stderr)
        return 2
    print(f"gpuprofile attention: plots written: {', '.join(paths)}", file=sys.stderr)
    return 0


def check_profile_args(args) -> str | None:
    for option, value in (("--seq-len", args.seq_len), ("--head-dim", args.head_dim),
                          ("--iters", args.iters), ("--batch", args.batch), ("--heads", args.heads)):
        if value is not None and value < 1:
            return f"{option} must be >= 1, got {value}"
    return None


def profile_kernels_main(args) -> int:
    from .. import _C
    from . import attention_bench as ab

    problem = check_profile_args(args)
    if problem is not None:
        args.parser.error(problem)
    reason = no_device_reason()
    if reason is not None:
        print(f"gpuprofile profile-kernels: error: needs a CUDA device ({reason})", file=sys.stderr)
        return 2
    dtype = ab.DTYPES[args.dtype]
    shape = ab.shape_for(args.seq_len, args.head_dim, args.batch, args.heads)
    inp = ab.Inputs(shape, dtype)
    ok, err, tol = ab.validate(args.impl, inp, args.causal)
    print(f"gpuprofile profile-kernels: {args.impl} {dtype} {shape}: max error {err:.3g} "
          f"(tolerance {tol:.3g}): {'ok' if ok else 'WRONG'}", file=sys.stderr)
    if not ok:
        return 1
    call = ab.call_ours(args.impl, inp, args.causal)
    try:
        summary, trace = _trace(call, args, f"attention {args.impl} seq={args.seq_len}")
    except _C.GpuProfileError as e:
        print(f"gpuprofile profile-kernels: error: cannot trace: {e}", file=sys.stderr)
        return 2
    print(summary)
    counters = None if args.no_counters else _counters(call, args.set)
    if counters is not None:
        print()
        print(counters)
    if args.json:
        config = {k: v for k, v in vars(args).items() if k not in ("func", "parser")}
        out = {"config": {**config, "shape": list(shape), "dtype": dtype},
               "validation": {"max_error": err, "tolerance": tol}, "trace": trace,
               "metrics": counters.to_dict() if counters is not None else None}
        write_json(args.json, out)
    return 0


def _trace(call, args, name):
    """(summary, profile dict): --iters calls under gpuprofile.profile() inside region `name`."""
    from .. import _C
    from ..tracing.profile import profile

    with profile(memory=True) as p:
        for _ in range(args.iters):
            with _C.region(name):
                call()
        _C._synchronize()
    if args.trace:
        written = p.export_chrome_trace(args.trace)
        print(f"gpuprofile profile-kernels: trace written to {written}", file=sys.stderr)
    return p.summary(), p.to_dict()


def _counters(call, metric_set):
    """The MetricsResult of one call, or None with the reason on stderr."""
    from .. import _C
    from ..counters.metrics import metrics

    try:
        return metrics(call, metrics=metric_set)
    except (_C.GpuProfileError, ValueError) as e:
        print(f"gpuprofile profile-kernels: hardware counters not collected: {e}", file=sys.stderr)
        return None
