"""gpuprofile.nvtx against the nvtx package (pip install nvtx), call for call, with no tool
attached (what a program pays for its NVTX calls when nothing records them): host ns per call,
the median and the fastest of ROUNDS rounds of N calls, the two interleaved round by round (a
shared machine's load falls on both alike), the empty loop's median subtracted. CPU only.

    python benchmarks/bench_nvtx_compat.py [--rounds 7] [--n 20000] [--json out.json]

With a tool attached (NVTX binds one from NVTX_INJECTION64_PATH at the first call): under
`nsys profile` on a GPU machine, or on any machine with tools/nvtx_record_tool.c, a tool that
does nothing but answer (what reaching a tool costs the caller, not a tool's own work):

    cc -shared -fPIC -I$CUDA_HOME/include -o /tmp/nvtx_tool.so tools/nvtx_record_tool.c
    NVTX_INJECTION64_PATH=/tmp/nvtx_tool.so python benchmarks/bench_nvtx_compat.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from gpuprofile import nvtx as ours


def cases(mod):
    """(name, loop(n)) pairs written the way nvtx's users write them, for module `mod`."""
    dom = mod.get_domain("bench")
    attributes = dom.get_event_attributes(message="x", color="blue")
    ann = mod.annotate("x", color="blue")

    @mod.annotate("f")
    def decorated():
        pass

    def push_pop(n):
        push, pop = mod.push_range, mod.pop_range
        for _ in range(n):
            push("x", color="blue")
            pop()

    def with_annotate(n):
        for _ in range(n):
            with mod.annotate("x", color="blue"):
                pass

    def with_reused(n):
        for _ in range(n):
            with ann:
                pass

    def call_decorated(n):
        for _ in range(n):
            decorated()

    def domain_attributes(n):
        push, pop = dom.push_range, dom.pop_range
        for _ in range(n):
            push(attributes)
            pop()

    def start_end(n):
        start, end = mod.start_range, mod.end_range
        for _ in range(n):
            end(start("x"))

    def mark(n):
        m = mod.mark
        for _ in range(n):
            m("x")

    def category_name(n):
        push, pop = mod.push_range, mod.pop_range
        for _ in range(n):
            push("x", category="io")
            pop()

    return [("push_range + pop_range", push_pop), ("with annotate(...)", with_annotate),
            ("with one annotate object", with_reused), ("@annotate function call", call_decorated),
            ("domain.push_range(attributes) + pop_range", domain_attributes),
            ("start_range + end_range", start_end), ("mark", mark),
            ("push_range(category='io') + pop_range", category_name)]


def empty(n):
    for _ in range(n):
        pass


def per_call_ns(loop, n: int) -> float:
    t0 = time.perf_counter_ns()
    loop(n)
    return (time.perf_counter_ns() - t0) / n


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    import nvtx as theirs  # the package being compared with

    pairs = list(zip(cases(theirs), cases(ours), strict=True))
    times = {name: ([], []) for (name, _), _ in pairs}
    floor = []
    for _ in range(args.rounds):
        floor.append(per_call_ns(empty, args.n))
        for (name, t_loop), (_, o_loop) in pairs:
            times[name][0].append(per_call_ns(t_loop, args.n))
            times[name][1].append(per_call_ns(o_loop, args.n))
    base = statistics.median(floor)
    rows = []
    tool = ours._probe()  # whether NVTX bound a tool (nsys, NVTX_INJECTION64_PATH)
    title = f"call ({'tool attached' if tool else 'no tool attached'}), ns per call"
    print(f"{title:45} {'nvtx median':>12} {'gpuprofile median':>18} "
          f"{'nvtx min':>9} {'gpuprofile min':>15}")
    for name, (t, o) in times.items():
        tm, om = statistics.median(t) - base, statistics.median(o) - base
        tn, on = min(t) - base, min(o) - base
        rows.append({"call": name, "nvtx_median_ns": tm, "gpuprofile_median_ns": om,
                     "nvtx_min_ns": tn, "gpuprofile_min_ns": on})
        print(f"{name:45} {tm:12.0f} {om:18.0f} {tn:9.0f} {on:15.0f}")
    print(f"({args.rounds} rounds of {args.n} calls, interleaved; empty loop {base:.1f} ns subtracted)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rounds": args.rounds, "n": args.n, "tool": tool, "empty_ns": base,
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
