"""Where a hardware-counter collection spends its time: each range-profiler pass's start, run and
stop, timed separately, for the SOL set and a one-pass set (auto and user ranges). Needs a GPU.

    python benchmarks/range_profiler_passes.py
"""

import time

from gpuprofile import _C
from gpuprofile.counters import metrics as counters


def collect(plan, range_mode, workload):
    t0 = time.perf_counter()
    rp = _C.RangeProfiler(plan.config, plan.names, range=range_mode, replay="user", max_ranges=1)
    created = time.perf_counter() - t0
    passes = []
    while True:
        a = time.perf_counter()
        rp.start()
        if range_mode == "user":
            rp.push("r")
        b = time.perf_counter()
        workload.launch()
        _C._synchronize()
        c = time.perf_counter()
        if range_mode == "user":
            rp.pop()
        done = rp.stop()
        passes.append((b - a, c - b, time.perf_counter() - c))
        if done:
            break
    t1 = time.perf_counter()
    rp.decode()
    rp.evaluate(plan.host)
    rp.close()
    return created, passes, time.perf_counter() - t1


def main():
    workload = _C.Workload("ffma")
    for spec, range_mode in (("sol", "auto"), (["gpu__time_duration.sum"], "auto"),
                             (["gpu__time_duration.sum"], "user")):
        plan = counters._plan(spec)
        for trial in range(2):
            created, passes, finish = collect(plan, range_mode, workload)
            steps = " ".join(f"{s * 1e3:.1f}/{r * 1e3:.2f}/{e * 1e3:.1f}" for s, r, e in passes)
            print(f"{str(spec)[:24]:24s} {range_mode} trial {trial}: create {created * 1e3:.1f} ms; "
                  f"per pass start/run/stop ms: {steps}; decode+evaluate+close {finish * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
