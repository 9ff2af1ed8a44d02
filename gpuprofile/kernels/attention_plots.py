"""Plots of attention sweep results (matplotlib, imported on use): latency.png (ms vs sequence
length), tflops.png (TFLOP/s, with the device's peak), speedup.png (over naive at each length),
memory.png (device memory beyond Q, K, V and O) and, when the sweep timed torch SDPA's backends,
versus_sdpa.png (gpuprofile's impl="auto" pick over each backend, TFLOP/s ratio). Log-log axes;
one line per implementation, for each (dtype, head_dim, causal) group; SDPA's lines dashed. Only
timed, validated rows are drawn. TFLOP/s counts 4·B·H·N²·D per call, halved when causal. Used by
`gpuprofile attention --plots DIR` and benchmarks/visualize_results.py.
"""

from __future__ import annotations

import os
from collections import defaultdict

from .._files import read_json, save_figure

TFLOPS_LABEL = "TFLOP/s (4·B·H·N²·D per call, ÷2 causal)"


def load_rows(path):
    data = read_json(path)
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


def versus(rows):
    """Rows of ours that impl="auto" picked (marked "auto"), each with "vs_<backend>": its
    TFLOP/s over that SDPA backend's at the same (dtype, head_dim, causal, seq); only those with
    at least one backend."""
    theirs = defaultdict(dict)
    rows = [r for r in rows if r.get("status") == "ok"]
    for r in rows:
        if r["impl"].startswith("sdpa") and r.get("tflops"):
            theirs[(r["dtype"], r["head_dim"], r["causal"], r["seq"])][r["impl"]] = r["tflops"]
    out = []
    for r in rows:
        peers = theirs.get((r["dtype"], r["head_dim"], r["causal"], r["seq"]))
        if r.get("auto") and peers and r.get("tflops"):
            out += [{**r, "impl": f"{r['impl']} / {peer}", "ratio": r["tflops"] / tf}
                    for peer, tf in peers.items()]
    return out


def plot(plt, data, ylabel, title, path, hline=None, ylog=True):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (group, impl), pts in sorted(data.items()):
        xs, ys = zip(*pts, strict=True)
        ax.plot(xs, ys, marker="o", linestyle="--" if impl.startswith("sdpa") else "-",
                label=f"{impl} ({group})")
    if hline:
        ax.axhline(hline[0], color="gray", linestyle="--", linewidth=1, label=hline[1])
    ax.set_xscale("log", base=2)
    if ylog:
        ax.set_yscale("log")
    ax.set_xlabel("sequence length")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # a sweep without naive has no memory lines
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=130)
    plt.close(fig)
    return path


def write_plots(rows, env, output_dir) -> list:
    """The plots of the timed rows into output_dir (created): the four, and versus_sdpa.png when
    rows of SDPA's backends compare with the impl="auto" rows; their paths. Rows not timed
    ('failed', 'skipped') are left out; ValueError when none is left."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r.get("status") == "ok"]
    if not rows:
        raise ValueError("no timed rows to plot")
    os.makedirs(output_dir, exist_ok=True)
    device = env.get("device", {})
    name = device.get("name", "GPU")
    peak = device.get("peak_fp16_tensor_tflops")
    ratios = series(versus(rows), "ratio")
    extra = [plot(plt, ratios, "gpuprofile TFLOP/s ÷ SDPA backend's (>1: ours faster)",
                  f'impl="auto" against torch SDPA, {name}', os.path.join(output_dir, "versus_sdpa.png"),
                  hline=(1.0, "parity"), ylog=False)] if ratios else []
    return [
        plot(plt, series(rows, "median_ms"), "median time (ms)", f"attention forward latency, {name}",
             os.path.join(output_dir, "latency.png")),
        plot(plt, series(rows, "tflops"), TFLOPS_LABEL,
             f"attention forward throughput, {name}", os.path.join(output_dir, "tflops.png"),
             hline=(peak, "fp16/bf16 tensor peak") if peak else None),
        plot(plt, series(speedups(rows), "speedup"), "speed-up over naive (×)",
             "speed-up over the naive three-kernel version", os.path.join(output_dir, "speedup.png")),
        plot(plt, series([r for r in rows if r.get("extra_memory_bytes")], "extra_memory_bytes"),
             "bytes beyond Q, K, V, O", "extra device memory per call (fused kernels: none)",
             os.path.join(output_dir, "memory.png")),
        *extra,
    ]
