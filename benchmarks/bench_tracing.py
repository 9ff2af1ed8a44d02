"""Cost of CUPTI tracing, measured on the GPU (needs a device; torch optional).

1. Host cost per kernel launch: back-to-back launches of an empty <<<1, 32>>> kernel from a C loop
   (gpuprofile._C._testing.launch_empty), with tracing off, under a bare CUPTI client (CONCURRENT_KERNEL
   enabled through ctypes, buffers freed unread: CUPTI's own cost), under gpuprofile.profile()
   in several configurations, and under torch.profiler (CUDA activity) on the same loop. Every
   configuration runs in its own process (one CUPTI client per process; no residue from an
   earlier one), modes interleaved round by round; the figure is the median over all repeats of
   launch time / launches.
2. Region enter+exit cost with and without tracing (tracing pushes an external correlation id),
   and in the launch-bound loop (one empty kernel per iteration, under gpuprofile.profile()):
   the region on events (region_clock="events") against the region on the CUPTI clock (the
   default: no events while tracing) and against NVTX push/pop, each minus the bare launch of
   the same round; modes interleaved in blocks in one process, rotated each round; the median
   of the per-round differences with its distribution-free 95 % interval. Every block checks
   that its regions were timed by the clock it claims.
3. 1,000,000 tiny kernels traced: records received, dropped records, and the time to stop
   (flush + hand-over), build the arrays, and export the Chrome trace (plain and gzip).
The cost of Python lines (profile(python_stacks=...)) is benchmarks/bench_pylines.py's.

Prints a table last and writes JSON (--output).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from _children import run_child

from gpuprofile.bench.ab import rotation  # A/B's rotated order (bench/ab.py)

MODES = {
    "off": "no tracing",
    "bare-cupti": "bare CUPTI client, CONCURRENT_KERNEL",
    "bare-cupti-api": "bare CUPTI client, + RUNTIME, DRIVER, EXTERNAL_CORRELATION",
    "kernels": "profile(kernels only, regions=False)",
    "kernels+regions": "profile(kernels, regions=True) in a region",
    "default": "profile() (all kinds) in a region",
    "torch.profiler": "torch.profiler(CUDA) on the same loop",
}

# ---- children: one configuration per process ---------------------------------------------------

class BareCupti:
    """A minimal CUPTI client through ctypes: what any tracer pays inside CUPTI for `kinds`
    (CUpti_ActivityKind values; 10 = CONCURRENT_KERNEL). Buffers are freed unread; enable(),
    flush() and disable() switch the kinds; session() is one block with them on."""

    def __init__(self, kinds=(10,)):
        import ctypes

        from gpuprofile import _C

        self.kinds = tuple(kinds)
        self.lib = ctypes.CDLL(_C._cupti_info()["path"])
        libc = ctypes.CDLL(None)
        libc.aligned_alloc.restype = ctypes.c_void_p
        libc.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
        libc.free.argtypes = [ctypes.c_void_p]
        size = 8 << 20
        req_t = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t))
        done_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p,
                                  ctypes.c_size_t, ctypes.c_size_t)

        def requested(buf, sz, max_records):
            buf[0] = libc.aligned_alloc(8, size)
            sz[0] = size
            max_records[0] = 0

        def completed(ctx, stream, buf, sz, valid):
            libc.free(buf)

        self.callbacks = (req_t(requested), done_t(completed))  # alive as long as the client
        if self.lib.cuptiActivityRegisterCallbacks(*self.callbacks) != 0:
            raise RuntimeError("cuptiActivityRegisterCallbacks failed")

    def enable(self) -> None:
        for kind in self.kinds:
            if self.lib.cuptiActivityEnable(kind) != 0:
                raise RuntimeError(f"cuptiActivityEnable({kind}) failed")

    def flush(self) -> None:
        self.lib.cuptiActivityFlushAll(1)

    def disable(self) -> None:
        for kind in self.kinds:
            self.lib.cuptiActivityDisable(kind)

    @contextlib.contextmanager
    def session(self):
        self.enable()
        try:
            yield self
        finally:
            self.flush()
            self.disable()


def _bare_cupti(kinds=(10,)):
    """A BareCupti with `kinds` on: (its flush, the client to keep alive)."""
    client = BareCupti(kinds)
    client.enable()
    return client.flush, client


def child_launch(mode: str, n: int, repeats: int) -> dict:
    import contextlib

    import gpuprofile as gp
    from gpuprofile import _C

    _C._testing.launch_empty(1000)
    _C._synchronize()
    ctx = contextlib.ExitStack()
    keep = None
    if mode == "bare-cupti":
        flush, keep = _bare_cupti()
        ctx.callback(flush)
    elif mode == "bare-cupti-api":  # the kinds gpuprofile's region attribution enables
        flush, keep = _bare_cupti((10, 5, 4, 39))  # + RUNTIME, DRIVER, EXTERNAL_CORRELATION
        ctx.callback(flush)
    elif mode == "kernels":
        ctx.enter_context(gp.profile(memcpy=False, memset=False, memory=False, regions=False))
    elif mode == "kernels+regions":
        ctx.enter_context(gp.profile(memcpy=False, memset=False, memory=False, regions=True))
        ctx.enter_context(gp.region("loop"))
    elif mode == "default":
        ctx.enter_context(gp.profile())
        ctx.enter_context(gp.region("loop"))
    elif mode == "torch.profiler":
        import torch

        torch.ones(1, device="cuda")
        ctx.enter_context(torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]))
    per_launch = []
    with ctx:
        _C._testing.launch_empty(1000)  # warm-up under the tracer
        _C._synchronize()
        for _ in range(repeats):
            per_launch.append(_C._testing.launch_empty(n) / n)
            _C._synchronize()
    del keep
    return {"mode": mode, "launches": n, "repeats": repeats, "ns_per_launch": per_launch,
            "median_ns": statistics.median(per_launch)}


def child_regions(n: int, repeats: int) -> dict:
    import gpuprofile as gp

    def loop():
        region = gp.region("r", nvtx=False)
        best = float("inf")
        for _ in range(repeats):
            t = time.perf_counter_ns()
            for _ in range(n):
                with region:
                    pass
            best = min(best, (time.perf_counter_ns() - t) / n)
            gp.reset()
        return best

    off = loop()
    with gp.profile(memcpy=False, memset=False, memory=False, regions=True):
        on = loop()
    return {"regions": n, "best_ns_off": off, "best_ns_tracing": on}


REGION_CLOCK_MODES = {
    "launch": "the launch alone",
    "nvtx": "gp.nvtx.push/pop around the launch",
    "events": 'with gp.region(): ..., profile(region_clock="events")',
    "cupti": "with gp.region(): ..., profile() (CUPTI region clock)",
}


def child_region_clock(n: int, rounds: int) -> dict:
    """Per-iteration host time of the launch-bound loop in each REGION_CLOCK_MODES mode, every
    block under its own gpuprofile.profile() (all kinds); round 0 warms up and is dropped."""
    import gpuprofile as gp
    from gpuprofile import _C
    from gpuprofile.toolkit import median_ci

    launch = _C._testing.launch_empty

    def plain():
        for _ in range(n):
            launch(1)

    def with_nvtx():
        push, pop = gp.nvtx.push, gp.nvtx.pop
        for _ in range(n):
            push("step")
            launch(1)
            pop()

    def with_region():
        region = gp.region
        for _ in range(n):
            with region("step"):
                launch(1)

    bodies = {"launch": plain, "nvtx": with_nvtx, "events": with_region, "cupti": with_region}
    modes = list(bodies)
    per: dict = {m: [] for m in modes}
    launch(1000)
    _C._synchronize()
    for r in range(rounds + 1):
        for mode in rotation(modes, r):
            gp.reset()
            with gp.profile(region_clock="events" if mode == "events" else "cupti"):
                _C._synchronize()
                t = time.perf_counter_ns()
                bodies[mode]()
                ns = (time.perf_counter_ns() - t) / n
            if mode in ("events", "cupti"):  # validate: the clock the mode claims timed them all
                rec = gp.records()
                timed = (rec["gpu_clock"] == mode) & np.isfinite(rec["gpu_ms"])
                if len(rec) != n or not timed.all():
                    raise RuntimeError(f"{mode}: {int(timed.sum())} of {len(rec)} regions timed "
                                       f"by {mode} (expected {n})")
            if r:
                per[mode].append(ns)
    out: dict = {"iterations": n, "rounds": rounds, "ns_per_iteration": per}

    def paired(a, b):
        diffs = [x - y for x, y in zip(per[a], per[b], strict=True)]
        low, high = median_ci(diffs)
        return {"median_ns": statistics.median(diffs), "low_ns": low, "high_ns": high}

    out["added"] = {m: paired(m, "launch") for m in modes[1:]}
    out["cupti_minus_events"] = paired("cupti", "events")
    return out


def child_big(n: int, regions: bool) -> dict:
    import gpuprofile as gp
    from gpuprofile import _C

    out = {"kernels_launched": n, "regions": regions}
    with tempfile.TemporaryDirectory() as tmp:
        p = gp.profile(memcpy=False, memset=False, memory=False, regions=regions).start()
        if regions:
            with gp.region("loop"):
                out["launch_s"] = _C._testing.launch_empty(n) / 1e9
        else:
            out["launch_s"] = _C._testing.launch_empty(n) / 1e9
        _C._synchronize()  # the GPU's share is not the flush's
        t = time.perf_counter()
        p.stop()
        out["stop_flush_s"] = time.perf_counter() - t
        t = time.perf_counter()
        k = p.kernels
        out["build_arrays_s"] = time.perf_counter() - t
        out["kernels_received"] = int((k["name"] == "gp_empty_kernel()").sum())
        out["attributed"] = int((k["region"] == "loop").sum())
        out["dropped"] = p.dropped
        for name in ("trace.json", "trace.json.gz"):
            path = os.path.join(tmp, name)
            t = time.perf_counter()
            p.export_chrome_trace(path)
            out[f"export_{name}_s"] = time.perf_counter() - t
            out[f"{name}_MB"] = os.path.getsize(path) / 1e6
    out["flush_and_export_s"] = out["stop_flush_s"] + out["build_arrays_s"] + out["export_trace.json_s"]
    return out


# ---- parent ------------------------------------------------------------------------------------

def _child(args: list, timeout: int = 240) -> dict:
    return run_child(os.path.abspath(__file__), args, timeout, error_lines=1)


def _torch_available() -> bool:
    proc = subprocess.run([sys.executable, "-c", "import torch; assert torch.cuda.is_available()"],
                          capture_output=True)
    return proc.returncode == 0


def _table(headers, rows) -> str:
    from gpuprofile.toolkit import text_table

    return text_table(headers, rows)


def _print_region_clock(results: dict) -> None:
    rc = results["region_clock"]
    if "error" in rc:
        print("region clock comparison: error:", " ".join(rc["error"]))
        return
    rows = [[m, REGION_CLOCK_MODES[m], a["median_ns"] / 1e3, a["low_ns"] / 1e3, a["high_ns"] / 1e3]
            for m, a in rc["added"].items()]
    d = rc["cupti_minus_events"]
    rows.append(["cupti - events", "paired per round", d["median_ns"] / 1e3, d["low_ns"] / 1e3,
                 d["high_ns"] / 1e3])
    launch = statistics.median(rc["ns_per_iteration"]["launch"]) / 1e3
    print(f"launch-bound loop under gpuprofile.profile(), {results['device']}: {launch:.2f} us per "
          f"bare iteration; {rc['iterations']} iterations x {rc['rounds']} interleaved rounds")
    print(_table(["mode", "what", "added us/iteration (median)", "95% low", "95% high"], rows))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=50_000, help="launches per repeat")
    ap.add_argument("--repeats", type=int, default=3, help="repeats per process")
    ap.add_argument("--rounds", type=int, default=5, help="processes per mode, interleaved")
    ap.add_argument("--big", type=int, default=1_000_000, help="kernels in the large trace")
    ap.add_argument("--skip-big", action="store_true", help="leave out the 1M-kernel trace")
    ap.add_argument("--clock-iterations", type=int, default=5000,
                    help="iterations per block of the region-clock comparison")
    ap.add_argument("--clock-rounds", type=int, default=20,
                    help="rounds of interleaved blocks of the region-clock comparison")
    ap.add_argument("--region-clock-only", action="store_true",
                    help="run only the region-clock comparison (events vs CUPTI vs NVTX)")
    ap.add_argument("--output", default="bench_tracing.json")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        if kind == "launch":
            result = child_launch(rest[0], int(rest[1]), int(rest[2]))
        elif kind == "regions":
            result = child_regions(int(rest[0]), int(rest[1]))
        elif kind == "region_clock":
            result = child_region_clock(int(rest[0]), int(rest[1]))
        else:
            result = child_big(int(rest[0]), rest[1] == "1")
        print(json.dumps(result), flush=True)
        # skip interpreter teardown: CUPTI's exit-time flush must not call back into a finalized
        # interpreter (the bare client's callbacks are Python)
        os._exit(0)

    import gpuprofile as gp

    if gp.device_count() == 0:
        print("bench_tracing.py needs a CUDA device", file=sys.stderr)
        return 1
    results = {"device": gp.device_info(0).name, "cupti": gp._C._cupti_info(),
               "launch": {}, "regions": None, "big": []}
    results["region_clock"] = _child(["region_clock", str(args.clock_iterations),
                                      str(args.clock_rounds)], timeout=600)
    if args.region_clock_only:
        with open(args.output, "w") as f:
            json.dump(results, f, indent=1)
        _print_region_clock(results)
        print(f"results written to {args.output}")
        return 0
    modes = [m for m in MODES if m != "torch.profiler" or _torch_available()]
    # Every mode once per round, rounds repeated: the machine's drift (this VM's launch cost moves
    # by ±0.5 us between processes) hits every mode alike; the figure is the median of all repeats.
    for r in range(args.rounds):
        for mode in rotation(modes, r):
            got = _child(["launch", mode, str(args.launches), str(args.repeats)])
            merged = results["launch"].setdefault(mode, {"mode": mode, "launches": args.launches,
                                                         "ns_per_launch": []})
            if "error" in got:
                merged["error"] = got["error"]
            else:
                merged["ns_per_launch"] += got["ns_per_launch"]
    for r in results["launch"].values():
        if r["ns_per_launch"]:
            r["median_ns"] = statistics.median(r["ns_per_launch"])
            r.pop("error", None)
    results["regions"] = _child(["regions", "100000", "5"])
    for regions in (() if args.skip_big else (False, True)):
        results["big"].append(_child(["big", str(args.big), "1" if regions else "0"]))
    with open(args.output, "w") as f:
        json.dump(results, f, indent=1)

    off = results["launch"]["off"].get("median_ns", float("nan"))
    bare = results["launch"].get("bare-cupti", {}).get("median_ns", float("nan"))
    rows = []
    for mode, r in results["launch"].items():
        if "error" in r:
            rows.append([mode, MODES[mode], "error", "-", "-"])
            continue
        rows.append([mode, MODES[mode], r["median_ns"] / 1e3, (r["median_ns"] - off) / 1e3,
                     (r["median_ns"] - bare) / 1e3])
    print(f"device: {results['device']}; {args.launches} launches x {args.repeats} repeats x "
          f"{args.rounds} interleaved processes per mode")
    print(_table(["mode", "what", "us/launch", "added vs off us", "added vs bare CUPTI us"], rows))
    reg = results["regions"]
    if "error" not in reg:
        print(_table(["region enter+exit", "ns"], [["tracing off", reg["best_ns_off"]],
                                                   ["tracing on (id push/pop)", reg["best_ns_tracing"]]]))
    _print_region_clock(results)
    big_rows = []
    for b in results["big"]:
        if "error" in b:
            big_rows.append(["error: " + " ".join(b["error"])] + ["-"] * 7)
            continue
        big_rows.append([f"regions={b['regions']}", b["kernels_received"], b["dropped"],
                         b["stop_flush_s"], b["build_arrays_s"], b["export_trace.json_s"],
                         b["export_trace.json.gz_s"], b["flush_and_export_s"]])
    print(_table(["1M-kernel trace", "received", "dropped", "stop (flush) s", "arrays s",
                  "export json s", "export gz s", "flush+export s"], big_rows))
    print(f"results written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
