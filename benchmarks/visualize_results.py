"""Plots of benchmark_attention.py results (matplotlib).

    python benchmarks/visualize_results.py --input results.json --output-dir plots/

Writes latency.png (ms vs seq length), tflops.png (TFLOP/s vs seq length, with the device's
peak), speedup.png (speed-up over naive at each seq length), memory.png (device memory each
implementation needs beyond Q, K, V and O) and, when the file has torch SDPA rows to compare with,
versus_sdpa.png (impl="auto"'s pick over each SDPA backend). Log-log axes; one line per implementation, for each
(dtype, head_dim, causal) group found in the file. Only timed, validated rows are drawn. The
plotting lives in gpuprofile/kernels/attention_plots.py (`gpuprofile attention --plots` uses it).
"""

from __future__ import annotations

import argparse
import sys

from gpuprofile.kernels.attention_plots import load_rows, series, speedups, write_plots  # noqa: F401


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", required=True)
    p.add_argument("--output-dir", default="plots")
    args = p.parse_args(argv)
    rows, env = load_rows(args.input)
    try:
        written = write_plots(rows, env, args.output_dir)
    except ValueError as e:
        print(f"{args.input}: {e}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
