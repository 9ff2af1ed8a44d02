"""The attention benchmark sweep: gpuprofile's attention kernels (and torch SDPA's backends, when
torch is installed) over sequence lengths, each validated before it is timed. Used by
`gpuprofile attention` and benchmarks/benchmark_attention.py (which print its table and write its
JSON); docs/attention.md explains the shapes, the tolerance and how to read the table.

Every implementation's output is first checked against a float64 reference on two (batch, head)
slices, with the derived tolerance; an implementation that fails is reported and not timed.
Timing uses gpuprofile.benchmark (cold L2, noise-based stopping). Shapes follow the
FlashAttention papers: batch·seq = 16k tokens and heads·head_dim = 2048. Without --impls and
--seq-lengths, attention_plan.py chooses them for the machine (on Hopper: up to flash_wgmma and
seq 16384, against SDPA's cuDNN, FlashAttention-2 and math backends).
"""

from __future__ import annotations

import contextlib
import sys
import time
import warnings

import numpy as np

from .. import _C
from .._C import _device_array_from_host
from .._format import text_table
from .._progress import progress
from .._version import __version__
from ..bench.benchmark import benchmark
from ..device import device_info
from . import IMPLS, attention_bytes, attention_flops, empty, release_workspace
from . import reference as ref
from .attention_plan import MIN_TIME_S, shape_for

# gpuprofile.kernels.IMPLEMENTATIONS and "auto". flash_wgmma runs on compute capability 9.0
# only, so it is not in the defaults (which run on any device); name it, or "auto" (what
# impl="auto" picks on this device), to time it.
OURS = IMPLS


SDPA_BACKENDS = {"sdpa": "FLASH_ATTENTION", "sdpa_flash": "FLASH_ATTENTION",
                 "sdpa_cudnn": "CUDNN_ATTENTION", "sdpa_efficient": "EFFICIENT_ATTENTION",
                 "sdpa_math": "MATH"}
DTYPES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16",
          "fp32": "float32", "float32": "float32"}
CHECKED_ROWS = 128  # query rows checked at each end of a slice beyond seq 2048
COLUMNS = ["impl", "D", "causal", "seq", "ms", "TFLOP/s", "GB/s", "%peak FLOP", "%peak BW", "noise %",
           "err/tol"]


def add_arguments(p) -> None:
    """The sweep's options, on an argparse parser (the script's and `gpuprofile attention`'s)."""
    p.add_argument("--seq-lengths", default=None, metavar="N,N,...",
                   help="sequence lengths (default: 512 to 16384 on Hopper, 128 to 2048 elsewhere)")
    p.add_argument("--impls", default=None,
                   help=f"comma list of {', '.join(OURS + tuple(SDPA_BACKENDS))} (default: ours up "
                        "to what impl='auto' picks here, then sdpa_cudnn, sdpa_flash, sdpa_math "
                        "with torch)")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--batch", type=int, default=None, help="default: 16384 // seq (at least 1)")
    p.add_argument("--heads", type=int, default=None, help="default: 2048 // head_dim")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--max-time", type=float, default=1.0,
                   help="seconds per timed benchmark at most (default 1.0)")


def finish_arguments(p, args):
    """Parsed sweep options in their final form (lists, the dtype's full name; None where the
    machine's plan decides); p.error() (exit 2) for a bad one."""
    if args.seq_lengths is not None:
        try:
            args.seq_lengths = [int(s) for s in args.seq_lengths.split(",") if s.strip()]
        except ValueError:
            p.error(f"--seq-lengths must be integers separated by commas, got {args.seq_lengths!r}")
        if not args.seq_lengths or min(args.seq_lengths) < 1:
            p.error("--seq-lengths needs at least one length, each >= 1")
    if args.impls is not None:
        args.impls = [s.strip() for s in args.impls.split(",") if s.strip()]
        unknown = [i for i in args.impls if i not in OURS + tuple(SDPA_BACKENDS)]
        if unknown or not args.impls:
            p.error(f"unknown impls {unknown}; choose from {OURS + tuple(SDPA_BACKENDS)}")
    if not args.max_time >= MIN_TIME_S:  # NaN too
        p.error(f"--max-time must be >= {MIN_TIME_S} (the benchmark's min_time), got {args.max_time}")
    args.dtype = DTYPES[args.dtype]
    return args


def title_for(args) -> str:
    b, h, _, d = shape_for(args.seq_lengths[0], args.head_dim, args.batch, args.heads)
    return (f"attention forward, {args.dtype}, head_dim {d}, heads {h}, "
            f"{'causal' if args.causal else 'non-causal'}, batch "
            f"{'16384 // seq' if args.batch is None else b}; TFLOP/s = 4·B·H·N²·D"
            f"{' / 2 (causal)' if args.causal else ''} per call / median time")


def random_inputs(shape, dtype, drawn=None):
    """(Q, K, V as float32 host arrays of `shape`, the same as the device stores them): standard
    normal numbers rounded to dtype; bfloat16 is stored as its uint16 bit patterns. `drawn` (a
    dict) keeps both by element count: the default shapes of a sweep all hold 16384 · 2048
    elements, and reshaping independent random numbers leaves them independent, so a sweep draws
    and converts them once (about 4 s of host time on a 2-core VM for bf16, per draw)."""
    size = int(np.prod(shape))
    key = (size, dtype)
    if drawn is None or key not in drawn:
        rng = np.random.default_rng()
        host = [ref.round_to(rng.standard_normal(size, dtype=np.float32), dtype) for _ in range(3)]
        stored = [ref.bfloat16_bits(x) if dtype == "bfloat16" else x.astype(dtype) for x in host]
        if drawn is None:
            drawn = {}
        drawn.clear()  # one set at a time bounds the host memory
        drawn[key] = host, stored
    host, stored = drawn[key]
    return [x.reshape(shape) for x in host], [x.reshape(shape) for x in stored]


class Inputs:
    """Random Q, K, V (rounded to the dtype) on the host and as DeviceArrays, plus torch views of
    the same device memory when torch is installed, and reusable outputs."""

    def __init__(self, shape, dtype, torch=None, drawn=None):
        self.shape, self.dtype = shape, dtype
        self.host, stored = random_inputs(shape, dtype, drawn)
        self.device = [_device_array_from_host(x, dtype) for x in stored]
        self.out = empty(shape, dtype)
        self.torch = [torch.from_dlpack(x) for x in self.device] if torch else None
        self._expected = {}

    def poison(self):
        """Fills the output with NaN: bytes 0xFF are a NaN in float32, float16 and bfloat16 alike
        (a memset on the device, where converting a host array of NaN took 0.6 s at 16k tokens)."""
        _C._device_memset(self.out.ptr, 0xFF, self.out.nbytes)

    def expected(self, causal):
        """{(batch, head, first row): (float64 reference, tolerance)} for the blocks every output
        is checked on: the first and the last (batch, head) slice, all their query rows up to
        seq 2048, beyond that their first and last CHECKED_ROWS rows (the reference of a whole
        16k slice takes gigabytes and seconds); computed once per input set."""
        if causal not in self._expected:
            n = self.shape[2]
            firsts = [0] if n <= 2048 else [0, n - CHECKED_ROWS]
            slices = sorted({(0, 0), (self.shape[0] - 1, self.shape[1] - 1)})
            self._expected[causal] = {}
            for b, h in slices:
                k, v = (x[b, h] for x in self.host[1:])
                for first in firsts:
                    q = self.host[0][b, h, first:first + (n if n <= 2048 else CHECKED_ROWS)]
                    want = ref.reference(q, k, v, causal, first_row=first)
                    tol = ref.tolerance(q, k, v, self.dtype, causal, ref=want, first_row=first)
                    self._expected[causal][b, h, first] = want, tol
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
    for (b, h, first), (want, tol) in inp.expected(causal).items():
        got = out[b, h, first:first + len(want)]
        err = ref.max_error(got, want) if np.isfinite(got).all() else float("inf")
        ok &= err <= tol
        if err / tol >= worst_err / max(worst_tol, 1e-30):
            worst_err, worst_tol = err, tol
    return ok, worst_err, worst_tol


def peak_for(impl, dtype):
    """Which compute peak % of peak refers to: fp32 CUDA cores or fp16/bf16 tensor cores."""
    return "fp32" if dtype == "float32" or impl == "flash" else "fp16_tensor"


def time_it(fn, name, flops, nbytes, peak, max_time):
    """One timing. A warning of the benchmark (noise above its target at max_time) goes into the
    row's `warnings`, not across the progress bar: the table's noise column shows it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        r = benchmark(fn, flops=flops, bytes=nbytes, name=name, max_time=max_time, peak=peak)
    return {"timer": "gpuprofile.benchmark", "median_ms": r.median_ms, "tflops": r.tflops,
            "gbps": r.gbps, "pct_peak_flops": r.pct_peak_flops, "pct_peak_bw": r.pct_peak_bw,
            "rel_noise": r.rel_noise, "bound": r.bound, "benchmark": r.to_dict(samples=False),
            "warnings": [str(w.message) for w in caught]}

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
    head = [r["impl"] + (" (auto)" if r.get("auto") else ""), r.get("head_dim"), r.get("causal"), r["seq"]]
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


def run_all(impls, seqs, dtype, head_dim, causal, batch, heads, max_time, torch, log=None,
            left_out=None, auto=None):
    """One row per (seq, impl), in that order. left_out: {(impl, seq): why} not to run (a
    'skipped' row says why); auto: {seq: impl} what impl="auto" picks, marked in its row (as
    is a row of impl "auto" itself). Each
    case's status goes to `log` (default: a line on stderr); a progress display follows the sweep
    when it lasts more than a couple of seconds."""
    if log is None:
        def log(line):
            print(line, file=sys.stderr, flush=True)
    left_out, auto = left_out or {}, auto or {}
    rows, drawn = [], {}
    with progress(len(seqs) * len(impls), "attention sweep") as bar:
        for seq in seqs:
            inp = Inputs(shape_for(seq, head_dim, batch, heads), dtype, torch, drawn)
            for impl in impls:
                bar.set_note(f"{impl} seq={seq}")
                if (impl, seq) in left_out:
                    rows.append({"impl": impl, "seq": seq, "status": f"skipped: {left_out[impl, seq]}"})
                elif impl in SDPA_BACKENDS and torch is None:
                    rows.append({"impl": impl, "seq": seq, "status": "skipped: torch not installed"})
                else:
                    rows.append(run_case(impl, inp, causal, max_time, torch))
                r = rows[-1]
                if impl == "auto" or auto.get(seq) == impl:
                    r["auto"] = True
                log(f"  {impl:>14} seq={seq:<6} {r.get('status')}"
                    + (f"  {r['median_ms']:.4g} ms  {r['tflops']:.4g} TFLOP/s" if r.get("status") == "ok" else ""))
                bar.update()
            del inp
            release_workspace()
    return rows


PEER_LABELS = {"sdpa_cudnn": "cuDNN", "sdpa_flash": "FA2", "sdpa": "FA2", "sdpa_math": "math",
               "sdpa_efficient": "efficient"}


def versus_rows(rows):
    """Per seq: gpuprofile's row that impl="auto" picked against each SDPA backend timed at that
    seq: [(seq, our impl, our TFLOP/s, {backend: (TFLOP/s, ours / theirs)}, SM clock MHz)]."""
    ok = [r for r in rows if r.get("status") == "ok"]
    out = []
    for ours in (r for r in ok if r.get("auto")):
        peers = {r["impl"]: (r["tflops"], ours["tflops"] / r["tflops"]) for r in ok
                 if r["impl"] in SDPA_BACKENDS and r["seq"] == ours["seq"] and r["tflops"]}
        if peers:
            clock = (ours.get("benchmark") or {}).get("sm_clock_mhz_end")
            out.append((ours["seq"], ours["impl"], ours["tflops"], peers, clock))
    return out


def versus_table(rows, causal=False) -> str | None:
    """gpuprofile (what impl="auto" picks) against torch SDPA's backends, per seq: TFLOP/s of each
    and ours over theirs; None when nothing compares."""
    compared = versus_rows(rows)
    if not compared:
        return None
    peers = [p for p in PEER_LABELS if any(p in c[3] for c in compared)]
    columns = ["seq", "gp impl", "gp TFLOP/s", *(f"{PEER_LABELS[p]} TFLOP/s" for p in peers),
               *(f"gp/{PEER_LABELS[p]}" for p in peers), "SM MHz"]
    body = [[seq, impl, tf, *(c.get(p, (None,))[0] for p in peers),
             *(c.get(p, (None, None))[1] for p in peers), clock]
            for seq, impl, tf, c, clock in compared]
    return text_table(columns, body, title="gpuprofile (impl=\"auto\") against torch SDPA: "
                      f"TFLOP/s = 4·B·H·N²·D{' / 2' if causal else ''} / median time; gp/X > 1: ours faster")


def all_ok(rows) -> bool:
    """Every row of ours was validated and timed (SDPA backends may refuse a shape)."""
    return all(r.get("status", "").startswith(("ok", "skipped")) or r["impl"] in SDPA_BACKENDS
               for r in rows)
