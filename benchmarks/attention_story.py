"""Why each attention kernel is faster than the last: every implementation timed, placed on the
measured roofline, its tensor-pipe use and its top stall reasons, all from gpuprofile's own
counters (docs/attention.md, "Why each step is faster").

    python benchmarks/attention_story.py --output-dir docs/results/attention_story     # GPU
    python benchmarks/attention_story.py --plot docs/results/attention_story/story.json  # any machine

The first form measures (one shape: bf16, batch 4, 16 heads, seq 4096, head_dim 128 by default)
and writes story.json, a Markdown table (story.md) and, where matplotlib is installed, the
figures. The second redraws the figures and the table from a saved story.json, without a GPU.

Per implementation (ours: naive, flash, flash_tc, flash_wgmma where the device runs it; torch
SDPA's flash and cuDNN backends as the peers when torch is installed):
- time: gpuprofile.benchmark (cold L2), TFLOP/s from the model FLOPs 4·B·H·N²·D;
- gp.metrics(fn, metrics=["roofline", "tensor", ...]): exact FLOPs, DRAM bytes, tensor-pipe
  utilisation, mma.sync (HMMA) against wgmma (GMMA) instructions, achieved occupancy;
- gp.stalls(fn): the stall reasons of the kernel with the most samples (PC sampling).
Each output is checked against the float64 reference first; a wrong one is not measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import gpuprofile as gp
from gpuprofile import _C
from gpuprofile.counters.metric_sets import DRAM_READ, DRAM_WRITE, DURATION, TENSOR_PIPE
from gpuprofile.kernels import IMPLEMENTATIONS, attention_flops
from gpuprofile.kernels.attention_bench import (
    Inputs,
    call_ours,
    call_sdpa,
    environment,
    import_torch,
    sdpa_context,
    validate,
)

OURS = tuple(i.name for i in IMPLEMENTATIONS)  # the story: naive -> flash -> flash_tc -> flash_wgmma
PEERS = ("sdpa_flash", "sdpa_cudnn")
HMMA_PIPE = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
INST_HMMA = "sm__inst_executed_pipe_tensor_op_hmma.sum"
INST_GMMA = "sm__inst_executed_pipe_tensor_op_gmma.sum"
FMA_PIPE = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
ISSUE = "smsp__issue_active.avg.pct_of_peak_sustained_active"
# Dense fp16/bf16 tensor peak of the SXM boards at their boost clock (NVIDIA's datasheets): what
# wgmma can reach; gpuprofile's measured tensor ceiling is mma.sync's, which wgmma exceeds.
DATASHEET_TENSOR = {"H100": 989.4e12, "H200": 989.4e12}


def datasheet_peak(device_name: str):
    for key, peak in DATASHEET_TENSOR.items():
        if key in device_name and "PCIe" not in device_name and "NVL" not in device_name:
            return peak
    return None


def runnable(impl, inp, torch) -> str | None:
    """None if impl can run here, else why not."""
    if impl in PEERS and torch is None:
        return "torch with CUDA is not installed"
    # what impl="auto" would pick here says whether this device and build run flash_wgmma
    if impl == "flash_wgmma" and _C._testing.attention_auto_impl(inp.dtype, inp.shape[3], True) != impl:
        return "needs a compute capability 9.0 device and a build with sm_90a code"
    return None


def call_of(impl, inp, causal):
    return call_ours(impl, inp, causal) if impl in OURS else call_sdpa(inp, causal)


def time_and_stalls(impl, inp, causal, max_time, torch, argv) -> dict:
    """Validation, time and PC sampling of one implementation. PC sampling runs in a fresh
    process (`--stalls-child`): in a process where CUPTI has already collected other data on a
    kernel, it may file every sample as a non-user kernel's (docs/counters.md)."""
    b, h, n, d = inp.shape
    row = {"impl": impl, "flops_model": attention_flops(b, h, n, d, causal)}
    why = runnable(impl, inp, torch)
    if why:
        return {**row, "status": f"skipped: {why}"}
    ok, err, tol = validate(impl, inp, causal)
    row.update(max_error=err, tolerance=tol)
    if not ok:
        return {**row, "status": "wrong result: not measured"}
    with sdpa_context(impl):
        t = gp.benchmark(call_of(impl, inp, causal), flops=row["flops_model"], name=impl,
                         max_time=max_time)
    row.update(status="ok", median_ms=t.median_ms, tflops=t.tflops, rel_noise=t.rel_noise)
    child = subprocess.run([sys.executable, os.path.abspath(__file__), *argv, "--stalls-child",
                            impl], capture_output=True, text=True, timeout=300)
    if child.returncode != 0:
        row["stalls_error"] = (child.stderr.strip().splitlines() or ["?"])[-1]
        row.update(stalls_kernel=None, stalls_samples=0, stalls={})
    else:
        row.update(json.loads(child.stdout.strip().splitlines()[-1]))
    return row


def stalls_child(impl, args) -> dict:
    """In a fresh process: fn once (loads, warms), then gp.stalls(fn); the busiest kernel."""
    torch = import_torch()
    inp = Inputs((args.batch, args.heads, args.seq, args.head_dim), args.dtype, torch)
    fn = call_of(impl, inp, args.causal)
    with sdpa_context(impl):
        fn()
        s = gp.stalls(fn, source_lines=False)
    main = max(s.kernels, key=lambda k: k.samples) if s.kernels else None
    return {"stalls_kernel": main.name if main else None,
            "stalls_samples": main.samples if main else 0,
            "stalls": dict(main.top(6)) if main else {}, "stalls_notes": s.notes}


def add_counters(row, inp, causal) -> None:
    """The roofline and tensor sets, occupancy and issue activity, into row."""
    fn = call_of(row["impl"], inp, causal)
    with sdpa_context(row["impl"]):
        m = gp.metrics(fn, metrics=["roofline", "tensor", OCCUPANCY, ISSUE])
    v = m.total
    flops = m.flops()
    row.update(
        kernels=[k.name for k in m.kernels],
        flops_counted=flops["total"], flops_tensor=flops["tensor"],
        dram_bytes=v[DRAM_READ] + v[DRAM_WRITE], kernel_seconds=v[DURATION] * 1e-9,
        tensor_pipe_pct=v[TENSOR_PIPE], hmma_pipe_pct=v[HMMA_PIPE], inst_hmma=v[INST_HMMA],
        inst_gmma=v[INST_GMMA], fma_pipe_pct=v[FMA_PIPE], occupancy_pct=v[OCCUPANCY],
        issue_active_pct=v[ISSUE])


def measure(args) -> dict:
    if gp.device_count() == 0:
        sys.exit("attention_story.py --output-dir needs a CUDA device (or use --plot story.json)")
    torch = import_torch()
    shape = (args.batch, args.heads, args.seq, args.head_dim)
    inp = Inputs(shape, args.dtype, torch)
    ceil = gp.ceilings()
    rows = []
    for impl in args.impls:
        rows.append(time_and_stalls(impl, inp, args.causal, args.max_time, torch, args.argv))
        r = rows[-1]
        print(f"  {impl:>12} {r['status']}" + (f"  {r['median_ms']:.4g} ms  {r['tflops']:.4g} TFLOP/s"
              if r["status"] == "ok" else ""), file=sys.stderr, flush=True)
    for r in rows:
        if r["status"] == "ok":
            add_counters(r, inp, args.causal)
    env = environment(torch)
    return {"config": {"shape": shape, "dtype": args.dtype, "causal": args.causal,
                       "max_time": args.max_time, **env},
            "ceilings": ceil.to_dict(),
            "datasheet_tensor_flops_per_s": datasheet_peak(env["device"]["name"]),
            "rows": rows}


# ---- the table and the figures (no GPU needed) ----------------------------------------------


def markdown(story: dict) -> str:
    c = story["ceilings"]
    sheet = story.get("datasheet_tensor_flops_per_s")
    head = ["impl", "ms", "TFLOP/s", "FLOP/DRAM byte", "% of mma.sync ceiling"]
    head += ["% of datasheet"] if sheet else []
    head += ["tensor pipe %", "HMMA / GMMA inst", "FMA pipe %", "occupancy %", "top stall reasons"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in story["rows"]:
        if r["status"] != "ok":
            lines.append(f"| {r['impl']} | {r['status']} |" + " |" * (len(head) - 2))
            continue
        achieved = r["flops_model"] / (r["median_ms"] * 1e-3)
        intensity = r["flops_counted"] / r["dram_bytes"] if r["dram_bytes"] else float("inf")
        top = ", ".join(f"{k} {100 * s:.0f} %" for k, s in list(r["stalls"].items())[:3]) \
            or f"(not sampled: {r.get('stalls_error', '?')[:80]})"
        cells = [r["impl"], f"{r['median_ms']:.3f}", f"{r['tflops']:.0f}", f"{intensity:.0f}",
                 f"{100 * achieved / c['tensor_flops_per_s']:.0f}"]
        cells += [f"{100 * achieved / sheet:.0f}"] if sheet else []
        cells += [f"{r['tensor_pipe_pct']:.0f}", f"{r['inst_hmma']:.3g} / {r['inst_gmma']:.3g}",
                  f"{r['fma_pipe_pct']:.0f}", f"{r['occupancy_pct']:.0f}", top]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(story: dict, out_dir: str) -> list:
    """roofline.png, tensor.png, stalls.png in out_dir; returns the paths (none without
    matplotlib)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        print("matplotlib is not installed: no figures (pip install matplotlib)", file=sys.stderr)
        return []
    rows = [r for r in story["rows"] if r["status"] == "ok"]
    c = story["ceilings"]
    sheet = story.get("datasheet_tensor_flops_per_s")
    paths = []

    fig = Figure(figsize=(7.5, 5))
    ax = fig.add_subplot()
    bw = c["dram_bytes_per_s"]
    lo, hi = 1.0, 1e5
    roofs = [(c["fp32_flops_per_s"], "FP32 FFMA (measured)", "-"),
             (c["tensor_flops_per_s"], "tensor, mma.sync (measured)", "-")]
    if sheet:
        roofs.append((sheet, "tensor, dense bf16 (datasheet)", "--"))
    for peak, label, style in roofs:
        ridge = peak / bw
        ax.plot([lo, ridge, hi], [lo * bw, peak, peak], style, label=f"{label}: {peak / 1e12:.0f} TFLOP/s")
    for r in rows:
        x = r["flops_counted"] / r["dram_bytes"]
        y = r["flops_model"] / (r["median_ms"] * 1e-3)
        ax.scatter([x], [y], zorder=3)
        ax.annotate(r["impl"], (x, y), fontsize=8, textcoords="offset points", xytext=(5, -3))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (counted FLOP / DRAM byte)")
    ax.set_ylabel("FLOP/s (model FLOPs / benchmark median)")
    ax.set_title(_title(story))
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    paths.append(_save(fig, out_dir, "roofline.png"))

    fig = Figure(figsize=(7.5, 3.5))
    ax = fig.add_subplot()
    names = [r["impl"] for r in rows]
    ax.barh(names, [r["tensor_pipe_pct"] for r in rows], label="tensor pipe busy %")
    ax.barh(names, [r["fma_pipe_pct"] for r in rows], left=0, height=0.35, label="FMA pipe busy %")
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of active cycles")
    ax.legend(fontsize=8)
    ax.set_title("tensor and FMA pipe utilisation")
    paths.append(_save(fig, out_dir, "tensor.png"))

    fig = Figure(figsize=(7.5, 3.5))
    ax = fig.add_subplot()
    reasons = []
    for r in rows:
        reasons += [k for k in r["stalls"] if k not in reasons]
    left = [0.0] * len(rows)
    for reason in reasons:
        widths = [100 * r["stalls"].get(reason, 0.0) for r in rows]
        ax.barh(names, widths, left=left, label=reason)
        left = [a + w for a, w in zip(left, widths, strict=False)]
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of PC samples of the busiest kernel (top 6 reasons)")
    ax.legend(fontsize=7, ncol=3, loc="lower right")
    ax.set_title("where warps wait (gp.stalls)")
    paths.append(_save(fig, out_dir, "stalls.png"))
    return paths


def _title(story):
    cfg = story["config"]
    b, h, n, d = cfg["shape"]
    return (f"{cfg['device']['name']}: attention {cfg['dtype']}, B={b} H={h} N={n} D={d}"
            + (" causal" if cfg["causal"] else ""))


def _save(fig, out_dir, name):
    path = os.path.join(out_dir, name)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output-dir", help="measure on the GPU; write story.json, story.md, figures here")
    p.add_argument("--plot", metavar="STORY_JSON", help="redraw the table and figures from a saved run")
    p.add_argument("--impls", default=",".join(OURS + PEERS),
                   help=f"comma list of {', '.join(OURS + PEERS)}")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--head-dim", type=int, default=128, choices=[64, 128])
    p.add_argument("--causal", action="store_true")
    p.add_argument("--max-time", type=float, default=1.0, help="seconds per timed benchmark")
    p.add_argument("--stalls-child", metavar="IMPL", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    # the shape options, for the --stalls-child processes
    args.argv = ["--dtype", args.dtype, "--batch", str(args.batch), "--heads", str(args.heads),
                 "--seq", str(args.seq), "--head-dim", str(args.head_dim)] + \
        (["--causal"] if args.causal else [])
    if args.stalls_child:
        print(json.dumps(stalls_child(args.stalls_child, args)))
        return 0
    if bool(args.output_dir) == bool(args.plot):
        p.error("give exactly one of --output-dir (measure) and --plot (redraw)")
    args.impls = [i for i in args.impls.split(",") if i]
    unknown = [i for i in args.impls if i not in OURS + PEERS]
    if unknown:
        p.error(f"unknown impls {unknown}; choose from {OURS + PEERS}")
    if args.plot:
        with open(args.plot, encoding="utf-8") as f:
            story = json.load(f)
        out_dir = os.path.dirname(os.path.abspath(args.plot))
    else:
        os.makedirs(args.output_dir, exist_ok=True)
        story = measure(args)
        out_dir = args.output_dir
        with open(os.path.join(out_dir, "story.json"), "w", encoding="utf-8") as f:
            json.dump(story, f, indent=1)
    table = markdown(story)
    with open(os.path.join(out_dir, "story.md"), "w", encoding="utf-8") as f:
        f.write(f"{_title(story)}\n\n{table}")
    print(table)
    for path in plot(story, out_dir):
        print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

