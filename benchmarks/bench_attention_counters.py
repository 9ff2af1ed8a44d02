"""What flash_wgmma's schedules do on the SM, per shape: gpuprofile's own hardware counters and
stall reasons (issue 27: "use gpuprofile's own counters and stalls on it and write down what they
said").

    python benchmarks/bench_attention_counters.py --output counters.json
    python benchmarks/bench_attention_counters.py --shape 32,32,512,64,causal \\
        --schedules persist,persist_lookahead --what stalls

For each shape and schedule (flash_wgmma forced through _C._testing.attention_wgmma, as
in bench_attention_grid.py), in a fresh process each (one CUPTI client per process, and PC
sampling files every sample as a non-user kernel's once counters were collected on that kernel in
the process, gpuprofile.stalls):
  metrics  gpu__time_duration, the tensor pipe's and the XU's (exp2) activity and issue activity
           in % of peak over active cycles, DRAM bytes read and written, the L2 hit rate, the SM
           clock (gpuprofile.metrics, one range per kernel);
  stalls   the share of each stall reason over the kernel's PC samples (gpuprofile.stalls).
The default shapes are the ones furthest behind cuDNN on the H100 grid of 2026-11-26 (N = 512 and
1024, causal, both head_dims) and a long one to compare with. Prints a table, writes JSON
(--output). Needs a compute capability 9.0 device.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from bench_attention_grid import HEAD_DIMS as GRID_HEAD_DIMS
from bench_attention_grid import SCHEDULES as GRID_SCHEDULES

# the schedules (gp.kernels.WGMMA_SCHEDULES) and the ones that take only some head_dims: the grid's
SCHEDULES = GRID_SCHEDULES
HEAD_DIMS = {name[3:]: dims for name, dims in GRID_HEAD_DIMS.items()}
WHAT = ("metrics", "stalls", "pcs")
DEFAULT_WHAT = ("metrics", "stalls")
PCS = 60  # --what pcs: the most sampled PC offsets kept per kernel
METRICS = ("gpu__time_duration.sum",
           "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
           "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
           "smsp__issue_active.avg.pct_of_peak_sustained_active",
           "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sector_hit_rate.pct",
           "sm__cycles_elapsed.avg.per_second")
SHAPES = ((32, 32, 512, 64, True), (16, 32, 1024, 64, True), (32, 32, 512, 64, False),
          (32, 16, 512, 128, True), (4, 32, 4096, 64, True))
TOP = 6  # stall reasons per row of the table


def parse_shape(text: str):
    """'B,H,N,D' or 'B,H,N,D,causal' -> (B, H, N, D, causal)."""
    parts = [s.strip() for s in text.split(",")]
    causal = len(parts) == 5 and parts[4] == "causal"
    dims = parts[:4]
    if len(parts) not in (4, 5) or (len(parts) == 5 and not causal) or \
            not all(d.isdigit() and int(d) > 0 for d in dims):
        raise ValueError(f"--shape: B,H,N,D or B,H,N,D,causal with positive integers, got {text!r}")
    b, h, n, d = (int(x) for x in dims)
    if d not in (64, 128):
        raise ValueError(f"--shape: flash_wgmma takes head_dim 64 or 128, got {d} in {text!r}")
    return (b, h, n, d, causal)


def parse_list(text: str, choices, what: str):
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in choices]
    if unknown or not names:
        raise ValueError(f"--{what}: unknown {unknown}; choose from {', '.join(choices)}")
    return names


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", action="append", default=None,
                   help="B,H,N,D[,causal] (repeatable; default: the shapes furthest behind cuDNN)")
    p.add_argument("--schedules", default=",".join(SCHEDULES), help=f"comma list of {', '.join(SCHEDULES)}")
    p.add_argument("--what", default=",".join(DEFAULT_WHAT),
                   help="comma list of metrics, stalls, pcs (the stall reasons of the most sampled "
                        "SASS offsets, to read beside cuobjdump -sass of the same build)")
    p.add_argument("--timeout", type=int, default=300, help="seconds per child process at most")
    p.add_argument("--output", default=None, help="JSON file for the results")
    p.add_argument("--child", nargs=3, metavar=("SHAPE", "SCHEDULE", "WHAT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        args.shapes = [parse_shape(s) for s in args.shape] if args.shape else list(SHAPES)
        args.schedules = parse_list(args.schedules, SCHEDULES, "schedules")
        args.what = parse_list(args.what, WHAT, "what")
    except ValueError as exc:
        p.error(str(exc))
    if args.timeout < 1:
        p.error("--timeout must be >= 1")
    return args


def shape_text(shape) -> str:
    b, h, n, d, causal = shape
    return f"{b},{h},{n},{d}" + (",causal" if causal else "")


def jobs(shapes, schedules, what):
    """[(shape, schedule, what)] to run, each in a process of its own; schedules that do not take
    the head_dim are left out."""
    return [(shape, s, w) for shape in shapes for s in schedules
            if shape[3] in HEAD_DIMS.get(s, (shape[3],)) for w in what]


# ---- the table (pure) ----------------------------------------------------------------------------

def _number_of(values):
    """name -> the value if it is a number, else None."""
    return lambda name: values.get(name) if isinstance(values.get(name), (int, float)) else None


def table(results):
    """Rows for text_table: shape, schedule, µs, the counters, the top stall reasons."""
    columns = ["shape", "schedule", "µs", "tensor %", "XU %", "issue %", "DRAM MB", "L2 hit %",
               "SM MHz", "stall reasons (share of samples)"]
    rows = []
    for r in results:
        m, s = r.get("metrics") or {}, r.get("stalls") or {}
        get = _number_of(m)
        ns, hz = get("gpu__time_duration.sum"), get("sm__cycles_elapsed.avg.per_second")
        read, write = get("dram__bytes_read.sum"), get("dram__bytes_write.sum")
        shares = s.get("shares") or {}
        top = ", ".join(f"{k} {v:.0%}" for k, v in list(shares.items())[:TOP])
        errors = "; ".join(f"{w}: {r[w + '_error']}" for w in WHAT if r.get(w + "_error"))
        rows.append([r["shape"], r["schedule"], ns / 1e3 if ns is not None else None,
                     get(METRICS[1]), get(METRICS[2]), get(METRICS[3]),
                     (read + write) / 1e6 if read is not None and write is not None else None,
                     get(METRICS[6]), hz / 1e6 if hz is not None else None, top or errors or None])
    return columns, rows


def merge(done):
    """[(shape, schedule, what, result)] -> one dict per (shape, schedule): metrics and stalls, or
    <what>_error with the child's last line."""
    out = {}
    for shape, schedule, what, res in done:
        row = out.setdefault((shape, schedule), {"shape": shape_text(shape), "schedule": schedule})
        if "error" in res:
            row[what + "_error"] = " ".join(res["error"])[:300]
        else:
            row[what] = res
    return list(out.values())


# ---- the GPU part (a child process per measurement) ---------------------------------------------

def child(shape_arg: str, schedule: str, what: str) -> dict:
    import numpy as np

    import gpuprofile as gp
    from gpuprofile import _C, kernels

    b, h, n, d, causal = parse_shape(shape_arg)
    rng = np.random.default_rng(0)
    q, k, v = (kernels.to_device(rng.standard_normal((b, h, n, d), dtype=np.float32), "bfloat16")
               for _ in range(3))
    out = kernels.empty((b, h, n, d), "bfloat16")
    def fn():
        _C._testing.attention_wgmma(q, k, v, out, schedule=schedule, causal=causal)

    if what == "pcs":
        return pc_samples(fn)
    if what == "stalls":
        # its first launch inside the sampling session: CUDA loads a kernel at its first launch,
        # and one loaded between two sessions is filed as a non-user kernel's (gpuprofile.stalls)
        report = gp.stalls(fn)
        kernel = max(report.kernels, key=lambda x: x.samples)
        return {"kernel": kernel.name, "samples": kernel.samples,
                "shares": {k: round(x, 4) for k, x in kernel.shares.items()}}
    res = gp.metrics(fn, metrics=list(METRICS))  # after a warm-up run of its own
    kernel = res.kernels[0]
    return {"kernel": kernel.name, **{m: kernel.values.get(m) for m in METRICS}}


def pc_samples(fn) -> dict:
    """The PCS most sampled SASS offsets of the kernel with the most samples: {kernel, samples,
    pcs: [[offset, samples, {reason: count}]]}, first launch inside the session (child())."""
    from gpuprofile import _C
    from gpuprofile.counters.stalls import parse_reason

    sampler = _C.PCSampler(period=0, max_pcs=4096)
    try:
        sampler.start()
        fn()
        sampler.stop()
    finally:
        sampler.close()
    per_kernel = {}
    for (_, _, offset), (mangled, counts) in sampler.pcs.items():
        reasons = {}
        for name, c in zip(sampler.reasons, counts, strict=False):
            parsed = parse_reason(name)
            if c and parsed is not None and not parsed[1]:
                reasons[parsed[0]] = reasons.get(parsed[0], 0) + int(c)
        per_kernel.setdefault(mangled, []).append([int(offset), sum(reasons.values()), reasons])
    if not per_kernel:
        raise RuntimeError(f"no PC samples by kernel: {sampler.totals}")
    mangled, pcs = max(per_kernel.items(), key=lambda kv: sum(p[1] for p in kv[1]))
    pcs.sort(key=lambda p: -p[1])
    return {"kernel": mangled, "samples": sum(p[1] for p in pcs), "pcs": pcs[:PCS]}


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    import gpuprofile as gp
    from gpuprofile.toolkit import text_table

    if gp.device_count() == 0 or tuple(gp.device_info(0).compute_capability) != (9, 0):
        print("bench_attention_counters.py needs a compute capability 9.0 device (flash_wgmma)",
              file=sys.stderr)
        return 2
    from _children import run_child, write_json

    todo = jobs(args.shapes, args.schedules, args.what)
    started, done = time.time(), []
    for i, (shape, schedule, what) in enumerate(todo):
        res = run_child(__file__, [shape_text(shape), schedule, what], args.timeout, error_lines=2)
        done.append((shape, schedule, what, res))
        print(f"[{i + 1}/{len(todo)} {time.time() - started:4.0f} s] {shape_text(shape)} {schedule} "
              f"{what}: {'error: ' + ' '.join(res['error']) if 'error' in res else 'ok'}",
              file=sys.stderr, flush=True)
    results = merge(done)
    info = gp.device_info(0)
    if args.output:
        write_json(args.output, {"config": {"device": info.to_dict(), "metrics": list(METRICS),
                                            "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                            "seconds": time.time() - started, "argv": sys.argv},
                                 "results": results})
    columns, rows = table(results)
    print(text_table(columns, rows, title=f"flash_wgmma's schedules on {info.name}: counters "
                                          "(% of peak over active cycles) and stall reasons"))
    return 0 if not any(k.endswith("_error") for r in results for k in r) else 1


if __name__ == "__main__":
    sys.exit(main())
