"""The cases of issue 30, printed with their raw CUPTI records (needs a device; torch, JAX).

    python benchmarks/cupti_cases.py PART      PART: seq | seq2 | stream | jax | copy | tpafter FEATURE

seq/seq2: gp.benchmark of an elementwise add around torch.profiler runs (the CUPTI clock's unit);
stream: a GEMM on a torch side stream; jax: a jitted matmul; copy: counters of a copy-engine copy;
tpafter FEATURE: torch.profiler's kernel count before and after a gpuprofile feature. Each part
runs in its own process (CUPTI state is per process). The GPU tests assert the same cases; this
script shows the records behind them (docs/benchmarks.md, issue 30)."""

import os
import sys
import time

import numpy as np

part = sys.argv[1]


def dump_chunks():
    """Wrap bench.cupti.fn_records to keep the last chunk's raw records."""
    from gpuprofile.bench import cupti as bc

    keep = {}
    orig = bc.fn_records

    def wrapped(chunk):
        if len(chunk.kernels) + len(chunk.memcpy) + len(chunk.memset):
            keep["chunk"] = chunk
        return orig(chunk)

    bc.fn_records = wrapped
    return keep


def show(keep, label, limit=12):
    c = keep.get("chunk")
    if c is None:
        print(label, "no chunk")
        return
    k = c.kernels
    print(label, "kernels", len(k), "memcpy", len(c.memcpy), "memset", len(c.memset), "names", len(c.names))
    order = np.argsort(k["start"])[:limit]
    for i in order:
        nid = int(k["name_id"][i])
        nm = c.names[nid] if nid < len(c.names) else f"<id {nid}>"
        print(
            "   ",
            nm[:60],
            "stream",
            int(k["stream"][i]),
            "dur_us",
            (int(k["end"][i]) - int(k["start"][i])) / 1e3,
            "start",
            int(k["start"][i]) % 10**9,
        )
    for i in range(min(limit, len(c.memset))):
        print(
            "    memset",
            int(c.memset["stream"][i]),
            (int(c.memset["end"][i]) - int(c.memset["start"][i])) / 1e3,
        )


if part == "seq":
    import torch

    import gpuprofile as gp

    keep = dump_chunks()
    CUDA = [torch.profiler.ProfilerActivity.CUDA]
    n = 1 << 22
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    z = torch.empty_like(x)

    def add():
        torch.add(x, y, out=z)

    def truth(acts=CUDA):
        with torch.profiler.profile(activities=acts) as p:
            for _ in range(20):
                add()
            torch.cuda.synchronize()
        d = [e.device_time_total for e in p.events() if e.device_type.name == "CUDA"]
        return float(np.median(d)) if d else float("nan")

    def bench(label, **kw):
        r = gp.benchmark(add, max_time=1.0, **kw)
        print(
            f"{label:28s} median_us {r.median_ms * 1e3:8.2f} clock {r.clock} events_us "
            f"{(r.event_median_ms or float('nan')) * 1e3:8.2f} note {r.clock_note}",
            flush=True,
        )
        print("   sub", gp._C._subscriber_state(), "act", gp._C._activity_state()["refs"])
        return r

    bench("fresh")
    show(keep, "  fresh chunk")
    print("truth tp1 us", truth())
    bench("after tp1")
    with torch.profiler.profile(activities=CUDA):
        try:
            gp.profile().start()
        except gp.CuptiError as e:
            print("refused:", str(e)[:80])
        add()
    print("truth tp3 us", truth())
    r = bench("after refused + tp3")
    show(keep, "  bad chunk")
    print("truth tp4 us", truth())
    bench("again")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        bench("graph", mode="graph", stream=s)
    show(keep, "  graph chunk")
    with gp.profile(memory=False) as p:
        for _ in range(10):
            add()
    print("gp.profile add us", np.median(p.kernels["duration_ns"]) / 1e3, len(p.kernels))

if part == "seq2":  # no refused call: tp, bench, tp, tp, bench
    import torch

    import gpuprofile as gp

    keep = dump_chunks()
    CUDA = [torch.profiler.ProfilerActivity.CUDA]
    x = torch.randn(1 << 22, device="cuda")
    y = torch.randn(1 << 22, device="cuda")
    z = torch.empty_like(x)
    add = lambda: torch.add(x, y, out=z)

    def tp():
        with torch.profiler.profile(activities=CUDA):
            add()
            torch.cuda.synchronize()

    for label in ("tp1", "tp2", "tp3"):
        tp()
        r = gp.benchmark(add, max_time=0.5)
        print(
            label,
            "bench us",
            r.median_ms * 1e3,
            r.clock,
            "events",
            r.event_median_ms * 1e3 if r.event_median_ms else None,
        )
        show(keep, "   chunk", 6)

if part == "stream":
    import torch

    import gpuprofile as gp

    keep = dump_chunks()
    s = torch.cuda.Stream()
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)

    def f():
        with torch.cuda.stream(s):
            a @ a

    with gp.profile(memory=False) as p:
        for _ in range(10):
            f()
    print("truth us", np.median(p.kernels["duration_ns"]) / 1e3, len(p.kernels))
    for kw in ({}, {"stream": s}):
        r = gp.benchmark(f, max_time=1.0, **kw)
        print("bench", kw and "stream=s", r.median_ms * 1e3, r.clock, r.clock_note, r.event_median_ms)
        show(keep, "   chunk", 6)
    with gp.region("side"):
        f()
    print(gp.report())

if part == "jax":
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp

    import gpuprofile as gp

    keep = dump_chunks()
    f = jax.jit(lambda a: (a @ a).sum())
    x = jnp.ones((8192, 8192), jnp.bfloat16) * 0.01
    f(x).block_until_ready()
    t0 = time.perf_counter()
    for _ in range(20):
        f(x).block_until_ready()
    print("jax wall ms/call", (time.perf_counter() - t0) / 20 * 1e3)
    with gp.profile(memory=False) as p:
        for _ in range(5):
            f(x).block_until_ready()
    k = p.kernels
    print(
        "gp.profile kernels",
        len(k),
        "sum per call ms",
        k["duration_ns"].sum() / 5 / 1e6,
        "streams",
        set(k["stream"].tolist()),
    )
    r = gp.benchmark(lambda: f(x), max_time=1.0)
    print("bench", r.median_ms, r.clock, r.clock_note, r.event_median_ms)
    show(keep, "   chunk", 6)
    r = gp.benchmark(lambda: f(x).block_until_ready(), max_time=1.0)
    print("bench blocking", r.median_ms, r.clock, r.clock_note, r.event_median_ms, r.gated)
    with gp.region("mm"):
        f(x).block_until_ready()
    print(gp.report())

if part == "copy":
    import torch

    import gpuprofile as gp

    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    m = gp.metrics(lambda: dst.copy_(src), metrics=["dram__bytes_read.sum", "dram__bytes_write.sum"])
    print(repr(m)[:1500])
    print(getattr(m, "kernels", None))

if part == "tpafter":  # python diag30.py tpafter FEATURE: torch.profiler before/after FEATURE
    import torch

    import gpuprofile as gp
    from gpuprofile import kernels

    feat = sys.argv[2]
    CUDA = [torch.profiler.ProfilerActivity.CUDA]

    def work():
        for _ in range(7):
            kernels.spin(5_000)

    def tp():
        with torch.profiler.profile(activities=CUDA) as p:
            work()
            torch.cuda.synchronize()
        return sum(e.device_type.name == "CUDA" for e in p.events())

    def do():
        if feat == "profile":
            with gp.profile(memory=False):
                work()
        elif feat == "memory":
            with gp.memory.track():
                _ = torch.empty(1 << 20, device="cuda")
        elif feat == "metrics":
            gp.metrics(work, metrics=["gpu__time_duration.sum"])
        elif feat == "stalls":
            gp.stalls(lambda: kernels.spin(200_000))
        elif feat == "bench":
            gp.benchmark(kernels.spin, 50_000, max_time=0.3)
        elif feat == "graph":
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                gp.benchmark(lambda: kernels.spin(50_000, stream=s), mode="graph", stream=s, max_time=0.3)
        elif feat == "pylines":
            with gp.profile(memory=False, python_stacks="line"):
                work()

    seq = [tp()]
    for _ in range(2):
        do()
        seq.append(tp())
    print(feat, "torch CUDA events before/after/after:", seq, gp._C._subscriber_state())
