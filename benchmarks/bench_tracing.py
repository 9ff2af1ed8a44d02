"""Cost of CUPTI tracing, measured on the GPU (needs a device; torch optional).

1. Host cost per kernel launch: back-to-back launches of an empty <<<1, 32>>> kernel from a C loop
   (gpuprofile._C._launch_empty), with tracing off, under a bare CUPTI client (CONCURRENT_KERNEL
   enabled through ctypes, buffers freed unread: CUPTI's own cost), under gpuprofile.profile()
   in several configurations, and under torch.profiler (CUDA activity) on the same loop. Every
   configuration runs in its own process (one CUPTI client per process; no residue from an
   earlier one), modes interleaved round by round; the figure is the median over all repeats of
   launch time / launches.
2. Region enter+exit cost with and without tracing (tracing pushes an external correlation id).
3. 1,000,000 tiny kernels traced: records received, dropped records, and the time to stop
   (flush + hand-over), build the arrays, and export the Chrome trace (plain and gzip).
4. Python lines (profile(python_stacks=...)): per launch in the C loop and per op in a torch loop
   called three Python frames deep, across processes as above and, with less noise, in one
   process as A/B pairs (with and without the notes inside one profile(); torch.profiler with and
   without with_stack=True), the median of the per-pair differences.

Prints a table last and writes JSON (--output).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODES = {
    "off": "no tracing",
    "bare-cupti": "bare CUPTI client, CONCURRENT_KERNEL",
    "bare-cupti-api": "bare CUPTI client, + RUNTIME, DRIVER, EXTERNAL_CORRELATION",
    "kernels": "profile(kernels only, regions=False)",
    "kernels+regions": "profile(kernels, regions=True) in a region",
    "default": "profile() (all kinds) in a region",
    "lines": "profile(python_stacks='line') in a region",
    "stacks": "profile(python_stacks='stack') in a region",
    "lines-cb-only": "profile() + the Python-line callbacks, handler returning at once",
    "lines-rt-cb-only": "profile() + the runtime-API half of those callbacks, returning at once",
    "torch.profiler": "torch.profiler(CUDA) on the same loop",
}
# A torch loop of small ops called through a few Python frames, as a model's code would: what
# the Python-line notes cost against torch.profiler's with_stack=True.
TORCH_MODES = {
    "off": "no tracing",
    "default": "profile() in a region",
    "lines": "profile(python_stacks='line')",
    "stacks": "profile(python_stacks='stack')",
    "torch.profiler": "torch.profiler(CUDA)",
    "torch.profiler+stack": "torch.profiler(CUDA, with_stack=True)",
}


# ---- children: one configuration per process ---------------------------------------------------

def _bare_cupti(kinds=(10,)):
    """A minimal CUPTI client through ctypes: what any tracer pays inside CUPTI for `kinds`
    (CUpti_ActivityKind values; 10 = CONCURRENT_KERNEL)."""
    import ctypes

    from gpuprofile import _C

    lib = ctypes.CDLL(_C._cupti_info()["path"])
    libc = ctypes.CDLL(None)
    libc.aligned_alloc.restype = ctypes.c_void_p
    libc.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    size = 8 << 20
    req_t = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                             ctypes.POINTER(ctypes.c_size_t))
    done_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p,
                              ctypes.c_size_t, ctypes.c_size_t)

    def requested(buf, sz, max_records):
        buf[0] = libc.aligned_alloc(8, size)
        sz[0] = size
        max_records[0] = 0

    def completed(ctx, stream, buf, sz, valid):
        libc.free(buf)

    callbacks = (req_t(requested), done_t(completed))
    assert lib.cuptiActivityRegisterCallbacks(*callbacks) == 0
    for kind in kinds:
        assert lib.cuptiActivityEnable(kind) == 0
    return lambda: lib.cuptiActivityFlushAll(1), callbacks


def child_launch(mode: str, n: int, repeats: int) -> dict:
    import contextlib

    import gpuprofile as gp
    from gpuprofile import _C

    _C._launch_empty(1000)
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
    elif mode in ("default", "lines", "stacks"):
        stacks = {"default": False, "lines": "line", "stacks": "stack"}[mode]
        ctx.enter_context(gp.profile(python_stacks=stacks))
        ctx.enter_context(gp.region("loop"))
    elif mode in ("lines-cb-only", "lines-rt-cb-only"):  # where the cost of "lines" goes
        ctx.enter_context(gp.profile())
        ctx.enter_context(gp.region("loop"))
        _C._pylines_start(False, (), 3 if mode == "lines-cb-only" else 1, False)
        ctx.callback(_C._pylines_stop)
    elif mode == "torch.profiler":
        import torch

        torch.ones(1, device="cuda")
        ctx.enter_context(torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]))
    per_launch = []
    with ctx:
        _C._launch_empty(1000)  # warm-up under the tracer
        _C._synchronize()
        for _ in range(repeats):
            per_launch.append(_C._launch_empty(n) / n)
            _C._synchronize()
    del keep
    return {"mode": mode, "launches": n, "repeats": repeats, "ns_per_launch": per_launch,
            "median_ns": statistics.median(per_launch)}


def child_torch(mode: str, n: int, repeats: int) -> dict:
    """µs per small torch op (one kernel each) issued three Python calls deep, under `mode`."""
    import contextlib

    import torch

    import gpuprofile as gp

    x = torch.zeros(1024, device="cuda")

    def op():
        x.add_(1)

    def layer(k):
        for _ in range(k):
            op()

    def model(k):
        layer(k)

    model(100)
    torch.cuda.synchronize()
    ctx = contextlib.ExitStack()
    if mode in ("default", "lines", "stacks"):
        stacks = {"default": False, "lines": "line", "stacks": "stack"}[mode]
        ctx.enter_context(gp.profile(memory=False, python_stacks=stacks))
        ctx.enter_context(gp.region("loop"))
    elif mode.startswith("torch.profiler"):
        ctx.enter_context(torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CUDA], with_stack=mode.endswith("stack")))
    per_op = []
    with ctx:
        model(100)
        torch.cuda.synchronize()
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            model(n)
            per_op.append((time.perf_counter_ns() - t0) / n)
            torch.cuda.synchronize()
    return {"mode": mode, "ops": n, "repeats": repeats, "ns_per_op": per_op,
            "median_ns": statistics.median(per_op)}


def child_paired(n_launch: int, n_ops: int, pairs: int) -> dict:
    """The cost of the Python-line notes measured in one process: the same loop with and without
    them, alternated (ABBA) inside one running profile(), so that the drift between processes
    (±0.5 µs per launch on this VM) cancels; and torch.profiler with and without with_stack=True
    the same way. Median per-pair differences, in ns per launch / per op."""
    import gpuprofile as gp
    from gpuprofile import _C
    from gpuprofile.tracing.pylines import excluded_prefixes

    out: dict = {"pairs": pairs}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        x = torch.zeros(1024, device="cuda")

        def torch_loop(k):
            for _ in range(k):
                x.add_(1)

        torch_loop(100)
    # per loop: (wall ns per launch or op, the count); the thread's CPU time is read around it,
    # which leaves out time this thread was not running (other processes, CUPTI's own thread)
    loops = {"c_loop": (lambda: _C._launch_empty(n_launch) / n_launch, n_launch)}
    if torch is not None:
        loops["torch_loop"] = (lambda: _timed(lambda: torch_loop(n_ops)) / n_ops, n_ops)
    prefixes = excluded_prefixes()
    # line, stack: the notes; callbacks: the same CUPTI callbacks with a handler that returns at
    # once (CUPTI's own cost); runtime_callbacks / driver_callbacks: one API's half of them alone.
    # The modes take turns within each round (rotated), so a drift during the run (the trace
    # growing, the machine) falls on every mode alike.
    modes = {"line": (3, True), "stack": (3, True), "callbacks": (3, False),
             "runtime_callbacks": (1, False), "driver_callbacks": (2, False)}
    with gp.profile(memory=False), gp.region("paired"):
        for name, (loop, count) in loops.items():
            diffs = {m: [] for m in modes}
            cpu_diffs = {m: [] for m in modes}
            names = list(modes)
            for i in range(pairs):
                for mode in names[i % len(names):] + names[:i % len(names)]:
                    domains, work = modes[mode]
                    order = (False, True) if i % 2 == 0 else (True, False)
                    got, cpu = {}, {}
                    for on in order:
                        if on:
                            _C._pylines_start(mode == "stack", prefixes, domains, work)
                        c0 = time.thread_time_ns()
                        got[on] = loop()
                        cpu[on] = (time.thread_time_ns() - c0) / count
                        _C._synchronize()
                        if on:
                            _C._pylines_stop()
                            _C._pylines_take()
                    diffs[mode].append(got[True] - got[False])
                    cpu_diffs[mode].append(cpu[True] - cpu[False])
            for mode in modes:
                out[f"{name}_{mode}_added_ns"] = statistics.median(diffs[mode])
                out[f"{name}_{mode}_added_cpu_ns"] = statistics.median(cpu_diffs[mode])
    if torch is not None:
        # What torch.profiler needs to tie a kernel to a Python line: CPU activity (the op events
        # that kernels link to) with stacks, against tracing the CUDA activity alone. (with_stack
        # with CUDA activity alone records no stack: there is no CPU event to attach it to.)
        acts = torch.profiler.ProfilerActivity
        diffs = []
        for i in range(pairs):
            order = (False, True) if i % 2 == 0 else (True, False)
            got = {}
            for stack in order:
                with torch.profiler.profile(activities=[acts.CPU, acts.CUDA] if stack else
                                            [acts.CUDA], with_stack=stack):
                    got[stack] = _timed(lambda: torch_loop(n_ops)) / n_ops
                    torch.cuda.synchronize()
            diffs.append(got[True] - got[False])
        out["torch_loop_torch_profiler_cpu_with_stack_added_ns"] = statistics.median(diffs)
    return out


def _timed(fn) -> int:
    t0 = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - t0


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


def child_big(n: int, regions: bool) -> dict:
    import gpuprofile as gp
    from gpuprofile import _C

    out = {"kernels_launched": n, "regions": regions}
    with tempfile.TemporaryDirectory() as tmp:
        p = gp.profile(memcpy=False, memset=False, memory=False, regions=regions).start()
        if regions:
            with gp.region("loop"):
                out["launch_s"] = _C._launch_empty(n) / 1e9
        else:
            out["launch_s"] = _C._launch_empty(n) / 1e9
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
    cmd = [sys.executable, os.path.abspath(__file__), "--child", *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": [f"timed out after {timeout} s"]}
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _torch_available() -> bool:
    proc = subprocess.run([sys.executable, "-c", "import torch; assert torch.cuda.is_available()"],
                          capture_output=True)
    return proc.returncode == 0


def _table(headers, rows) -> str:
    from gpuprofile._format import text_table

    return text_table(headers, rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=50_000, help="launches per repeat")
    ap.add_argument("--repeats", type=int, default=3, help="repeats per process")
    ap.add_argument("--rounds", type=int, default=5, help="processes per mode, interleaved")
    ap.add_argument("--big", type=int, default=1_000_000, help="kernels in the large trace")
    ap.add_argument("--torch-ops", type=int, default=20_000, help="torch ops per repeat")
    ap.add_argument("--skip-big", action="store_true", help="leave out the 1M-kernel trace")
    ap.add_argument("--pairs", type=int, default=20, help="A/B pairs of the in-process comparison")
    ap.add_argument("--only-paired", action="store_true", help="run the in-process comparison only")
    ap.add_argument("--output", default="bench_tracing.json")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        if kind == "launch":
            result = child_launch(rest[0], int(rest[1]), int(rest[2]))
        elif kind == "regions":
            result = child_regions(int(rest[0]), int(rest[1]))
        elif kind == "torch":
            result = child_torch(rest[0], int(rest[1]), int(rest[2]))
        elif kind == "paired":
            result = child_paired(int(rest[0]), int(rest[1]), int(rest[2]))
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
    modes = [m for m in MODES if m != "torch.profiler" or _torch_available()]
    # Every mode once per round, rounds repeated: the machine's drift (this VM's launch cost moves
    # by ±0.5 us between processes) hits every mode alike; the figure is the median of all repeats.
    for _ in range(0 if args.only_paired else args.rounds):
        for mode in modes:
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
    if _torch_available():
        results["torch"] = {}
        for _ in range(0 if args.only_paired else args.rounds):
            for mode in TORCH_MODES:
                got = _child(["torch", mode, str(args.torch_ops), str(args.repeats)])
                merged = results["torch"].setdefault(mode, {"mode": mode, "ns_per_op": []})
                merged["ns_per_op"] += got.get("ns_per_op", [])
                if "error" in got:
                    merged["error"] = got["error"]
        for r in results["torch"].values():
            if r["ns_per_op"]:
                r["median_ns"] = statistics.median(r["ns_per_op"])
    results["paired"] = _child(["paired", str(args.launches), str(args.torch_ops),
                                str(args.pairs)], timeout=600)
    results["regions"] = None if args.only_paired else _child(["regions", "100000", "5"])
    for regions in (() if args.skip_big or args.only_paired else (False, True)):
        results["big"].append(_child(["big", str(args.big), "1" if regions else "0"]))
    with open(args.output, "w") as f:
        json.dump(results, f, indent=1)

    paired = results["paired"]
    print(_table(["in one process, A/B pairs", "added ns"],
                 [[k, round(v, 1)] for k, v in paired.items() if k.endswith("_ns")]
                 or [["error", " ".join(paired.get("error", []))]]))
    if args.only_paired:
        print(f"results written to {args.output}")
        return 0
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
    if results.get("torch"):
        t_off = results["torch"]["off"].get("median_ns", float("nan"))
        print(_table(["torch op loop", "what", "us/op", "added vs off us"],
                     [[m, TORCH_MODES[m], r.get("median_ns", float("nan")) / 1e3,
                       (r.get("median_ns", float("nan")) - t_off) / 1e3]
                      for m, r in results["torch"].items()]))
    reg = results["regions"]
    if "error" not in reg:
        print(_table(["region enter+exit", "ns"], [["tracing off", reg["best_ns_off"]],
                                                   ["tracing on (id push/pop)", reg["best_ns_tracing"]]]))
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
