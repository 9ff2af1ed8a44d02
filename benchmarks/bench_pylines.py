"""Cost of the Python-line notes (profile(python_stacks=...)) against torch.profiler's stacks.

Needs a CUDA device; torch for the torch workloads.

What is measured, per workload, in one process inside one running `gpuprofile.profile()` and
region (the way the notes are used):

- the added host time per unit (launch, op or training step) of each mode against no notes:
  "line", "stack", "line" without the per-thread cache of the last capture, "line" with the
  runtime API's callbacks on as well (the earlier design), and rows that split out CUPTI's own
  share: the callbacks with a handler that returns at once (driver API alone, as "line" uses;
  runtime alone; both);
- in a profile without regions, what python_stacks adds there: the launches' API records (which
  regions otherwise enable) and "line" with them;
- how torch.profiler's route to Python lines costs on the same units: CPU activity with
  with_stack=True against CUDA activity alone (the op events that kernels link to and their
  stacks: torch.profiler cannot tie a kernel to a line without them).

The host's cost moves by ±0.5 µs per launch between processes and over seconds, which is larger
than the effect, so the design is about drift: every mode runs a short batch (a few hundred
launches: the GPU never falls behind enough to fill the launch queue, and the host is never
throttled by it) in each round, modes take turns in rotated order, and each mode's batch is
compared with the no-notes batch of the same round. The figure is the median of those per-round
differences, with a distribution-free 95 % interval of the median.

A second child process counts the CUDA API calls each unit makes (a bare CUPTI subscriber
through ctypes, every runtime and driver callback on): what CUPTI's dispatch is charged on.

Prints tables and writes JSON (--output).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

from _children import run_child

from gpuprofile.bench.ab import rotation  # A/B's rotated order (bench/ab.py)

# mode: (CUPTI callback domains: 1 runtime, 2 driver, 3 both; work: 0 return at once, 1 full,
# 2 without the last-capture cache; whole stack)
MODES = {
    "line": (2, 1, False),
    "stack": (2, 1, True),
    "line_nocache": (2, 2, False),
    "line_both_domains": (3, 1, False),
    "callbacks": (2, 0, False),
    "runtime_callbacks": (1, 0, False),
    "both_callbacks": (3, 0, False),
}
MODE_TEXT = {
    "line": 'python_stacks="line"',
    "stack": 'python_stacks="stack"',
    "line_nocache": '"line" without the last-capture cache',
    "line_both_domains": '"line" with runtime API callbacks on too (the earlier design)',
    "callbacks": "driver API callbacks (line's), handler returning at once",
    "runtime_callbacks": "runtime API callbacks alone, returning at once",
    "both_callbacks": "runtime and driver API callbacks, returning at once",
    "api_records": "profile(regions=False): + the API records python_stacks enables",
    "line_no_regions": 'profile(regions=False): + python_stacks="line"',
}
API = 32  # gpuprofile.tracing.activity.API: RUNTIME and DRIVER records


# ---- workloads: (run(n) -> None, units per batch, what a unit is) -------------------------------

def _workloads(names):
    from gpuprofile import _C

    out = {}
    if "c_loop" in names:
        out["c_loop"] = (lambda n: _C._testing.launch_empty(n), 256, "launch")
    if not {"torch_loop", "train_step"} & set(names):
        return out
    import torch

    if "torch_loop" in names:
        x = torch.zeros(1024, device="cuda")

        def op():
            x.add_(1)

        def layer(k):
            for _ in range(k):
                op()

        def model(k):  # three Python frames deep, as a model's code is
            layer(k)

        out["torch_loop"] = (model, 256, "op")
    if "train_step" in names:
        torch.manual_seed(0)

        class Block(torch.nn.Module):
            def __init__(self, d):
                super().__init__()
                self.norm = torch.nn.LayerNorm(d)
                self.fc1 = torch.nn.Linear(d, 4 * d)
                self.fc2 = torch.nn.Linear(4 * d, d)

            def forward(self, h):
                return h + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(h))))

        net = torch.nn.Sequential(*[Block(128) for _ in range(6)]).cuda()
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
        batch = torch.randn(16, 128, device="cuda")

        def step():
            opt.zero_grad(set_to_none=True)
            loss = net(batch).square().mean()
            loss.backward()
            opt.step()

        def steps(k):
            for _ in range(k):
                step()

        out["train_step"] = (steps, 4, "step")
    return out


def _kernels_per_unit(run, n) -> float:
    import gpuprofile as gp
    from gpuprofile import _C

    with gp.profile(memcpy=False, memset=False, memory=False, regions=False) as p:
        run(n)
        _C._synchronize()
    return len(p.kernels) / n


def _median_ci(xs):
    """Median and its distribution-free 95 % interval (order statistics, normal approximation)."""
    s = sorted(xs)
    n = len(s)
    spread = 1.96 * math.sqrt(n)
    lo, hi = max(0, math.floor((n - spread) / 2)), min(n - 1, math.ceil((n + spread) / 2) - 1)
    return statistics.median(s), s[lo], s[hi]


# ---- children ------------------------------------------------------------------------------------

def _rotate(run, batch: int, rounds: int, modes: dict) -> dict:
    """Every mode's batch once per round, in rotated order, each against the no-notes batch of
    the same round: {mode: (median added ns per unit, ci95, median added CPU ns)}. `modes` maps
    a name to (enter, leave) callables; "off" is added."""
    import gc

    from gpuprofile import _C

    order = ["off", *modes]
    wall = {m: [] for m in order}
    cpu = {m: [] for m in order}
    gc.disable()  # a collection inside a timed batch would land on one mode
    try:
        for i in range(rounds):
            gc.collect()
            for mode in rotation(order, i):
                if mode != "off":
                    modes[mode][0]()
                run(2)  # warm: the first capture of a line fills the tables
                _C._synchronize()
                c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
                run(batch)
                t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
                _C._synchronize()
                if mode != "off":
                    modes[mode][1]()
                wall[mode].append((t1 - t0) / batch)
                cpu[mode].append((c1 - c0) / batch)
    finally:
        gc.enable()
    out = {"off_ns": statistics.median(wall["off"])}
    for mode in modes:
        med, lo, hi = _median_ci([a - b for a, b in zip(wall[mode], wall["off"], strict=True)])
        out[mode] = {"added_ns": med, "ci95_ns": [lo, hi], "added_cpu_ns": statistics.median(
            [a - b for a, b in zip(cpu[mode], cpu["off"], strict=True)])}
    return out


def child_modes(names, rounds: int, torch_rounds: int) -> dict:
    import gpuprofile as gp
    from gpuprofile import _C
    from gpuprofile.tracing.pylines import excluded_prefixes

    prefixes = excluded_prefixes()

    def notes(domains, work, whole, api=False):
        def enter():
            if api:
                _C._activity_acquire(API)
            _C._pylines_start(whole, prefixes, domains, work)

        def leave():
            _C._pylines_stop()
            _C._pylines_take()
            if api:
                _C._activity_release(API)
        return enter, leave

    out = {}
    for name, (run, batch, unit) in _workloads(names).items():
        run(batch)
        _C._synchronize()
        res = {"unit": unit, "batch": batch, "rounds": rounds,
               "kernels_per_unit": _kernels_per_unit(run, batch)}
        # as profile() runs by default: regions on (their API records are on too)
        with gp.profile(memory=False), gp.region("bench"):
            res.update(_rotate(run, batch, rounds,
                               {m: notes(*MODES[m]) for m in MODES}))
        # without regions, python_stacks enables the launches' API records itself
        with gp.profile(memory=False, regions=False):
            got = _rotate(run, batch, max(rounds // 2, 1), {
                "api_records": (lambda: _C._activity_acquire(API),
                                lambda: _C._activity_release(API)),
                "line_no_regions": notes(2, 1, False, api=True)})
        res["no_regions_off_ns"] = got.pop("off_ns")
        res.update(got)
        if name != "c_loop":  # torch.profiler ties no kernel of a C loop to Python
            res["torch_profiler"] = _torch_profiler(run, batch * 8, torch_rounds)
        out[name] = res
    return out


def _torch_profiler(run, n: int, rounds: int) -> dict:
    """torch.profiler CPU+CUDA with_stack=True against CUDA alone, alternated (ABBA)."""
    import torch

    acts = torch.profiler.ProfilerActivity
    diffs, plain = [], []
    for i in range(rounds):
        got = {}
        for stack in ((False, True) if i % 2 == 0 else (True, False)):
            with torch.profiler.profile(activities=[acts.CPU, acts.CUDA] if stack else [acts.CUDA],
                                        with_stack=stack):
                run(2)
                torch.cuda.synchronize()
                t0 = time.perf_counter_ns()
                run(n)
                got[stack] = (time.perf_counter_ns() - t0) / n
                torch.cuda.synchronize()
        diffs.append(got[True] - got[False])
        plain.append(got[False])
    med, lo, hi = _median_ci(diffs)
    return {"units": n, "rounds": rounds, "cuda_only_ns": statistics.median(plain),
            "added_ns": med, "ci95_ns": [lo, hi]}


def child_count(names) -> dict:
    """CUDA API calls per unit, by name: a bare CUPTI subscriber (ctypes), every runtime and
    driver callback on, counting API enters. Its own process: one subscriber per process."""
    import ctypes
    from collections import Counter

    from gpuprofile import _C

    work = _workloads(names)
    lib = ctypes.CDLL(_C._cupti_info()["path"])
    counts: Counter = Counter()
    cb_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)

    def on_call(userdata, domain, cbid, data):
        # CUpti_CallbackData starts with the callback site (0 enter, 1 exit)
        if ctypes.cast(data, ctypes.POINTER(ctypes.c_int))[0] == 0:
            counts[(domain, cbid)] += 1

    keep = cb_t(on_call)
    sub = ctypes.c_void_p()
    assert lib.cuptiSubscribe(ctypes.byref(sub), keep, None) == 0, "another CUPTI subscriber"
    out = {}
    for name, (run, batch, unit) in work.items():
        run(batch)
        _C._synchronize()
        counts.clear()
        for domain in (2, 1):  # CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API
            assert lib.cuptiEnableDomain(1, sub, domain) == 0
        run(batch)
        _C._synchronize()
        for domain in (2, 1):
            lib.cuptiEnableDomain(0, sub, domain)
        got = {}
        for (domain, cbid), c in counts.most_common():
            cname = ctypes.c_char_p()
            lib.cuptiGetCallbackName(domain, cbid, ctypes.byref(cname))
            label = ("runtime " if domain == 2 else "driver ") + (cname.value or b"?").decode()
            got[label] = c / batch
        out[name] = {"unit": unit, "calls_per_unit": got}
    lib.cuptiUnsubscribe(sub)
    return out


# ---- parent ------------------------------------------------------------------------------------

def _child(args: list, timeout: int = 560) -> dict:
    return run_child(os.path.abspath(__file__), args, timeout, error_lines=3)


def _table(headers, rows) -> str:
    from gpuprofile.toolkit import text_table

    return text_table(headers, rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="c_loop,torch_loop,train_step",
                    help="comma-separated: c_loop, torch_loop, train_step")
    ap.add_argument("--rounds", type=int, default=300, help="rounds of every mode per workload")
    ap.add_argument("--torch-rounds", type=int, default=30,
                    help="ABBA pairs of torch.profiler per workload")
    ap.add_argument("--no-count", action="store_true", help="skip counting the API calls")
    ap.add_argument("--output", default="bench_pylines.json")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    names = [w for w in args.workloads.split(",") if w]
    bad = sorted(set(names) - {"c_loop", "torch_loop", "train_step"})
    if bad:
        ap.error(f"unknown workload(s) {bad}; choose from c_loop, torch_loop, train_step")
    if args.child:
        if args.child[0] == "modes":
            result = child_modes(names, args.rounds, args.torch_rounds)
        else:
            result = child_count(names)
        print(json.dumps(result), flush=True)
        os._exit(0)  # CUPTI's exit-time flush must not call a finalized interpreter's callbacks

    import gpuprofile as gp

    if gp.device_count() == 0:
        print("bench_pylines.py needs a CUDA device", file=sys.stderr)
        return 1
    try:
        import torch  # noqa: F401
    except ImportError:
        names = [n for n in names if n == "c_loop"]
    common = ["--workloads", ",".join(names), "--rounds", str(args.rounds),
              "--torch-rounds", str(args.torch_rounds)]
    results = {"device": gp.device_info(0).name, "date": time.strftime("%Y-%m-%d"),
               "command": " ".join(["python", "benchmarks/bench_pylines.py", *(argv or sys.argv[1:])]),
               "modes": _child(["modes", *common])}
    results["calls"] = None if args.no_count else _child(["count", *common], timeout=240)
    with open(args.output, "w") as f:
        json.dump(results, f, indent=1)

    print(f"device: {results['device']}")
    modes = results["modes"]
    if "error" in modes:
        print("error: " + " ".join(modes["error"]))
        return 1
    for name, r in modes.items():
        rows = [["no notes (per unit)", r["off_ns"], "", ""]]
        for mode in [*MODES, "api_records", "line_no_regions"]:
            lo, hi = r[mode]["ci95_ns"]
            rows.append([MODE_TEXT[mode], r[mode]["added_ns"], f"[{lo:.0f}, {hi:.0f}]",
                         r[mode]["added_cpu_ns"]])
        tp = r.get("torch_profiler")
        if tp:
            lo, hi = tp["ci95_ns"]
            rows.append(["torch.profiler CPU+CUDA with_stack vs CUDA", tp["added_ns"],
                         f"[{lo:.0f}, {hi:.0f}]", ""])
        print(f"\n{name}: ns per {r['unit']} ({r['kernels_per_unit']:.1f} kernels each), "
              f"{r['rounds']} rounds of {r['batch']}")
        print(_table(["mode", "added ns", "95% CI", "added CPU ns"], rows))
        line = r["line"]["added_ns"]
        print(f'"line" per kernel launched: {line / max(r["kernels_per_unit"], 1e-9):.0f} ns')
        if tp:
            print(f"torch.profiler with stacks / line: {tp['added_ns'] / line:.1f}x"
                  if line > 0 else "line: no measurable cost")
    calls = results["calls"]
    if calls and "error" not in calls:
        for name, c in calls.items():
            print(f"\n{name}: CUDA API calls per {c['unit']}")
            print(_table(["call", "per unit"], [[k, v] for k, v in c["calls_per_unit"].items()]))
    elif calls:
        print("counting the API calls failed: " + " ".join(calls["error"]))
    print(f"results written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
