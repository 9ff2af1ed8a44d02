"""gpuprofile.benchmark on a GPU, against ground truth: spin kernels of known duration (truth: CUPTI
kernel durations from benchmarks/cupti_truth.py in a subprocess, when torch is installed), cold vs
hot on an L2-resident read, graph mode on a launch-bound function, and faults that must leave the
device usable."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import gpuprofile as gp
from gpuprofile import _C, kernels

pytestmark = pytest.mark.gpu

SPINS_NS = (5_000, 50_000, 1_000_000)
TRUTH_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "cupti_truth.py"


@pytest.fixture(scope="module")
def spin_truth_us():
    """{ns: CUPTI median kernel duration in us}; the spin request itself without torch."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return {ns: ns / 1e3 for ns in SPINS_NS}
    cmd = [sys.executable, str(TRUTH_SCRIPT), "--spin-ns", ",".join(map(str, SPINS_NS)),
           "--read-mib", "0", "--gemm", "", "--reps", "200"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    truth = json.loads(out.stdout)
    return {ns: truth[f"spin_{ns}ns"]["cold"]["median_us"] for ns in SPINS_NS}


@pytest.mark.parametrize("ns", SPINS_NS, ids=["5us", "50us", "1ms"])
def test_spin_median_matches_ground_truth(ns, spin_truth_us):
    r = gp.benchmark(kernels.spin, ns)
    truth = spin_truth_us[ns]
    tolerance = max(0.01 * truth, 0.3)
    assert abs(r.median_us - truth) <= tolerance, (
        f"spin {ns} ns: median {r.median_us:.3f} us vs truth {truth:.3f} us (tolerance {tolerance:.3f})\n{r!r}"
    )
    assert r.clock == "cupti" and r.clock_note is None, repr(r)
    assert r.mode == "cold" and r.flush_l2 and r.gated
    assert r.converged, repr(r)
    # events around the same iterations add the GPU's launch processing
    assert r.event_median_ms > r.median_ms


def test_event_clock_still_available():
    r = gp.benchmark(kernels.spin, 50_000, clock="gpu", max_time=1)
    assert r.clock == "gpu" and r.event_median_ms is None and 0.050 < r.median_ms < 0.060


def test_fn_without_gpu_work_is_refused_not_timed():
    """A number from no kernels would be a lie: both CUPTI clocks refuse; events still time the
    empty interval when asked for by name."""
    for clock in ("cupti", "auto"):
        with pytest.raises(ValueError, match="no kernels"):
            gp.benchmark(lambda: None, clock=clock, max_time=0.5)
    assert gp.benchmark(lambda: None, clock="gpu", max_time=0.5).clock == "gpu"


def test_work_on_a_side_stream_is_timed_by_cupti():
    """A torch side stream is not ordered behind the gate or the flush, and events on the
    benchmark's stream never see its work: CUPTI times it, between device syncs, and says so."""
    torch = pytest.importorskip("torch")
    s = torch.cuda.Stream()
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)

    def f():
        with torch.cuda.stream(s):
            a @ a

    def truth_us(sync_each):
        with gp.profile(memory=False) as p:
            for _ in range(20):
                f()
                if sync_each:
                    torch.cuda.synchronize()
        # the GPU time of one call: cuBLAS's workspace memset and the GEMM
        return (int(p.kernels["duration_ns"].sum()) + int(p.memset["duration_ns"].sum())) / 20 / 1e3

    # work off the benchmark's stream is timed one call between device syncs, each call after
    # the GPU idled while the benchmark took its records: the same GEMM then ran 4.5-4.6 % longer
    # than in a loop of calls (175.0 against 167.2 us back to back, 177.3 against 169.7 us with
    # a sync after each call; H200, 2026-11-26, two runs; a third was within 3 %). The
    # measurement is of that GEMM after an idle GPU: within 6 %, and never below the truth.
    truth = truth_us(sync_each=True)
    r = gp.benchmark(f, mode="hot", max_time=1)
    assert r.clock == "cupti" and not r.gated and "other than the benchmark's" in r.clock_note, repr(r)
    assert r.event_median_ms is None
    assert truth * 0.97 <= r.median_us <= truth * 1.06, (r.median_us, truth)
    # cold (L2 flushed first): no overlap with the flush any more (it read 244 us against 170
    # when the flush ran beside the GEMM); a cold GEMM read 3.2 % over the warm truth (H200)
    cold = gp.benchmark(f, max_time=1)
    assert truth * 0.97 <= cold.median_us <= truth * 1.10, (cold.median_us, truth)
    # on its own stream the benchmark runs the calls back to back behind its gate
    back_to_back = truth_us(sync_each=False)
    with_stream = gp.benchmark(f, stream=s, mode="hot", max_time=1)
    assert with_stream.gated and with_stream.clock_note is None
    assert with_stream.median_us == pytest.approx(back_to_back, rel=0.03), (with_stream.median_us, back_to_back)


def test_cupti_durations_stay_in_ns_after_torch_profiler_ran_twice():
    """torch.profiler registers a CUPTI clock of its own (TSC ticks); once it had run twice, every
    duration read 2.1x long on an H200 until gpuprofile registered its own at each start."""
    code = """
        import numpy as np, torch, gpuprofile as gp
        from gpuprofile import kernels
        acts = [torch.profiler.ProfilerActivity.CUDA]
        out = []
        for _ in range(3):
            with torch.profiler.profile(activities=acts):
                kernels.spin(50_000); torch.cuda.synchronize()
            r = gp.benchmark(kernels.spin, 50_000, max_time=0.5)
            with gp.profile(memory=False) as p:
                kernels.spin(50_000)
            out.append((r.median_us, r.event_median_ms * 1e3, p.kernels["duration_ns"][0] / 1e3))
        print(out)
        for cupti, events, traced in out:
            assert 49 < cupti < 53 and 49 < traced < 53 and cupti < events < cupti + 6, out
        print("OK")
    """
    import textwrap
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr[-3000:]


def test_noise_target_for_50us_within_a_second():
    r = gp.benchmark(kernels.spin, 50_000)
    assert r.rel_noise <= 0.005 and r.wall_s + r.warmup_s <= 1.0, repr(r)


def test_cold_is_slower_than_hot_on_an_l2_resident_read():
    buf = kernels.DeviceBuffer(16 << 20)
    # 3 rounds a side: the gate calls a difference seen within one run 'inconclusive' (issue 44)
    cold = gp.benchmark(kernels.read, buf, bytes=16 << 20, name="cold", rounds=3)
    hot = gp.benchmark(kernels.read, buf, bytes=16 << 20, mode="hot", name="hot", rounds=3)
    assert cold.flush_l2 and not hot.flush_l2
    table = gp.compare([hot, cold])
    assert table.rows[1].verdict == "slower", repr(table)
    one_run = gp.compare([gp.benchmark(kernels.read, buf, bytes=16 << 20, mode="hot", name="hot"),
                          gp.benchmark(kernels.read, buf, bytes=16 << 20, name="cold")])
    assert one_run.rows[1].verdict == "inconclusive", repr(one_run)
    assert cold.median_ms > 1.15 * hot.median_ms, f"{cold!r}\n{hot!r}"
    assert cold.gbps is not None and 1 < cold.pct_peak_bw < 150


def test_graph_mode_on_a_launch_bound_function():
    with gp.Stream() as s:
        def twenty_tiny_spins():
            for _ in range(20):
                kernels.spin(1_000, stream=s)

        graph = gp.benchmark(twenty_tiny_spins, mode="graph", stream=s)
        hot = gp.benchmark(twenty_tiny_spins, mode="hot", stream=s)
    assert graph.graph_nodes == 20 and graph.mode == "graph"
    assert 0.020 <= graph.median_ms <= 0.050, repr(graph)
    assert graph.median_ms <= 1.15 * hot.median_ms, f"{graph!r}\n{hot!r}"


def test_graph_capture_failure_is_explained_and_harmless():
    # The launch goes to the legacy stream: CUDA refuses it (CudaError) or it escapes the capture
    # (GpuProfileError: no work captured), depending on the stream's flags.
    with gp.Stream() as s, pytest.raises(gp.GpuProfileError) as info:
        gp.benchmark(lambda: kernels.spin(1_000), mode="graph", stream=s)
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "graph capture" in notes and "stream" in notes
    assert gp.benchmark(kernels.spin, 2_000, max_time=1).median_ms > 0


@pytest.mark.parametrize("exc", [ValueError, KeyboardInterrupt])
def test_fn_raising_mid_run_releases_the_gate(exc):
    calls = []

    def fails_later():
        calls.append(1)
        kernels.spin(20_000)
        if len(calls) == 40:
            raise exc("at call 39")

    with pytest.raises(exc) as info:
        gp.benchmark(fails_later)
    if exc is ValueError:
        assert "at call 39" in " ".join(info.value.__notes__)
    r = gp.benchmark(kernels.spin, 10_000, max_time=1)
    assert r.gated and r.tainted_batches == 0 and abs(r.median_us - 10) < 2


def test_fn_that_synchronizes_is_timed_without_the_gate():
    def spin_and_sync():
        kernels.spin(20_000)
        _C._stream_synchronize(None)

    r = gp.benchmark(spin_and_sync, max_time=2)
    assert not r.gated and r.tainted_batches == 2  # two gate timeouts, then no gate
    assert 0.020 <= r.median_ms < 0.060, repr(r)


def test_sm_clock_is_reported():
    r = gp.benchmark(kernels.spin, 5_000, max_time=1)
    assert r.sm_clock_source in ("nvml", "probe")
    assert 100 < r.sm_clock_mhz_start < 5000 and 100 < r.sm_clock_mhz_end < 5000
    probe = _C._bench_sm_clock(r.device_index, None, True)
    assert probe["source"] == "probe" and 100 < probe["mhz"] < 5000


def test_roofline_fields_on_gpu():
    buf = kernels.DeviceBuffer(64 << 20)
    r = gp.benchmark(kernels.read, buf, bytes=64 << 20, flops=1 << 20, peak="fp32", max_time=1)
    info = gp.device_info(r.device_index)
    assert r.peak_name == "fp32" and r.peak_tflops == info.peak_fp32_tflops
    assert r.bound == "memory" and r.ridge_point == pytest.approx(
        info.peak_fp32_tflops * 1e12 / (info.peak_dram_gbps * 1e9))
    assert r.device == info.name and r.l2_flush_bytes >= 2 * info.l2_cache_bytes


def test_json_round_trip_of_a_gpu_result(tmp_path):
    r = gp.benchmark(kernels.spin, 5_000, max_time=1)
    r.save(tmp_path / "r.json")
    assert gp.BenchmarkResult.load(tmp_path / "r.json") == r


def test_torch_default_and_graph_streams():
    torch = pytest.importorskip("torch")
    a, b, c = (torch.randn(512, 512, device="cuda") for _ in range(3))
    plain = gp.benchmark(torch.mm, a, b, out=c, max_time=1)
    assert plain.median_ms > 0
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        graph = gp.benchmark(lambda: torch.mm(a, b, out=c), mode="graph", stream=s, max_time=1)
    assert graph.graph_nodes >= 1
    assert graph.median_ms == pytest.approx(plain.median_ms, rel=0.5)
