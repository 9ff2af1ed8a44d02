"""gpuprofile on real framework work (torch, torch.compile, CUDA graphs, CuPy, Triton), as users run
it: a training step's forward/backward/optimizer regions, work launched from other threads and
streams, memory=True against torch's allocator, and torch.profiler used before and after us in
one process. Nothing is downloaded: the models are built here. Skipped without a device or
without the framework."""

import json
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import gpuprofile as gp

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if gp.device_count() == 0 or not torch.cuda.is_available():  # pragma: no cover
    pytest.skip("needs a CUDA device visible to torch", allow_module_level=True)


def _model(layers=2, d=256, heads=4, vocab=512):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
    body = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
    model = torch.nn.Sequential(torch.nn.Embedding(vocab, d), body, torch.nn.Linear(d, vocab))
    return model.cuda()


def _step(model, opt, x, y, phases=("forward", "backward", "optimizer")):
    with gp.region("forward"):
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())
    if "backward" in phases:
        with gp.region("backward"):
            loss.backward()
    if "optimizer" in phases:
        with gp.region("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)


def _count(p, region=None):
    k = p.kernels
    return len(k) if region is None else int((k["region"] == region).sum())


@pytest.fixture(scope="module")
def training():
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    x = torch.randint(0, 512, (8, 128), device="cuda")
    y = torch.randint(0, 512, (8, 128), device="cuda")
    for _ in range(3):  # warm up: cuBLAS handles, optimizer state, allocator
        _step(model, opt, x, y)
    torch.cuda.synchronize()
    return model, opt, x, y


def _inside_intervals(p):
    """Every stream-rule row lies strictly between its region's start and stop calls."""
    iv = p._intervals()
    k = p.kernels
    for r, start, end in zip(iv["record"], iv["start"], iv["end"], strict=True):
        mine = k[(k["region_record"] == r) & (k["attribution"] == "stream")]
        corr = mine["correlation_id"].astype(np.int64)
        assert ((corr > start) & (corr < end)).all(), gp.records()["name"][r]


def test_training_step_kernels_go_to_the_right_region(training):
    model, opt, x, y = training
    counts = {}
    for phases in (("forward",), ("forward", "backward"), ("forward", "backward", "optimizer")):
        with gp.profile(memory=False) as p:
            _step(model, opt, x, y, phases)
        counts[phases] = p
        opt.zero_grad(set_to_none=True)  # every run starts without gradients
    full = counts[("forward", "backward", "optimizer")]
    k = full.kernels
    attributed = (k["region"] != "").mean()
    assert attributed >= 0.99, full.summary()
    # per-region counts equal the counts of the phases run alone
    fwd = _count(counts[("forward",)])
    fwd_bwd = _count(counts[("forward", "backward")])
    assert _count(full, "forward") == fwd
    assert _count(full, "backward") == fwd_bwd - fwd
    assert _count(full, "optimizer") == len(k) - fwd_bwd
    # backward's kernels come from autograd's thread: found by the stream rule
    bwd = k[k["region"] == "backward"]
    assert len(bwd) > 10 and (bwd["attribution"] == "stream").mean() > 0.9
    assert set(k["attribution"][k["region"] == "forward"]) == {"launch"}
    _inside_intervals(full)
    # the launch rule alone leaves autograd's kernels out
    with gp.profile(memory=False, stream_attribution=False) as p:
        _step(model, opt, x, y)
    assert (p.kernels["attribution"] != "stream").all()
    assert _count(p, "backward") < _count(full, "backward") // 2
    assert gp._C._attribution_state()["stream_errors"] == 0


def test_training_step_trace_is_valid(training, tmp_path):
    model, opt, x, y = training
    with gp.profile() as p:
        _step(model, opt, x, y)
    path = p.export_chrome_trace(tmp_path / "step.json")
    with open(path) as f:
        trace = json.load(f)
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert len(kernels) == len(p.kernels)
    in_backward = [e for e in kernels if e.get("args", {}).get("region") == "backward"]
    assert len(in_backward) == _count(p, "backward") > 0


def test_memory_region_peak_equals_torch_reserved_growth():
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved()
    with gp.profile(kernels=False, memcpy=False, memset=False) as p:
        with gp.region("alloc", memory=True):
            a = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
            b = torch.empty(32 << 20, dtype=torch.uint8, device="cuda")
            torch.cuda.synchronize()
        grown = torch.cuda.memory_reserved() - before
        del a, b
    rows = [r for r in p.summary().memory_by_region if r["region"] == "alloc"]
    assert rows and rows[0]["peak_above_entry_bytes"] == grown > 0


def test_two_streams_running_concurrently_are_not_mixed_up():
    # The first kernel on each stream (about 30 ms) outlasts CPython's 5 ms GIL switch interval,
    # so each stream is still busy when the other thread gets to launch: one thread can issue
    # all its launches before the other runs at all (it did, once, on an H100).
    LONG = 50_000_000  # cycles
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.randn(1 << 20, device="cuda")
    go = threading.Barrier(2)

    def other():
        with torch.cuda.stream(s2):
            go.wait()
            for i in range(20):
                torch.cuda._sleep(LONG if i == 0 else 20_000)
                x.add_(1)

    with gp.profile(memory=False) as p:
        t = threading.Thread(target=other)
        t.start()
        with torch.cuda.stream(s1), gp.region("mine", stream=s1):
            go.wait()
            for i in range(20):
                torch.cuda._sleep(LONG if i == 0 else 20_000)
                x.mul_(1.0)
        t.join()
        torch.cuda.synchronize()
    k = p.kernels
    mine = k["region"] == "mine"
    s1_id = int(np.bincount(k["stream"][mine].astype(np.int64)).argmax())
    on_s1 = k["stream"] == s1_id
    assert on_s1.sum() == 40 and (k["region"][on_s1] == "mine").all(), k[["stream", "region"]]
    assert (~on_s1).sum() == 40 and (k["region"][~on_s1] == "").all(), "other stream mixed in"
    # the two streams overlapped on the GPU: the rule did not need them apart in time
    a, b = k[on_s1], k[~on_s1]
    assert a["start_ns"].min() < b["end_ns"].max() and b["start_ns"].min() < a["end_ns"].max()


def test_work_launched_by_another_thread_on_the_region_stream():
    with gp.profile(memory=False) as p:
        with gp.region("outer"):
            torch.cuda._sleep(2_000_000)  # keep the stream busy while the worker launches
            t = threading.Thread(target=lambda: [torch.cuda._sleep(1000) for _ in range(5)])
            t.start()
            t.join()
        torch.cuda.synchronize()
    k = p.kernels
    worker = k[np.argsort(k["start_ns"])][1:]
    assert len(worker) == 5
    assert (worker["region"] == "outer").all() and (worker["attribution"] == "stream").all()


def test_torch_compile_model_is_attributed():
    f = torch.compile(lambda a, b: torch.relu(a @ b + 1.0).sum(dim=0))
    a = torch.randn(256, 256, device="cuda")
    f(a, a)
    torch.cuda.synchronize()
    with gp.profile(memory=False) as p, gp.region("compiled"):
        f(a, a)
    assert _count(p) > 0 and (p.kernels["region"] == "compiled").all()


def test_cuda_graph_replay_is_attributed():
    a = torch.randn(1024, 1024, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            b = a @ a
            b.relu_()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        b = a @ a
        b.relu_()
    with gp.profile(memory=False) as p:
        with gp.region("replay"):
            for _ in range(3):
                g.replay()
        torch.cuda.synchronize()
    k = p.kernels
    assert len(k) >= 6 and (k["region"] == "replay").all() and (k["graph_id"] > 0).all()


def test_cupy_stream_region():
    cp = pytest.importorskip("cupy")
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.arange(1 << 20, dtype=cp.float32)
    with gp.profile(memory=False) as p:
        with s, gp.region("cupy", stream=s):
            for _ in range(3):
                x = x * 2 + 1
        s.synchronize()
    k = p.kernels
    assert len(k) >= 3 and (k["region"] == "cupy").all()
    assert set(k["stream"].tolist()) == {int(k["stream"][0])}


def test_triton_kernel_benchmark_matches_cupti_truth():
    triton = pytest.importorskip("triton")
    import triton.language as tl

    @triton.jit
    def scale(x_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + i, mask=i < n)
        tl.store(x_ptr + i, v * 1.0001, mask=i < n)

    n = 1 << 24
    x = torch.ones(n, device="cuda")

    def run():
        scale[(triton.cdiv(n, 1024),)](x, n, BLOCK=1024)

    run()
    r = gp.benchmark(run, mode="hot")
    assert r.clock == "cupti"
    with gp.profile(memory=False) as p:
        for _ in range(50):
            run()
    truth = float(np.median(p.kernels["duration_ns"])) / 1e6
    assert abs(r.median_ms - truth) <= max(0.01 * truth, 0.3e-3), (r.median_ms, truth)


def _fresh(code, timeout=150):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=timeout)
    return out.returncode, out.stdout + out.stderr


def test_torch_profiler_before_and_after_gpuprofile():
    rc, out = _fresh("""
        import numpy as np, torch, gpuprofile as gp
        x = torch.randn(1 << 20, device="cuda")
        def work():
            for _ in range(10):
                x.mul_(1.0001)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as tp:
            work(); torch.cuda.synchronize()
        assert any(e.device_type.name == "CUDA" for e in tp.events()), "torch saw no kernel"
        # torch.profiler recording now: a clear error that names it
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
            try:
                gp.profile().start()
            except gp.CuptiError as e:
                assert "torch.profiler" in str(e), e
            else:
                raise AssertionError("profile() started while torch.profiler records")
        # after it stopped: every CUPTI feature of gpuprofile works
        with gp.profile(memory=False) as p, gp.region("after"):
            work()
        assert len(p.kernels) == 10 and (p.kernels["region"] == "after").all()
        torch.cuda.empty_cache()
        with gp.memory.track() as m:
            y = torch.empty(64 << 20, dtype=torch.uint8, device="cuda"); torch.cuda.synchronize()
        assert m.peak_bytes >= 64 << 20, m
        r = gp.benchmark(work)
        assert r.clock == "cupti", r
        mr = gp.metrics(work, metrics=["dram__bytes_read.sum"])
        assert len(mr.kernels) == 10, mr
        s = gp.sample(work)
        assert s is not None
        st = gp.stalls(lambda: torch.cuda._sleep(2_000_000))
        assert st.kernels, st
        # and torch.profiler still works afterwards
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as tp:
            work(); torch.cuda.synchronize()
        assert sum(e.device_type.name == "CUDA" for e in tp.events()) >= 10, "torch lost kernels"
        with gp.profile(memory=False) as p:
            work()
        assert len(p.kernels) == 10
        print("takeovers", gp._C._subscriber_state())
        print("OK")
    """)
    assert rc == 0 and "OK" in out, out


def test_takeover_can_be_switched_off():
    rc, out = _fresh("""
        import os
        os.environ["GPUPROFILE_CUPTI_TAKEOVER"] = "0"
        import torch, gpuprofile as gp
        x = torch.randn(1 << 20, device="cuda")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
            x.mul_(2); torch.cuda.synchronize()
        try:
            gp.profile().start()
        except gp.CuptiError as e:
            assert "torch.profiler" in str(e), e
            print("OK")
        r = gp.benchmark(lambda: x.mul_(1.0))
        assert r.clock == "gpu" and "CUPTI" in r.clock_note and "events" in repr(r), repr(r)
    """)
    assert rc == 0 and "OK" in out, out


def test_nested_regions_take_other_threads_work_innermost_first():
    s = torch.cuda.Stream()
    x = torch.randn(1 << 16, device="cuda")

    def worker(n):
        def run():
            with torch.cuda.stream(s):  # torch's current stream is per thread
                for _ in range(n):
                    x.add_(1)

        t = threading.Thread(target=run)
        t.start()
        t.join()

    with gp.profile(memory=False) as p, torch.cuda.stream(s):
        with gp.region("outer", stream=s):
            torch.cuda._sleep(1_000_000)  # the stream stays busy: order, not time, decides
            worker(2)
            with gp.region("inner", stream=s):
                worker(3)
            worker(4)
        worker(5)  # after both regions closed: nobody's
        torch.cuda.synchronize()
    k = p.kernels[np.argsort(p.kernels["correlation_id"])]
    adds = k[1:]
    assert adds["region"].tolist() == ["outer"] * 2 + ["inner"] * 3 + ["outer"] * 4 + [""] * 5
    assert set(adds["attribution"][:9]) == {"stream"}
    _inside_intervals(p)


def test_cupy_and_triton_work_from_a_worker_thread():
    cp = pytest.importorskip("cupy")
    triton = pytest.importorskip("triton")
    import triton.language as tl

    @triton.jit
    def bump(x_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1, mask=i < n)

    s = cp.cuda.Stream(non_blocking=True)
    ts = torch.cuda.ExternalStream(s.ptr)
    y = torch.zeros(1 << 16, device="cuda")
    x = cp.arange(1 << 16, dtype=cp.float32)
    bump[(64,)](y, y.numel(), BLOCK=1024)  # compile outside the trace

    def worker():
        with s:
            for _ in range(3):
                cp.multiply(x, 2, out=x)
        with torch.cuda.stream(ts):
            for _ in range(2):
                bump[(64,)](y, y.numel(), BLOCK=1024)  # a driver-API launch

    with gp.profile(memory=False) as p:
        with gp.region("cupy_stream", stream=s):
            t = threading.Thread(target=worker)
            t.start()
            t.join()
        s.synchronize()
    k = p.kernels
    assert len(k) == 5 and (k["region"] == "cupy_stream").all(), k[["name", "region"]]
    assert (k["attribution"] == "stream").all()


def test_region_open_when_the_profile_stops_and_a_thread_that_dies_in_a_region():
    x = torch.randn(1 << 16, device="cuda")
    r = gp.region("left_open")
    p = gp.profile(memory=False).start()
    r.__enter__()

    s2 = torch.cuda.Stream()

    def dies():  # the thread ends with its region open: it stays open, on its own stream
        with torch.cuda.stream(s2):
            gp.region("thread_died", stream=s2).__enter__()
            x.mul_(1.0)

    t = threading.Thread(target=dies)
    t.start()
    t.join()
    t2 = threading.Thread(target=lambda: x.add_(1))  # enqueued on the open region's stream
    t2.start()
    t2.join()
    stopper = threading.Thread(target=p.stop)  # a profile stopped from another thread
    stopper.start()
    stopper.join()
    r.__exit__(None, None, None)
    k = p.kernels[np.argsort(p.kernels["correlation_id"])]
    assert k["region"].tolist() == ["thread_died", "left_open"], k[["region", "attribution"]]
    assert k["attribution"].tolist() == ["launch", "stream"]
    # the dead thread's region is closed as failed once gpuprofile sees the thread gone (its
    # exit is noticed by records() and reset(), shortly after join() returns)
    for _ in range(100):
        rec = gp.records()[gp.records()["name"] == "thread_died"][-1]
        if not rec["open"]:
            break
        time.sleep(0.01)
    assert not rec["open"] and rec["failed"] and np.isnan(rec["gpu_ms"]), rec
    torch.cuda.synchronize()
    with gp.profile(memory=False) as again, gp.region("next"):
        x.add_(1)
    assert again.kernels["region"].tolist() == ["next"]


def test_regions_after_many_traced_steps_do_not_hang():
    # The CUDA_EVENT + SYNCHRONIZATION kinds the stream rule used before made a later region entry
    # on a torch or CuPy stream hang (H100, 2026-11-25); the rule now needs no extra CUPTI kind.
    # In a fresh process with a timeout, so that a hang fails this test instead of the suite.
    rc, out = _fresh("""
        import threading, cupy as cp, torch, gpuprofile as gp
        model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                    torch.nn.Linear(256, 1)).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        x = torch.randn(64, 256, device="cuda")
        ts, cs = torch.cuda.Stream(), cp.cuda.Stream(non_blocking=True)
        for i in range(6):
            with gp.profile(memory=i % 2 == 0) as p:
                with gp.region("forward"):
                    loss = model(x).square().mean()
                with gp.region("backward"):
                    loss.backward()
                with gp.region("optimizer"):
                    opt.step(); opt.zero_grad()
            assert (p.kernels["region"] != "").mean() > 0.95, p.summary()
        for _ in range(200):
            with torch.cuda.stream(ts), gp.region("torch_stream", stream=ts):
                x.mul_(1.0)
            with cs, gp.region("cupy_stream", stream=cs):
                cp.ones(16).sum()
            with gp.region("default"):
                x.add_(0)
        torch.cuda.synchronize()
        print(gp.report())
        print("OK")
    """, timeout=120)
    assert rc == 0 and "OK" in out, out
