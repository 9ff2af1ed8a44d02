"""Benchmark gpuprofile's attention kernels (and torch SDPA's backends, when torch is installed).

    python benchmarks/benchmark_attention.py --seq-lengths 128,256,512,1024,2048 \\
        --impls naive,flash,flash_tc,sdpa,sdpa_cudnn --dtype bf16 --head-dim 64 --output r.json

Every implementation's output is first checked against a float64 reference on two (batch, head)
slices, with the derived tolerance (docs/attention.md); an implementation that fails is reported
and not timed. Timing uses gpuprofile.benchmark (cold L2, noise-based stopping) where it exists,
else CUDA-event regions with warm caches (the JSON says which). Prints a table, writes JSON.
Defaults follow the FlashAttention papers: batch·seq = 16k tokens and heads·head_dim = 2048.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time

import numpy as np

import gpuprofile as gp
from gpuprofile import _C, kernels
from gpuprofile._format import text_table
from gpuprofile.kernels import reference as ref

MAX_VARIANT = _C.ATTENTION_MAX_VARIANT
# "<impl>_v<N>": impl with variant=N, the alternative tiles kept for tuning (kernels/attention/NOTES.md)
VARIANTS = tuple(f"flash_tc_v{i}" for i in range(1, MAX_VARIANT + 1)) + ("flash_v1",)
OURS = ("naive", "flash", "flash_tc") + VARIANTS


def split_variant(impl):
    """'flash_tc_v3' -> ('flash_tc', 3); 'naive' -> ('naive', 0)."""
    base, sep, num = impl.rpartition("_v")
    return (base, int(num)) if sep and impl in VARIANTS else (impl, 0)
SDPA_BACKENDS = {"sdpa": "FLASH_ATTENTION", "sdpa_flash": "FLASH_ATTENTION",
                 "sdpa_cudnn": "CUDNN_ATTENTION", "sdpa_efficient": "EFFICIENT_ATTENTION",
                 "sdpa_math": "MATH"}
DTYPES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16",
          "fp32": "float32", "float32": "float32"}
COLUMNS = ["impl", "D", "causal", "seq", "ms", "TFLOP/s", "GB/s", "%peak FLOP", "%peak BW", "noise %",
           "err/tol"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seq-lengths", default="128,256,512,1024,2048")
    p.add_argument("--impls", default="naive,flash,flash_tc,sdpa",
                   help=f"comma list of {', '.join(OURS + tuple(SDPA_BACKENDS))}")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--batch", type=int, default=None, help="default: 16384 // seq (at least 1)")
    p.add_argument("--heads", type=int, default=None, help="default: 2048 // head_dim")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--max-time", type=float, default=1.5, help="seconds per timed benchmark")
    p.add_argument("--output", default=None, help="JSON file for the results")
    args = p.parse_args(argv)
    args.seq_lengths = [int(s) for s in args.seq_lengths.split(",") if s]
    args.impls = [s.strip() for s in args.impls.split(",") if s.strip()]
    unknown = [i for i in args.impls if i not in OURS + tuple(SDPA_BACKENDS)]
    if unknown:
        p.error(f"unknown impls {unknown}; choose from {OURS + tuple(SDPA_BACKENDS)}")
    args.dtype = DTYPES[args.dtype]
    return args


def shape_for(seq, head_dim, batch=None, heads=None):
    return (batch or max(1, 16384 // seq), heads or max(1, 2048 // head_dim), seq, head_dim)


class Inputs:
    """Random Q, K, V (rounded to the dtype) on the host and as DeviceArrays, plus torch views of
    the same device memory when torch is installed, and reusable outputs."""

    def __init__(self, shape, dtype, torch=None):
        rng = np.random.default_rng()
        self.shape, self.dtype = shape, dtype
        self.host = [ref.round_to(rng.standard_normal(shape, dtype=np.float32), dtype)
                     for _ in range(3)]
        self.device = [kernels.to_device(x, dtype) for x in self.host]
        self.out = kernels.empty(shape, dtype)
        self.torch = [torch.from_dlpack(x) for x in self.device] if torch else None
        self._expected = {}

    def poison(self):
        self.out = kernels.to_device(np.full(self.shape, np.nan, dtype=np.float32), self.dtype)

    def expected(self, causal):
        """{(batch, head): (float64 reference, tolerance)} for the slices every output is checked
        on, the first and the last; computed once per input set."""
        if causal not in self._expected:
            slices = sorted({(0, 0), (self.shape[0] - 1, self.shape[1] - 1)})
            self._expected[causal] = {}
            for b, h in slices:
                q, k, v = (x[b, h] for x in self.host)
                want = ref.reference(q, k, v, causal)
                self._expected[causal][b, h] = want, ref.tolerance(q, k, v, self.dtype, causal, ref=want)
        return self._expected[causal]


def call_ours(impl, inp, causal):
    name, variant = split_variant(impl)
    return lambda: _C._attention(*inp.device, inp.out, impl=name, causal=causal, variant=variant)


def call_sdpa(inp, causal):
    import torch.nn.functional as F

    return lambda: F.scaled_dot_product_attention(*inp.torch, is_causal=causal)


def sdpa_context(impl):
    if impl not in SDPA_BACKENDS:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[impl]))


def validate(impl, inp, causal):
    """Runs impl once into a poisoned output; returns (ok, worst error, its tolerance)."""
    if impl in OURS:
        inp.poison()
        call_ours(impl, inp, causal)()
        out = inp.out.numpy()
    else:
        with sdpa_context(impl):
            out = call_sdpa(inp, causal)().float().cpu().numpy()
    worst_err, worst_tol, ok = 0.0, 0.0, True
    for (b, h), (want, tol) in inp.expected(causal).items():
        got = out[b, h]
        err = ref.max_error(got, want) if np.isfinite(got).all() else float("inf")
        ok &= err <= tol
        if err / tol >= worst_err / max(worst_tol, 1e-30):
            worst_err, worst_tol = err, tol
    return ok, worst_err, worst_tol


def peak_for(impl, dtype):
    """Which compute peak % of peak refers to: fp32 CUDA cores or fp16/bf16 tensor cores."""
    return "fp32" if dtype == "float32" or split_variant(impl)[0] == "flash" else "fp16_tensor"


def time_it(fn, name, flops, nbytes, peak, max_time):
    bench = getattr(gp, "benchmark", None)
    if bench is None:
        return time_with_regions(fn, name, flops, nbytes, peak)
    try:
        r = bench(fn, flops=flops, bytes=nbytes, name=name, max_time=max_time, peak=peak)
    except TypeError:  # a benchmark without the peak option
        r = bench(fn, flops=flops, bytes=nbytes, name=name, max_time=max_time)
    return {"timer": "gpuprofile.benchmark", "median_ms": r.median_ms, "tflops": r.tflops,
            "gbps": r.gbps, "pct_peak_flops": r.pct_peak_flops, "pct_peak_bw": r.pct_peak_bw,
            "rel_noise": r.rel_noise, "bound": getattr(r, "bound", None),
            "benchmark": r.to_dict(samples=False)}


def time_with_regions(fn, name, flops, nbytes, peak, warmup=5, iters=30):
    """Fallback timer: CUDA-event regions around each call, warm caches, median of `iters`."""
    for _ in range(warmup):
        fn()
    gp.reset()
    for _ in range(iters):
        with gp.region(name):
            fn()
    s = gp.stats(name)
    samples = np.asarray(s.samples_ms)
    info = gp.device_info()
    peak_tflops = info.peak_fp32_tflops if peak == "fp32" else info.peak_fp16_tensor_tflops
    tflops = flops / (s.median_ms * 1e-3) / 1e12
    gbps = nbytes / (s.median_ms * 1e-3) / 1e9
    q1, q3 = np.percentile(samples, [25, 75])
    return {"timer": "gpuprofile regions (CUDA events, warm L2)", "median_ms": s.median_ms,
            "tflops": tflops, "gbps": gbps,
            "pct_peak_flops": 100 * tflops / peak_tflops if peak_tflops else None,
            "pct_peak_bw": 100 * gbps / info.peak_dram_gbps, "rel_noise": (q3 - q1) / 2 / s.median_ms,
            "bound": None}


def extra_memory(impl, inp, causal, torch):
    """Device memory the call needs beyond Q, K, V and O: exact for ours (the naive workspace),
    torch's allocator peak for SDPA. Returns (bytes, how it was obtained)."""
    if impl == "naive":
        b, h, n, _ = inp.shape
        return b * h * n * ((n + 7) // 8 * 8) * 4, "allocated (exact)"
    if impl in OURS:
        return 0, "allocated (exact)"
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with sdpa_context(impl):
        out = call_sdpa(inp, causal)()
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base - out.numel() * out.element_size()
    return max(0, extra), "torch.cuda.max_memory_allocated"


def run_case(impl, inp, causal, max_time, torch):
    b, h, n, d = inp.shape
    row = {"impl": impl, "batch": b, "heads": h, "seq": n, "head_dim": d, "dtype": inp.dtype,
           "causal": causal, "flops": kernels.attention_flops(b, h, n, d, causal),
           # the naive model for our naive kernels; the compulsory traffic for everything else
           "bytes": kernels.attention_bytes(b, h, n, d, inp.dtype, "naive" if impl == "naive" else "flash")}
    try:
        ok, err, tol = validate(impl, inp, causal)
    except Exception as exc:  # an SDPA backend that does not take this shape, or a kernel error
        return {**row, "status": f"failed: {type(exc).__name__}: {exc}".splitlines()[0][:200]}
    row.update(max_error=err, tolerance=tol, validated=bool(ok))
    if not ok:
        return {**row, "status": "wrong result: not timed"}
    fn = call_ours(impl, inp, causal) if impl in OURS else call_sdpa(inp, causal)
    name = f"{impl} seq={n}"
    with sdpa_context(impl):
        row.update(time_it(fn, name, row["flops"], row["bytes"], peak_for(impl, inp.dtype),
                           max_time))
    row["extra_memory_bytes"], row["extra_memory_source"] = extra_memory(impl, inp, causal, torch)
    row["status"] = "ok"
    return row


def table_row(r):
    head = [r["impl"], r.get("head_dim"), r.get("causal"), r["seq"]]
    ratio = r["max_error"] / r["tolerance"] if "max_error" in r else None
    if r.get("status") != "ok":
        return head + [r.get("status", "")[:48], None, None, None, None, None, ratio]
    noise = None if r["rel_noise"] is None else 100 * r["rel_noise"]
    return head + [r["median_ms"], r["tflops"], r["gbps"], r["pct_peak_flops"], r["pct_peak_bw"],
                   noise, ratio]


def print_table(rows, title):
    print(text_table(COLUMNS, [table_row(r) for r in rows], title=title), flush=True)


def import_torch():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def environment(torch):
    info = gp.device_info()
    return {"device": info.to_dict(), "gpuprofile": gp.__version__,
            "torch": torch.__version__ if torch else None,
            "timer": "gpuprofile.benchmark" if hasattr(gp, "benchmark") else "regions fallback",
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "argv": sys.argv}


def run_all(impls, seqs, dtype, head_dim, causal, batch, heads, max_time, torch, title=""):
    rows = []
    for seq in seqs:
        inp = Inputs(shape_for(seq, head_dim, batch, heads), dtype, torch)
        for impl in impls:
            if impl in SDPA_BACKENDS and torch is None:
                rows.append({"impl": impl, "seq": seq, "status": "skipped: torch not installed"})
                continue
            rows.append(run_case(impl, inp, causal, max_time, torch))
            r = rows[-1]
            print(f"  {impl:>14} seq={seq:<6} {r.get('status')}"
                  + (f"  {r['median_ms']:.4g} ms  {r['tflops']:.4g} TFLOP/s" if r.get("status") == "ok" else ""),
                  flush=True)
        del inp
        kernels.release_workspace()
    return rows


def main(argv=None):
    args = parse_args(argv)
    if gp.device_count() == 0:
        print("benchmark_attention.py needs a CUDA device", file=sys.stderr)
        return 2
    torch = import_torch()
    b, h, _, d = shape_for(args.seq_lengths[0], args.head_dim, args.batch, args.heads)
    title = (f"attention forward, {args.dtype}, head_dim {d}, heads {h}, "
             f"{'causal' if args.causal else 'non-causal'}, batch {'16384 // seq' if args.batch is None else b}")
    rows = run_all(args.impls, args.seq_lengths, args.dtype, args.head_dim, args.causal,
                   args.batch, args.heads, args.max_time, torch)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump({"config": {**vars(args), **environment(torch)}, "results": rows}, f, indent=1)
    print_table(rows, title)
    return 0 if all(r.get("status", "").startswith(("ok", "skipped")) or r["impl"] in SDPA_BACKENDS
                    for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
