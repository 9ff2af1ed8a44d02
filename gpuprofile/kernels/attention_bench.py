"""The attention benchmark sweep: gpuprofile's attention kernels (and torch SDPA's backends, when
torch is installed) over sequence lengths, each validated before it is timed. Used by
`gpuprofile attention` and benchmarks/benchmark_attention.py (which print its table and write its
JSON); docs/attention.md explains the shapes, the tolerance and how to read the table.

Every implementation's output is first checked against a float64 reference on two (batch, head)
slices, with the derived tolerance; an implementation that fails is reported and not timed.
Timing uses gpuprofile.benchmark (cold L2, noise-based stopping). Defaults follow the
FlashAttention papers: batch·seq = 16k tokens and heads·head_dim = 2048.
"""

from __future__ import annotations

import contextlib
import sys
import time

import numpy as np

from .. import _C
from .._format import text_table
from .._progress import progress
from .._version import __version__
from ..bench.benchmark import benchmark
from ..device import device_info
from . import IMPLS, attention_bytes, attention_flops, empty, release_workspace, to_device
from . import reference as ref

# gpuprofile.kernels.IMPLEMENTATIONS and "auto". flash_wgmma runs on compute capability 9.0
# only, so it is not in the defaults (which run on any device); name it, or "auto" (what
# impl="auto" picks on this device), to time it.
OURS = IMPLS


SDPA_BACKENDS = {"sdpa": "FLASH_ATTENTION", "sdpa_flash": "FLASH_ATTENTION",
                 "sdpa_cudnn": "CUDNN_ATTENTION", "sdpa_efficient": "EFFICIENT_ATTENTION",
                 "sdpa_math": "MATH"}
DTYPES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16",
          "fp32": "float32", "float32": "float32"}
COLUMNS = ["impl", "D", "causal", "seq", "ms", "TFLOP/s", "GB/s", "%peak FLOP", "%peak BW", "noise %",
           "err/tol"]


def add_arguments(p) -> None:
    """The sweep's options, on an argparse parser (the script's and `gpuprofile attention`'s)."""
    p.add_argument("--seq-lengths", default="128,256,512,1024,2048", metavar="N,N,...",
                   help="sequence lengths (default 128,256,512,1024,2048)")
    p.add_argument("--impls", default="naive,flash,flash_tc,sdpa",
                   help=f"comma list of {', '.join(OURS + tuple(SDPA_BACKENDS))}")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--batch", type=int, default=None, help="default: 16384 // seq (at least 1)")
    p.add_argument("--heads", type=int, default=None, help="default: 2048 // head_dim")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--max-time", type=float, default=1.5, help="seconds per timed benchmark")


def finish_arguments(p, args):
    """Parsed sweep options in their final form (lists, the dtype's full name); p.error() (exit
    2) for a bad one."""
    try:
        args.seq_lengths = [int(s) for s in args.seq_lengths.split(",") if s.strip()]
    except ValueError:
        p.error(f"--seq-lengths must be integers separated by commas, got {args.seq_lengths!r}")
    if not args.seq_lengths or min(args.seq_lengths) < 1:
        p.error("--seq-lengths needs at least one length, each >= 1")
    args.impls = [s.strip() for s in args.impls.split(",") if s.strip()]
    unknown = [i for i in args.impls if i not in OURS + tuple(SDPA_BACKENDS)]
    if unknown or not args.impls:
        p.error(f"unknown impls {unknown}; choose from {OURS + tuple(SDPA_BACKENDS)}")
    args.dtype = DTYPES[args.dtype]
    return args


def title_for(args) -> str:
    b, h, _, d = shape_for(args.seq_lengths[0], args.head_dim, args.batch, args.heads)
    return (f"attention forward, {args.dtype}, head_dim {d}, heads {h}, "
            f"{'causal' if args.causal else 'non-causal'}, batch "
            f"{'16384 // seq' if args.batch is None else b}")

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
        self.device = [to_device(x, dtype) for x in self.host]
        self.out = empty(shape, dtype)
        self.torch = [torch.from_dlpack(x) for x in self.device] if torch else None
        self._expected = {}

    def poison(self):
        self.out = to_device(np.full(self.shape, np.nan, dtype=np.float32), self.dtype)

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
    return lambda: _C._attention(*inp.device, inp.out, impl=impl, causal=causal)


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
    return "fp32" if dtype == "float32" or impl == "flash" else "fp16_tensor"


def time_it(fn, name, flops, nbytes, peak, max_time):
    r = benchmark(fn, flops=flops, bytes=nbytes, name=name, max_time=max_time, peak=peak)
    return {"timer": "gpuprofile.benchmark", "median_ms": r.median_ms, "tflops": r.tflops,
            "gbps": r.gbps, "pct_peak_flops": r.pct_peak_flops, "pct_peak_bw": r.pct_peak_bw,
            "rel_noise": r.rel_noise, "bound": r.bound, "benchmark": r.to_dict(samples=False)}

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
           "causal": causal, "flops": attention_flops(b, h, n, d, causal),
           # the naive model for our naive kernels; the compulsory traffic for everything else
           "bytes": attention_bytes(b, h, n, d, inp.dtype, "naive" if impl == "naive" else "flash")}
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


def table(rows, title) -> str:
    return text_table(COLUMNS, [table_row(r) for r in rows], title=title)


def print_table(rows, title):
    print(table(rows, title), flush=True)


def import_torch():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def environment(torch):
    return {"device": device_info().to_dict(), "gpuprofile": __version__,
            "torch": torch.__version__ if torch else None, "timer": "gpuprofile.benchmark",
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "argv": sys.argv}


def run_all(impls, seqs, dtype, head_dim, causal, batch, heads, max_time, torch, log=None):
    """One row per (seq, impl), in that order. Each case's status goes to `log` (default: a line
    on stderr); a progress display follows the sweep when it lasts more than a couple of seconds."""
    if log is None:
        def log(line):
            print(line, file=sys.stderr, flush=True)
    rows = []
    with progress(len(seqs) * len(impls), "attention sweep") as bar:
        for seq in seqs:
            inp = Inputs(shape_for(seq, head_dim, batch, heads), dtype, torch)
            for impl in impls:
                bar.set_note(f"{impl} seq={seq}")
                if impl in SDPA_BACKENDS and torch is None:
                    rows.append({"impl": impl, "seq": seq, "status": "skipped: torch not installed"})
                else:
                    rows.append(run_case(impl, inp, causal, max_time, torch))
                r = rows[-1]
                log(f"  {impl:>14} seq={seq:<6} {r.get('status')}"
                    + (f"  {r['median_ms']:.4g} ms  {r['tflops']:.4g} TFLOP/s" if r.get("status") == "ok" else ""))
                bar.update()
            del inp
            release_workspace()
    return rows


def all_ok(rows) -> bool:
    """Every row of ours was validated and timed (SDPA backends may refuse a shape)."""
    return all(r.get("status", "").startswith(("ok", "skipped")) or r["impl"] in SDPA_BACKENDS
               for r in rows)
