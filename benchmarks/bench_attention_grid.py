"""flash_wgmma's schedules against torch SDPA's cuDNN and FlashAttention-2 backends on a grid of
shapes (issue 27 item 1: at or above cuDNN on short sequences and head_dim 64).

    python benchmarks/bench_attention_grid.py --quick --output /tmp/grid.json
    python benchmarks/bench_attention_grid.py --variants gp,gp_persist,cudnn --output grid.json
    python benchmarks/bench_attention_grid.py --causal yes --head-dims 64 --variants gp,cudnn

Grid: N in {512, 1k, 2k, 4k, 8k, 16k} x head_dim {64, 128} x causal or not x fp16/bf16, with
batch = 16384 // N and heads = 2048 // head_dim (the FlashAttention papers' shapes: 16k tokens,
every shape fills an H100 many times over), then the one-wave cases: a few heads, so the fixed
192-row (128-row at head_dim 128) blocks number at most 132 (one per SM). --quick runs 14 cases
(about a minute on an H200): the shapes where the fixed schedule was furthest behind cuDNN (issue
27 and the 2026-11-26 grid: N <= 1024 at head_dim 64, causal or not, (1, 1, 16384, 64)), each
edge of the per-shape rule, and the one-wave shapes.

Per shape, in one process and interleaved: each gpuprofile variant (flash_wgmma through
_C._testing.attention_wgmma: gp is the default, the schedule chosen per shape, named in the
table's schedule column; then each schedule of gp.kernels.WGMMA_SCHEDULES forced, gp_<name>, at
the head_dims it takes; a configuration this build does not have is skipped: the shipped build
has what the rule runs, GPUPROFILE_ATTN_LAB=1 builds every one), then
SDPA with the CUDNN_ATTENTION and FLASH_ATTENTION backends (torch.nn.attention.sdpa_kernel) on the
same device memory. Everything is timed by gpuprofile.benchmark the same way (L2 flushed before
every iteration, CUPTI kernel times where CUPTI is usable, else CUDA events; the median), --rounds
times (3) in an order rotated each round, each timing at most --max-time seconds, after its output
was checked against the float64 reference (every row of the first and last (batch, head) up to
N = 4096; beyond, their first 512 rows, and for non-causal also the last 512). TFLOP/s count
4·B·H·N²·D FLOPs (halved when causal) over the median of the rounds' times; % is of 989 TFLOP/s
(H100 SXM dense fp16/bf16). The ratio to cuDNN is the median of the rounds' ratios, each of two
timings taken next to each other: a GPU that heats up and lowers its clock during a long shape
favours whichever runs first, and with one timing each in a fixed order the same kernel read
0.972 and 1.031 of cuDNN at (1, 16, 16384, 128) fp16 in two runs of one H100 (2026-11-27). The SM
clock is gpuprofile's reading before and after each timing (the range over the rounds), and a row
whose clock is more than 5 % off cuDNN's on the same case is marked "!" (its ratio compares
different clocks; clock_vs_cudnn in the JSON). Prints a table, writes JSON (--output).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
import warnings

import numpy as np

from gpuprofile._C import _testing
from gpuprofile.kernels import WGMMA_SCHEDULES

PEAK_TFLOPS = 989.0  # H100 SXM, dense fp16/bf16 tensor cores (datasheet)
# name: (schedule, O store) of _C._testing.attention_wgmma: gp the default (the schedule per
# shape, _C._testing.attention_wgmma_schedule), gp_<name> each row of the table of schedules
# (gp.kernels.WGMMA_SCHEDULES) forced; gp_out_smem and gp_out_regs the schedule per shape with O
# forced out through shared memory and TMA or from registers (otherwise chosen per shape and
# schedule, _C._testing.attention_wgmma_out; a GPUPROFILE_ATTN_LAB=1 build's only).
GP_VARIANTS = {"gp": ("per_shape", None),
               **{f"gp_{s.name}": (s.name, None) for s in WGMMA_SCHEDULES},
               "gp_out_smem": ("per_shape", "smem"), "gp_out_regs": ("per_shape", "regs")}
# the forced schedules, by name
SCHEDULES = tuple(s.name for s in WGMMA_SCHEDULES)
# variants that take only these head_dims
HEAD_DIMS = {f"gp_{s.name}": s.head_dims for s in WGMMA_SCHEDULES if s.head_dims != (64, 128)}
SDPA = {"cudnn": "sdpa_cudnn", "fa2": "sdpa_flash"}  # the main job's names of these backends
NAMES = tuple(GP_VARIANTS) + tuple(SDPA)
DEFAULT = tuple(n for n in NAMES if n not in ("gp_out_smem", "gp_out_regs"))  # --variants
SEQS = (512, 1024, 2048, 4096, 8192, 16384)
# One wave: (batch, heads, seq, head_dim); the default blocks (192 rows at head_dim 64, 128 at
# 128) number 3·43 = 129, 2·64 = 128, 1·86 = 86 and 4·32 = 128, at most an H100's 132 SMs.
ONE_WAVE = ((1, 3, 8192, 64), (1, 2, 8192, 128), (1, 1, 16384, 64), (1, 4, 4096, 128))
# (shape, dtype, causal): issue 27's worst (fixed/cuDNN 0.79, 0.87, 0.96 then); the 2026-11-26
# grid's worst for the fixed schedule (0.70 causal and 0.74 at N = 512, 0.73 causal at 1024,
# 0.68 at (1, 1, 16384, 64), 0.74 at N = 512, head_dim 128); the rule's edges (causal 4096 back
# to fixed, head_dim 128 at 1024, its edge until 2026-11-26, seventh session); the one-wave
# shapes (1, 3, 8192, 64) causal, where bm128 led (1.14 against 0.94; the rule picks it since it
# weighs causal blocks by their key tiles), and (1, 2, 8192, 128).
QUICK = (((16, 12, 1024, 64), "bfloat16", False), ((8, 16, 2048, 64), "bfloat16", False),
         ((4, 16, 4096, 64), "float16", False), ((32, 32, 512, 64), "bfloat16", False),
         ((32, 32, 512, 64), "bfloat16", True), ((16, 32, 1024, 64), "bfloat16", True),
         ((4, 32, 4096, 64), "bfloat16", True), ((32, 16, 512, 128), "bfloat16", False),
         ((16, 16, 1024, 128), "bfloat16", False), ((1, 1, 16384, 64), "bfloat16", False),
         ((1, 1, 16384, 64), "bfloat16", True), ((1, 3, 8192, 64), "bfloat16", False),
         ((1, 3, 8192, 64), "bfloat16", True), ((1, 2, 8192, 128), "bfloat16", True))
CHECK_ROWS = 512  # rows checked per slice beyond FULL_CHECK
FULL_CHECK = 4096


def grid_cases(quick: bool):
    """[(shape, dtype, causal)] in run order."""
    if quick:
        return list(QUICK)
    cases = []
    for n in SEQS:
        for d in (64, 128):
            for dtype in ("bfloat16", "float16"):
                for causal in (False, True):
                    cases.append(((max(1, 16384 // n), 2048 // d, n, d), dtype, causal))
    for shape in ONE_WAVE:
        for causal in (False, True):
            cases.append((shape, "bfloat16", causal))
    return cases


def flops(shape, causal) -> float:
    b, h, n, d = shape
    f = 4.0 * b * h * n * n * d
    return f / 2 if causal else f


def parse_variants(text):
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in NAMES]
    if unknown or not names:
        raise ValueError(f"--variants: unknown {unknown}; choose from {', '.join(NAMES)}")
    return names


def parse_head_dims(text):
    dims = [s.strip() for s in text.split(",") if s.strip()]
    if not dims or any(d not in ("64", "128") for d in dims):
        raise ValueError(f"--head-dims: a comma list of 64 and 128, got {text!r}")
    return tuple(int(d) for d in dims)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="only the worst shapes (about a minute)")
    p.add_argument("--variants", default=",".join(DEFAULT),
                   help=f"comma list of {', '.join(NAMES)} (default: all but gp_out_*)")
    p.add_argument("--max-time", type=float, default=0.15, help="seconds per timing at most")
    p.add_argument("--rounds", type=int, default=3,
                   help="timings per implementation and case, the order rotated each round (default 3)")
    p.add_argument("--output", default=None, help="JSON file for the results")
    p.add_argument("--head-dims", default="64,128", help="comma list of head_dims to run (64, 128)")
    p.add_argument("--causal", choices=("both", "yes", "no"), default="both",
                   help="run the causal cases, the others, or both (default)")
    args = p.parse_args(argv)
    try:
        args.variants = parse_variants(args.variants)
        args.head_dims = parse_head_dims(args.head_dims)
    except ValueError as exc:
        p.error(str(exc))
    if not args.max_time > 0:
        p.error("--max-time must be > 0")
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    return args


# ---- the table (pure) ----------------------------------------------------------------------------

COLUMNS = ["shape (B,H,N,D)", "dtype", "causal", "impl", "schedule", "ms", "TFLOP/s", "% of 989",
           "/cuDNN", "SM MHz"]


# A row whose SM clock (the mean of its readings before and after the timing) is this far from
# cuDNN's on the same case is marked: its ratio compares timings at different clocks. An H100
# that throttled to 870-1350 MHz mid-grid gave ratios from 0.59 to 1.82 (2026-11-26,
# docs/results/attention_grid_throttled_h100_2026-11-26.txt); a sound grid marks a few rows at
# most, where one kernel draws more power than the other (then the clock is part of the result).
CLOCK_TOLERANCE = 0.05


def clocks_of(r):
    """The row's SM clock readings (before and after each of its timings) that were taken, in
    MHz."""
    pairs = r.get("round_mhz") or [(r.get("sm_mhz_start"), r.get("sm_mhz_end"))]
    return [c for pair in pairs for c in pair if c]


def mean_clock(r):
    clocks = clocks_of(r)
    return sum(clocks) / len(clocks) if clocks else None


def paired_ratios(r, base):
    """cuDNN's time over the row's, round by round (timings of one round ran next to each other,
    at about the same clock and temperature); None unless both have the same rounds."""
    mine, theirs = r.get("round_ms"), base.get("round_ms")
    if not mine or not theirs or len(mine) != len(theirs):
        return None
    return [b / a for a, b in zip(mine, theirs, strict=True)]


def add_ratios(rows):
    """Each row's speed and SM clock against cuDNN's on the same case: vs_cudnn, the median of
    the rounds' paired ratios (paired_ratios; vs_cudnn_rounds has each), or with one timing each
    the ratio of their TFLOP/s, and clock_vs_cudnn (None where either is missing)."""
    cudnn = {r["case"]: r for r in rows if r["impl"] == "cudnn" and r.get("tflops")}
    for r in rows:
        base = cudnn.get(r["case"])
        rounds = paired_ratios(r, base) if base and r.get("tflops") else None
        if rounds:
            r["vs_cudnn_rounds"] = rounds
            r["vs_cudnn"] = float(np.median(rounds))
        else:
            r["vs_cudnn"] = r["tflops"] / base["tflops"] if base and r.get("tflops") else None
        mine, theirs = mean_clock(r), base and mean_clock(base)
        r["clock_vs_cudnn"] = mine / theirs if mine and theirs else None
    return rows


def clock_off(r):
    """Whether the row's SM clock is more than CLOCK_TOLERANCE off cuDNN's on its case."""
    x = r.get("clock_vs_cudnn")
    return x is not None and abs(x - 1.0) > CLOCK_TOLERANCE


def table_rows(rows):
    out = []
    for r in rows:
        head = [",".join(map(str, r["shape"])), "fp16" if r["dtype"] == "float16" else "bf16",
                "yes" if r["causal"] else "no", r["impl"],
                f"{r['schedule']} ({r['out']})" if r.get("out") else r.get("schedule")]
        if r.get("status") != "ok":
            out.append(head + [r.get("status", "")[:40], None, None, None, None])
            continue
        clocks = clocks_of(r)
        mhz = f"{min(clocks):.0f}-{max(clocks):.0f}" if clocks else None
        if mhz and clock_off(r):
            mhz += " !"
        out.append(head + [r["median_ms"], r["tflops"], r["pct_989"], r["vs_cudnn"], mhz])
    return out


def summary(rows):
    """Per impl: the cases it ran, how many at or above cuDNN, the worst and median ratio, and
    how many of those ratios compare different SM clocks (marked ! in the table)."""
    lines = []
    for impl in dict.fromkeys(r["impl"] for r in rows):
        mine = [r for r in rows if r["impl"] == impl and r.get("vs_cudnn")]
        ratios = [r["vs_cudnn"] for r in mine]
        if impl == "cudnn" or not ratios:
            continue
        off = sum(clock_off(r) for r in mine)
        lines.append(f"{impl}: >= cuDNN on {sum(x >= 1.0 for x in ratios)}/{len(ratios)} cases, "
                     f"worst {min(ratios):.3f}, median {float(np.median(ratios)):.3f}"
                     + (f", {off} at an SM clock more than {CLOCK_TOLERANCE:.0%} off cuDNN's (!)"
                        if off else ""))
    if any(clock_off(r) for r in rows):
        lines.append(f"!: the row's SM clock (mean of the readings before and after its timing) is "
                     f"more than {CLOCK_TOLERANCE:.0%} off cuDNN's on the same case: its ratio "
                     f"compares different clocks (a throttling GPU, or one kernel drawing more "
                     f"power than the other)")
    return lines


# ---- the GPU part ---------------------------------------------------------------------------------

def checked_slices(shape, causal):
    """[(b, h, q_rows, k_rows)]: what of the output is compared with the reference."""
    b, h, n, _ = shape
    every = slice(0, n)
    slices = sorted({(0, 0), (b - 1, h - 1)})
    if n <= FULL_CHECK:
        return [(bb, hh, every, every) for bb, hh in slices]
    first = slice(0, CHECK_ROWS)
    out = [(bb, hh, first, first if causal else every) for bb, hh in slices]
    if not causal:
        out += [(bb, hh, slice(n - CHECK_ROWS, n), every) for bb, hh in slices]
    return out


class Case:
    """Inputs of one (shape, dtype) on the device, an output, and the references of the checked
    rows per causal. With torch the inputs are drawn on the device and every implementation reads
    the same torch tensors (gpuprofile through DLPack); without it, from NumPy into DeviceArrays
    (slower at 16k tokens: host random numbers and copies)."""

    def __init__(self, shape, dtype, torch):
        from gpuprofile import kernels
        from gpuprofile.kernels import reference as ref

        self.shape, self.dtype, self._torch = shape, dtype, torch
        if torch is not None:
            gen = torch.Generator(device="cuda").manual_seed(0)
            tdt = {"bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
            self.device = [torch.randn(shape, generator=gen, device="cuda").to(tdt) for _ in range(3)]
            self.torch = self.device
            self.out = torch.empty(shape, dtype=tdt, device="cuda")
        else:
            rng = np.random.default_rng(0)
            self.host = [ref.round_to(rng.standard_normal(shape, dtype=np.float32), dtype)
                         for _ in range(3)]
            self.device = [kernels.to_device(x, dtype) for x in self.host]
            self.torch = None
            self.out = kernels.empty(shape, dtype)
        self._want = {}

    def rows_of(self, x, b, h, rows):
        """x[b, h, rows] as float32 NumPy (x: an input or the output, torch's or ours)."""
        if self._torch is not None:
            return x[b, h, rows].float().cpu().numpy()
        return x[b, h, rows] if isinstance(x, np.ndarray) else x.numpy()[b, h, rows]

    def poison_out(self):
        from gpuprofile import kernels

        if self._torch is not None:
            self.out.fill_(float("nan"))
        else:
            self.out = kernels.to_device(np.full(self.shape, np.nan, dtype=np.float32), self.dtype)

    def want(self, causal):
        from gpuprofile.kernels import reference as ref

        if causal not in self._want:
            self._want[causal] = []
            inputs = self.device if self._torch is not None else self.host
            for b, h, rows, keys in checked_slices(self.shape, causal):
                q = self.rows_of(inputs[0], b, h, rows)
                k, v = (self.rows_of(x, b, h, keys) for x in inputs[1:])
                want = ref.reference(q, k, v, causal)
                tol = ref.tolerance(q, k, v, self.dtype, causal, ref=want)
                self._want[causal].append(((b, h, rows), want, tol))
        return self._want[causal]


def make_call(impl, case, causal):
    if impl in GP_VARIANTS:
        schedule, store = GP_VARIANTS[impl]
        return lambda: _testing.attention_wgmma(*case.device, case.out, schedule=schedule,
                                                   store=store, causal=causal)
    import torch.nn.functional as F

    return lambda: F.scaled_dot_product_attention(*case.torch, is_causal=causal)


def schedule_of(impl, shape, causal):
    """The flash_wgmma schedule a gp variant runs (gp: the one chosen for the shape on this
    device); None for SDPA."""
    if impl not in GP_VARIANTS:
        return None
    schedule = GP_VARIANTS[impl][0]
    if schedule == "per_shape":
        return _testing.attention_wgmma_schedule(tuple(shape), causal)
    return schedule


def out_of(impl, shape, causal, schedule):
    """How a gp variant's kernel stores O: "smem" (through shared memory and TMA) or "regs";
    None for SDPA."""
    if impl not in GP_VARIANTS:
        return None
    forced = GP_VARIANTS[impl][1]
    return forced or _testing.attention_wgmma_out(tuple(shape), causal, schedule)


def in_this_build(impl, head_dim, schedule, out):
    """Whether this build has the kernel a gp variant runs (the shipped build: the table's ships,
    what the rule reaches; a GPUPROFILE_ATTN_LAB=1 build: every one); True for SDPA."""
    if impl not in GP_VARIANTS or _testing.ATTENTION_WGMMA_LAB:
        return True
    if GP_VARIANTS[impl][0] == "per_shape":
        return GP_VARIANTS[impl][1] is None
    config = {s.name: s for s in WGMMA_SCHEDULES}[schedule].configs.get(head_dim)
    return config is not None and out in config.ships


def backend(impl):
    """The SDPA backend of a torch row (the main job's helper, under its names); none for ours."""
    from gpuprofile.kernels.attention_bench import sdpa_context

    return sdpa_context(SDPA.get(impl, impl))


def validate(impl, case, causal):
    """(ok, worst error / tolerance) of one call's output on the checked rows."""
    from gpuprofile.kernels import reference as ref

    if impl in GP_VARIANTS:
        case.poison_out()
        make_call(impl, case, causal)()
        out = case.out
    else:
        with backend(impl):
            out = make_call(impl, case, causal)()
    worst = 0.0
    for (b, h, rows), want, tol in case.want(causal):
        got = case.rows_of(out, b, h, rows)
        err = ref.max_error(got, want) if np.isfinite(got).all() else float("inf")
        worst = max(worst, err / tol)
    return worst <= 1.0, worst


def prepare(impl, case, causal):
    """The row of one implementation on one case, its output checked: status "ready" to be
    timed, or why not (skipped, failed, a wrong result)."""
    row = {"case": (case.shape, case.dtype, causal), "impl": impl, "shape": list(case.shape),
           "dtype": case.dtype, "causal": causal, "flops": flops(case.shape, causal),
           "schedule": schedule_of(impl, case.shape, causal)}
    row["out"] = out_of(impl, case.shape, causal, row["schedule"]) if row["schedule"] else None
    if impl in SDPA and case.torch is None:
        return {**row, "status": "skipped: no torch with CUDA"}
    if case.shape[3] not in HEAD_DIMS.get(impl, (case.shape[3],)):
        return {**row, "status": f"skipped: head_dim {case.shape[3]}"}
    if not in_this_build(impl, case.shape[3], row["schedule"], row["out"]):
        return {**row, "status": "skipped: not in this build (GPUPROFILE_ATTN_LAB=1 builds it)"}
    try:
        ok, worst = validate(impl, case, causal)
    except Exception as exc:  # a backend that does not take the shape, or a kernel error
        return {**row, "status": f"failed: {type(exc).__name__}: {exc}".splitlines()[0][:200]}
    row["err_over_tol"] = worst
    if not ok:
        return {**row, "status": "wrong result: not timed"}
    return {**row, "status": "ready"}


def time_once(impl, case, causal, flops, max_time):
    """One timing by gpuprofile.benchmark: (BenchmarkResult, its warnings' texts)."""
    import gpuprofile as gp

    with backend(impl), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = gp.benchmark(make_call(impl, case, causal), flops=flops, name=impl,
                         min_time=min(0.2, max_time), max_time=max_time, mode="cold")
    return r, [str(w.message) for w in caught]  # e.g. the noise reached at max_time


def finish(row, timings):
    """The row with its timings (one per round): the median of their medians, each round's time
    and SM clocks before and after, the largest noise."""
    ms = [r.median_ms for r, _ in timings]
    median = float(np.median(ms))
    tflops = row["flops"] / (median * 1e-3) / 1e12
    first, last = timings[0][0], timings[-1][0]
    return {**row, "status": "ok", "median_ms": median, "tflops": tflops,
            "pct_989": 100.0 * tflops / PEAK_TFLOPS,
            "rel_noise": max(r.rel_noise for r, _ in timings), "clock": first.clock,
            "sm_mhz_start": first.sm_clock_mhz_start, "sm_mhz_end": last.sm_clock_mhz_end,
            "sm_clock_source": first.sm_clock_source, "round_ms": ms,
            "round_mhz": [(r.sm_clock_mhz_start, r.sm_clock_mhz_end) for r, _ in timings],
            "warnings": [w for _, ws in timings for w in ws]}


def run_case(impls, case, causal, max_time, rounds):
    """Every implementation's row on one case: each checked, then timed `rounds` times, the
    order rotated by one each round (so each runs first, last and between), and the rounds'
    times kept for paired ratios (add_ratios): on a GPU whose clock drifts with its temperature,
    timings next to each other compare like with like, where one timing each, always in the
    same order, gave the first a warmer or cooler GPU than the last."""
    from gpuprofile.bench.ab import interleave

    rows = [prepare(impl, case, causal) for impl in impls]
    ready = [i for i, row in enumerate(rows) if row["status"] == "ready"]
    timings = interleave({i: functools.partial(time_once, impls[i], case, causal, rows[i]["flops"],
                                               max_time) for i in ready}, rounds)
    return [finish(row, timings[i]) if i in timings else row for i, row in enumerate(rows)]



def nvidia_smi_clock():
    """nvidia-smi's SM clock of every GPU in MHz (None where nvidia-smi is missing)."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip() or None


def write_json(path, payload):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=1)
    os.replace(tmp, path)


def main(argv=None):
    args = parse_args(argv)
    import gpuprofile as gp
    from gpuprofile.kernels import release_workspace
    from gpuprofile.toolkit import text_table

    if gp.device_count() == 0 or tuple(gp.device_info(0).compute_capability) != (9, 0):
        print("bench_attention_grid.py needs a compute capability 9.0 device (flash_wgmma)", file=sys.stderr)
        return 2
    try:
        import torch

        torch = torch if torch.cuda.is_available() else None
    except ImportError:
        torch = None
    if torch is None and any(v in SDPA for v in args.variants):
        print("bench_attention_grid.py: torch with CUDA is missing; SDPA rows are skipped", file=sys.stderr)
    causal_wanted = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    cases = [c for c in grid_cases(args.quick) if c[0][3] in args.head_dims and c[2] in causal_wanted]
    started, smi_start = time.time(), nvidia_smi_clock()
    rows, current = [], None
    for i, (shape, dtype, causal) in enumerate(cases):
        if current is None or (current.shape, current.dtype) != (shape, dtype):
            current = None
            release_workspace()
            current = Case(shape, dtype, torch)
        for row in run_case(args.variants, current, causal, args.max_time, args.rounds):
            rows.append(row)
            print(f"[{i + 1}/{len(cases)} {time.time() - started:5.0f} s] {shape} {dtype} "
                  f"causal={causal} {row['impl']}: {row.get('tflops', 0):.1f} TFLOP/s {row['status']}",
                  file=sys.stderr, flush=True)
    add_ratios(rows)
    for r in rows:
        del r["case"]
    info = gp.device_info(0)
    config = {"variants": args.variants, "quick": args.quick, "head_dims": list(args.head_dims),
              "causal": args.causal,
              "max_time": args.max_time, "rounds": args.rounds,
              "device": info.to_dict(), "torch": torch.__version__ if torch else None,
              "peak_tflops": PEAK_TFLOPS, "nvidia_smi_sm_clock_start": smi_start,
              "nvidia_smi_sm_clock_end": nvidia_smi_clock(), "seconds": time.time() - started,
              "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "argv": sys.argv}
    if args.output:
        write_json(args.output, {"config": config, "results": rows})
    print(text_table(COLUMNS, table_rows(rows),
                     title=f"attention forward on {info.name}: flash_wgmma variants vs SDPA "
                           f"(nvidia-smi SM clock, MHz current/max: {smi_start})"))
    for line in summary(rows):
        print(line)
    return 0 if all(r["status"].startswith(("ok", "skipped")) or r["impl"] in SDPA for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
