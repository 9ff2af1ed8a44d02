"""Plots of benchmark_attention.py results (matplotlib).

    python benchmarks/visualize_results.py --input results.json --output-dir plots/

Writes latency.png (ms vs seq length), tflops.png (TFLOP/s vs seq length, with the device's
peak), speedup.png (speed-up over naive at each seq length) and memory.png (device memory each
implementation needs beyond Q, K, V and O). Log-log axes; one line per implementation, for each
(dtype, head_dim, causal) group found in the file. Only timed, validated rows are drawn.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict


def load_rows(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    rows = data.get("results", data.get("perf", []))
    env = data.get("config", data.get("environment", {}))
    return [r for r in rows if r.get("status") == "ok"], env


def series(rows, key):
    """{(group label, impl): sorted [(seq, value)]} for rows that have `key`."""
    out = defaultdict(list)
    for r in rows:
        if r.get(key) is None:
            continue
        group = f"{r['dtype']} D={r['head_dim']}{' causal' if r['causal'] else ''}"
        out[(group, r["impl"])].append((r["seq"], r[key]))
    return {k: sorted(v) for k, v in out.items()}


def speedups(rows):
    naive = {(r["dtype"], r["head_dim"], r["causal"], r["seq"]): r["median_ms"]
             for r in rows if r["impl"] == "naive"}
    out = []
    for r in rows:
        base = naive.get((r["dtype"], r["head_dim"], r["causal"], r["seq"]))
        if base and r["impl"] != "naive":
            out.append({**r, "speedup": base / r["median_ms"]})
    return out


def plot(plt, data, ylabel, title, path, hline=None, ylog=True):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (group, impl), pts in sorted(data.items()):
        xs, ys = zip(*pts, strict=True)
        ax.plot(xs, ys, marker="o", label=f"{impl} ({group})")
    if hline:
        ax.axhline(hline[0], color="gray", linestyle="--", linewidth=1, label=hline[1])
    ax.set_xscale("log", base=2)
    if ylog:
        ax.set_yscale("log")
    ax.set_xlabel("sequence length")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", required=True)
    p.add_argument("--output-dir", default="plots")
    args = p.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, env = load_rows(args.input)
    if not rows:
        print(f"{args.input}: no timed rows to plot", file=sys.stderr)
        return 1
    os.makedirs(args.output_dir, exist_ok=True)
    device = env.get("device", {})
    name = device.get("name", "GPU")
    peak = device.get("peak_fp16_tensor_tflops")
    written = [
        plot(plt, series(rows, "median_ms"), "median time (ms)", f"attention forward latency, {name}",
             os.path.join(args.output_dir, "latency.png")),
        plot(plt, series(rows, "tflops"), "TFLOP/s (4·B·H·N²·D convention)",
             f"attention forward throughput, {name}", os.path.join(args.output_dir, "tflops.png"),
             hline=(peak, "fp16/bf16 tensor peak") if peak else None),
        plot(plt, series(speedups(rows), "speedup"), "speed-up over naive (×)",
             "speed-up over the naive three-kernel version", os.path.join(args.output_dir, "speedup.png")),
        plot(plt, series([r for r in rows if r.get("extra_memory_bytes")], "extra_memory_bytes"),
             "bytes beyond Q, K, V, O", "extra device memory per call (fused kernels: none)",
             os.path.join(args.output_dir, "memory.png")),
    ]
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
