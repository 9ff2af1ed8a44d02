"""Truth checks for hardware counters on a GPU: measured values against the exact counts of the
calibration workloads (kernels/harness/workloads.cu), verdicts on kernels of known character, and the
error paths (the profiler must be usable again after any failure).

Run: python -m pytest -q -m gpu tests/counters/test_metrics_gpu.py
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import gpuprofile as gp
from gpuprofile import _C
from gpuprofile.counters.metric_sets import DRAM_READ, DRAM_WRITE, DURATION, SM_SOL, TENSOR_PIPE

pytestmark = pytest.mark.gpu

GIB = 1 << 30
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
HMMA = "sm__inst_executed_pipe_tensor_op_hmma.sum"
TENSOR_FP16_OPS = "sm__ops_path_tensor_src_fp16.sum"


@pytest.fixture(scope="module")
def copy():
    w = _C.Workload("copy", bytes=GIB)
    yield w
    w.close()


@pytest.fixture(scope="module")
def ffma():
    w = _C.Workload("ffma")
    yield w
    w.close()


@pytest.fixture(scope="module")
def mma():
    w = _C.Workload("mma")
    yield w
    w.close()


@pytest.fixture(scope="module")
def chase():
    w = _C.Workload("chase")
    yield w
    w.close()


def only_kernel(result, fragment):
    assert len(result.kernels) == 1, [k.name for k in result.kernels]
    k = result.kernels[0]
    assert fragment in k.name, k.name
    return k


# ---- truth --------------------------------------------------------------------------------------


def test_copy_moves_one_gib_each_way(copy):
    # Caches flushed before the kernel (ncu's default): every byte read comes from DRAM; of the
    # bytes written, up to an L2's worth may still sit dirty in L2 when the kernel ends, and
    # nothing dirty from before is written back inside it.
    r = gp.metrics(copy.launch, metrics=[DRAM_READ, DRAM_WRITE])
    k = only_kernel(r, "gp_copy_kernel")
    l2 = gp.device_info().l2_cache_bytes
    assert abs(k[DRAM_READ] - GIB) / GIB < 0.01, k[DRAM_READ]
    assert GIB - l2 <= k[DRAM_WRITE] <= GIB * 1.01, (k[DRAM_WRITE], l2)
    assert r.passes == 1 and r.calls == 2  # warm-up + one pass
    # Not flushed, in the steady state of repeated copies: the dirty lines the last call left are
    # written back during this one, as many as this one leaves: 1 GiB each way.
    r = gp.metrics(copy.launch, metrics=[DRAM_READ, DRAM_WRITE], cache_control="none")
    k = only_kernel(r, "gp_copy_kernel")
    assert abs(k[DRAM_READ] - GIB) / GIB < 0.01, k[DRAM_READ]
    assert abs(k[DRAM_WRITE] - GIB) / GIB < 0.01, k[DRAM_WRITE]


def test_ffma_count_is_exact(ffma):
    r = gp.metrics(ffma.launch, metrics=[FFMA])
    k = only_kernel(r, "gp_ffma_kernel")
    assert k[FFMA] == ffma.info["ffma"]


def test_ffma_is_compute_bound_near_peak(ffma):
    r = gp.metrics(ffma.launch, metrics="sol")
    k = only_kernel(r, "gp_ffma_kernel")
    assert k[SM_SOL] >= 90.0, k.values
    assert r.bound(0).bound.startswith("compute-bound")
    assert r.passes == gp.metric_passes("sol")
    assert r.calls == r.passes + 1


def test_copy_is_memory_bound(copy):
    r = gp.metrics(copy.launch, metrics="sol")
    assert r.bound(0).bound == "memory-bound", r.kernels[0].values


def test_spin_is_latency_bound():
    r = gp.metrics(gp.kernels.spin, 200_000, metrics="sol")
    k = only_kernel(r, "gp_spin_kernel")
    assert r.bound(0).bound == "latency-bound", k.values
    assert k[DURATION] >= 200_000


def test_mma_instruction_count_and_tensor_pipe(mma):
    r = gp.metrics(mma.launch, metrics=["tensor", TENSOR_FP16_OPS])
    k = only_kernel(r, "gp_mma_kernel")
    assert k[HMMA] == mma.info["mma"]
    assert k[TENSOR_PIPE] >= 90.0, k.values
    # The roofline set counts tensor-path ops as FLOPs: one m16n8k16 mma = 4096 FLOPs.
    assert k[TENSOR_FP16_OPS] == pytest.approx(mma.info["flops"], rel=1e-6)


def test_roofline_flops_of_the_ffma_kernel(ffma):
    r = gp.metrics(ffma.launch, metrics="roofline")
    f = r.flops(0)
    assert f["fp32"] == 2 * ffma.info["ffma"] + ffma.info["fadd"]
    assert f["tensor"] == 0
    c = gp.ceilings()
    point = r.roofline(c, kernel=0)
    assert point.region == "compute"
    assert 0.5 < point.efficiency < 1.1


def test_per_call_is_one_exact_range(copy):
    r = gp.metrics(copy.launch, metrics=[DRAM_READ, DRAM_WRITE], per="call")
    assert len(r.kernels) == 1 and r.aggregation[DRAM_READ] == "exact"
    assert abs(r[DRAM_READ] - GIB) / GIB < 0.02


def test_two_kernels_per_kernel_with_names(copy, ffma):
    def two():
        copy.launch()
        ffma.launch()

    r = gp.metrics(two, metrics=[DRAM_READ, FFMA])
    assert [("gp_copy_kernel" in k.name, "gp_ffma_kernel" in k.name) for k in r.kernels] == [
        (True, False), (False, True)]
    assert r[FFMA] == ffma.info["ffma"]  # totals sum counts
    assert abs(r[DRAM_READ] - GIB) / GIB < 0.01


# ---- the replay contract and error paths ----------------------------------------------------------


def test_setup_runs_before_every_run(copy):
    calls = []
    r = gp.metrics(copy.launch, metrics="sol", setup=lambda: calls.append(1))
    assert len(calls) == r.calls == r.passes + 1


def test_fn_raising_in_pass_two_leaves_the_profiler_usable(copy):
    runs = []

    def flaky():
        runs.append(1)
        copy.launch()
        if len(runs) == 3:  # warm-up, pass 1, then pass 2 raises
            raise RuntimeError("boom in pass 2")

    with pytest.raises(RuntimeError, match="boom in pass 2"):
        gp.metrics(flaky, metrics="sol")
    r = gp.metrics(copy.launch, metrics=[DRAM_READ])
    assert abs(r[DRAM_READ] - GIB) / GIB < 0.01


def test_max_passes_refuses_before_running():
    def never():
        raise AssertionError("must not run")

    with pytest.raises(ValueError, match="max_passes=1"):
        gp.metrics(never, metrics="sol", max_passes=1)
    with pytest.raises(ValueError, match="did you mean"):
        gp.metrics(never, metrics=["dram__bytes_reed.sum"])


def test_fn_that_is_not_replayable_is_detected(copy, ffma):
    runs = []

    def grows():
        runs.append(1)
        for _ in range(len(runs)):
            ffma.launch()

    with pytest.raises(gp.GpuProfileError, match="not replayable"):
        gp.metrics(grows, metrics="sol", max_kernels=16)
    gp.metrics(copy.launch, metrics=[DRAM_READ])  # usable again


def test_too_many_kernels_for_max_kernels(ffma):
    def three():
        for _ in range(3):
            ffma.launch()

    # CUPTI either drops the third range (reported as ValueError) or refuses it (CuptiError).
    with pytest.raises((ValueError, gp.CuptiError)) as info:
        gp.metrics(three, metrics=[FFMA], warmup=False, max_kernels=2)
    if info.type is ValueError:
        assert "max_kernels" in str(info.value)
    gp.metrics(ffma.launch, metrics=[FFMA])


# ---- regions ---------------------------------------------------------------------------------------


def test_region_with_a_one_pass_set(copy):
    with gp.region("metrics-one-pass", metrics=[DRAM_READ, DRAM_WRITE]):
        copy.launch()
    r = gp.region_metrics("metrics-one-pass")
    assert r.replay == "user" and r.passes == 1 and r.per == "region"
    assert abs(r[DRAM_READ] - GIB) / GIB < 0.02
    assert abs(r[DRAM_WRITE] - GIB) / GIB < 0.02
    assert gp.stats("metrics-one-pass").count == 1


def test_region_with_sol_uses_kernel_replay(copy, ffma):
    with gp.region("metrics-sol", metrics="sol"):
        ffma.launch()
        copy.launch()
    r = gp.region_metrics("metrics-sol")
    assert r.replay == "kernel" and r.passes == gp.metric_passes("sol")
    assert len(r.kernels) == 2 and "gp_ffma_kernel" in r.kernels[0].name
    assert r.kernels[0][SM_SOL] >= 90.0
    assert r.bound(1).bound == "memory-bound"
    assert r.cost_s > 0


def test_regions_with_metrics_cannot_nest(copy):
    with gp.region("outer-metrics", metrics=[DRAM_READ]):
        with pytest.raises(gp.GpuProfileError, match="cannot nest"), gp.region("inner", metrics=[DRAM_READ]):
            pass
        with pytest.raises(gp.GpuProfileError, match="cannot nest"):
            gp.metrics(copy.launch, metrics=[DRAM_READ])
        copy.launch()
    assert gp.region_metrics("outer-metrics")[DRAM_READ] > 0
    with gp.region("after-nesting", metrics=[DRAM_READ]):
        copy.launch()
    assert gp.region_metrics("after-nesting")[DRAM_READ] > 0


def test_region_body_raising_still_closes_the_collection(copy):
    with pytest.raises(KeyError), gp.region("metrics-raises", metrics=[DRAM_READ]):
        copy.launch()
        raise KeyError("body")
    assert gp.region_metrics("metrics-raises")[DRAM_READ] > 0
    gp.metrics(copy.launch, metrics=[DRAM_READ])


# ---- ceilings, PC sampling, PM sampling --------------------------------------------------------


def test_ceilings_are_measured_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPROFILE_CACHE_DIR", str(tmp_path))
    c = gp.ceilings(refresh=True)
    info = gp.device_info(_C._current_device())
    assert 0.3 * info.peak_dram_gbps * 1e9 < c.dram_bytes_per_s <= 1.05 * info.peak_dram_gbps * 1e9
    assert 0.5 * info.peak_fp32_tflops * 1e12 < c.fp32_flops_per_s <= 1.05 * info.peak_fp32_tflops * 1e12
    assert c.tensor_flops_per_s > c.fp32_flops_per_s
    stored = json.loads((tmp_path / "ceilings.json").read_text())
    assert stored["devices"][info.uuid]["dram_bytes_per_s"] == c.dram_bytes_per_s
    assert gp.ceilings() is c


def _fresh(script: str, timeout: int = 300) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                         text=True, timeout=timeout, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_stalls_of_the_pointer_chase():
    # In a fresh process: the counter tests above leave kernels that PC sampling cannot attribute
    # (see the next test).
    got = json.loads(_fresh("""
        import json, gpuprofile as gp
        chase, ffma = gp._C.Workload("chase"), gp._C.Workload("ffma")
        k = gp.stalls(chase.launch)["gp_chase_kernel"]
        f = gp.stalls(ffma.launch)["gp_ffma_kernel"]
        print(json.dumps([k.samples, k.top(5), f.shares.get("long_scoreboard", 0.0), f.top(5)]))
    """))
    samples, top, fma_long, fma_top = got
    assert samples > 1000
    assert top[0][0] == "long_scoreboard" and top[0][1] > 0.8, top
    assert fma_long < 0.05, fma_top


def test_stalls_after_counters_on_the_same_kernel_explain_themselves(ffma):
    gp.metrics(ffma.launch, metrics=[FFMA])
    with pytest.raises(gp.GpuProfileError, match="non-user kernels'.*fresh process"):
        gp.stalls(ffma.launch)


def test_stall_source_lines_in_a_fresh_process():
    # Cubins are captured when their module loads: in a fresh process, capture first, then load
    # the workloads module (the chase workload launches its init kernel at construction).
    script = textwrap.dedent("""
        import json, gpuprofile as gp
        gp.capture_cubins()
        w = gp._C.Workload("chase")
        k = gp.stalls(w.launch)["gp_chase_kernel"]
        print(json.dumps([[ln.file, ln.line, ln.samples] for ln in k.lines[:5]]))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    lines = json.loads(out.stdout.strip().splitlines()[-1])
    assert lines and lines[0][0].endswith("workloads.cu"), lines
    assert lines[0][1] > 0


def test_pm_sampling_follows_the_copy(copy):
    def twenty_copies():
        for _ in range(20):
            copy.launch()

    s = gp.sample(twenty_copies, interval_us=20)
    a = s.arrays()
    assert len(s) > 100
    assert (a["start_ns"][1:] >= a["start_ns"][:-1]).all()
    assert s.info["start_timestamp"] <= a["start_ns"][0]
    widths = a["end_ns"] - a["start_ns"]
    assert abs(float(sorted(widths)[len(widths) // 2]) - 20_000) < 2_000
    busy = a["dram_throughput_pct"][a["sm_active_pct"] > 50]
    assert len(busy) and busy.mean() > 50, a["dram_throughput_pct"]
    assert s.info["device"] == gp._C._current_device()


def test_pm_samples_in_the_kernel_trace(copy, tmp_path):
    """Samples taken during a profile land on the trace's GPU process, between its kernels."""
    def ten_copies():
        for _ in range(10):
            copy.launch()

    with gp.profile(memcpy=False, memset=False, memory=False) as p:
        s = gp.sample(ten_copies, interval_us=20)
    path = p.export_chrome_trace(str(tmp_path / "t.json"), samples=[s])
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    counters = [e for e in events if e.get("name") == "PM sampling"]
    kernels = [e for e in events if e.get("ph") == "X" and "copy" in e.get("name", "")]
    assert len(counters) == len(s) > 50 and len(kernels) == 10
    busy = [e["ts"] for e in counters if e["args"]["dram_throughput_pct"] > 50]
    assert busy and kernels[0]["ts"] - 50 <= min(busy) and max(busy) <= kernels[-1]["ts"] + \
        kernels[-1]["dur"] + 50


def test_counter_features_take_turns(copy):
    sampler = _C.PCSampler()
    try:
        with pytest.raises(gp.GpuProfileError, match="already collecting counters"):
            gp.metrics(copy.launch, metrics=[DRAM_READ])
    finally:
        sampler.close()
    gp.metrics(copy.launch, metrics=[DRAM_READ])


def test_metrics_while_torch_profiler_holds_cupti():
    # Another tool holding CUPTI (here Kineto, started first, as users do): gpuprofile must give
    # data or a clear CuptiError, never crash, and work again once the tool is gone.
    pytest.importorskip("torch")
    script = textwrap.dedent("""
        import torch, gpuprofile as gp
        w = gp._C.Workload("copy", bytes=1 << 28)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
            torch.ones(1, device="cuda")
            try:
                r = gp.metrics(w.launch, metrics=["dram__bytes_read.sum"])
                print("DURING ok", r["dram__bytes_read.sum"], r.notes)
            except gp.CuptiError as e:
                print("DURING error", e)
        r = gp.metrics(w.launch, metrics=["dram__bytes_read.sum"])
        print("AFTER", r["dram__bytes_read.sum"])
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    during = next(ln for ln in lines if ln.startswith("DURING"))
    assert during.startswith("DURING ok") or "CUPTI" in during, during
    after = float(next(ln for ln in lines if ln.startswith("AFTER")).split()[1])
    assert abs(after - (1 << 28)) / (1 << 28) < 0.02


# ---- self-check on the bundled attention kernels ---------------------------------------------


@pytest.mark.parametrize("impl", ["naive", "flash_tc"])
def test_attention_self_check(impl):
    """The bundled kernels read as they are built. Placement on the roofline (measured bytes and
    FLOPs against measured ceilings) is the verdict that does not depend on how well a kernel is
    tuned: naive attention (scores materialized in DRAM) sits left of the ridge point in every
    kernel, tensor-core flash far right of it with the tensor pipe its busiest unit. The SOL
    verdict is checked not to contradict that (mma.sync flash keeps the tensor pipe about half
    busy on Hopper, which the 60 % SOL threshold calls "mixed")."""
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng()
    # enough blocks to fill the GPU (4·16·2048/128 = 1024): a small launch reads as latency-bound
    q, k, v = (gp.kernels.to_device(rng.standard_normal((4, 16, 2048, 64)).astype(np.float16))
               for _ in range(3))
    r = gp.metrics(gp.kernels.attention, q, k, v, impl=impl, metrics=["sol", "tensor", "roofline"])
    c = gp.ceilings()
    for i in range(len(r.kernels)):
        point, sol = r.roofline(c, kernel=i), r.bound(i)
        if impl == "naive":
            assert point.region == "memory", (r.kernels[i].name, point, sol)
            assert not sol.bound.startswith("compute"), (r.kernels[i].name, sol)
        else:
            assert point.region == "compute", (r.kernels[i].name, point, sol)
            assert not sol.bound.startswith("memory"), (r.kernels[i].name, sol)
            assert r.kernels[i].values[TENSOR_PIPE] >= 40, r.kernels[i].values


def test_a_copy_engine_memcpy_says_what_it_did():
    """dst.copy_(src) in torch is a copy-engine memcpy, no kernel: a clear error that says so and
    what fn did, instead of NaN with no word (issue 30)."""
    torch = pytest.importorskip("torch")
    src = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    with pytest.raises(ValueError, match=r"no kernel.*1 copies of 256 MiB"):
        gp.metrics(lambda: dst.copy_(src), metrics=[DRAM_READ, DRAM_WRITE])
    with pytest.raises(ValueError, match="no copy or set either"):
        gp.metrics(lambda: None, metrics=[DRAM_READ])
