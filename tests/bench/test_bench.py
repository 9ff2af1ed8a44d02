"""gpuprofile.benchmark on the CPU: the stopping rule with fake sample sources, option validation,
host-clock benchmarks, faults, results (JSON, tables) and compare()."""

import json
import math
import time
import warnings

import numpy as np
import pytest

import gpuprofile as gp
from gpuprofile._stats import rel_noise
from gpuprofile.bench import benchmark as bench
from gpuprofile.bench import loop, sources
from gpuprofile.bench.options import make_options
from gpuprofile.bench.result import Batch, BenchmarkResult


class FakeSource:
    """A sample source with a fake clock: each iteration 'takes' per_iter_s of wall time and
    yields the next value of `values` (cycled). `taint` marks batch numbers as gate timeouts."""

    def __init__(self, values, per_iter_s=1e-3, max_batch=64, taint=()):
        self.values = np.asarray(values, dtype=np.float64)
        self.per_iter_s = per_iter_s
        self.max_batch = max_batch
        self.taint = set(taint)
        self.position = 0
        self.batches = []

    def run(self, n):
        assert 1 <= n <= self.max_batch
        index = np.arange(self.position, self.position + n) % self.values.size
        self.position += n
        number = len(self.batches)
        self.batches.append(n)
        wall = n * self.per_iter_s
        if number in self.taint:
            return Batch(np.empty(0), wall, wall / 2, tainted=True)
        return Batch(self.values[index], wall, wall / 2)


def options(**kw):
    return make_options(**{"warmup": 0.0, **kw})


def noisy_values(sigma, n=100_000, seed=0):
    return 1.0 + sigma * np.random.default_rng(seed).standard_normal(n)


# ---- the stopping rule ---------------------------------------------------------------------------


def test_quiet_source_stops_at_the_first_check_after_min_time():
    source = FakeSource([1.0])
    got = loop.collect(source, options(min_time=0.2), per_iter_s=1e-3)
    assert got.stop_reason == "converged"
    assert got.rel_noise == 0.0 and got.median_ms == 1.0
    last = source.batches[-1] * source.per_iter_s
    assert got.wall_s >= 0.2 > got.wall_s - last - 1e-12  # stopped by the batch that crossed min_time
    assert got.samples.size == sum(source.batches)


def test_noisy_source_runs_to_max_time_and_reports_its_noise():
    source = FakeSource(noisy_values(0.5), per_iter_s=1e-3)
    got = loop.collect(source, options(max_time=1.0, max_noise=0.001), per_iter_s=1e-3)
    assert got.stop_reason == "max_time"
    assert got.wall_s >= 1.0
    assert got.rel_noise > 0.001
    assert got.rel_noise == rel_noise(got.samples)


def test_moderate_noise_converges_once_enough_samples_are_in():
    # Half-width of the median's CI ~ 1.96 * 1.2533 * sigma / sqrt(n): 0.1 % at n ~ 15,000.
    source = FakeSource(noisy_values(0.05), per_iter_s=1e-5, max_batch=4096)
    got = loop.collect(source, options(max_noise=0.001, min_time=0.01), per_iter_s=1e-5)
    assert got.stop_reason == "converged"
    assert got.rel_noise <= 0.001
    assert 8_000 < got.samples.size < 30_000


def test_min_iters_holds_even_after_min_time():
    source = FakeSource([2.0], per_iter_s=0.3)  # each iteration alone exceeds min_time
    got = loop.collect(source, options(min_time=0.1, min_iters=12, max_time=100.0), per_iter_s=0.3)
    assert got.stop_reason == "converged"
    assert got.samples.size >= 12


def test_max_iters_stops_the_run():
    source = FakeSource(noisy_values(0.5))
    got = loop.collect(source, options(max_iters=500, max_noise=1e-6), per_iter_s=1e-3)
    assert got.stop_reason == "max_iters" and got.samples.size == 500


def test_fixed_count_gives_exactly_that_many_samples():
    source = FakeSource(noisy_values(0.5))
    opts = options(min_iters=77, max_iters=77, min_time=0.0, max_time=math.inf, fixed=True)
    got = loop.collect(source, opts, per_iter_s=1e-3)
    assert got.stop_reason == "fixed" and got.samples.size == 77


def test_tainted_batches_are_discarded():
    source = FakeSource(np.arange(1.0, 1001.0), taint={0, 2})
    got = loop.collect(source, options(min_time=0.05, max_noise=10.0), per_iter_s=1e-3)
    assert got.tainted == 2
    kept = sum(n for i, n in enumerate(source.batches) if i not in (0, 2))
    assert got.samples.size == kept
    assert got.samples[0] == source.batches[0] + 1  # the first batch's values never arrived


def test_batches_grow_and_respect_the_cap():
    source = FakeSource([1.0], per_iter_s=1e-5, max_batch=256)
    loop.collect(source, options(min_time=0.5), per_iter_s=1e-5)
    assert source.batches[0] == 200  # 2 ms of 10 us iterations
    assert max(source.batches) == 256


def test_next_batch_never_overshoots_the_time_left():
    per_iter = 1 / 1024  # exact in binary, like the times below
    k = loop.next_batch(per_iter, 5.0 - 3 * per_iter, 0, cap=10_000, max_iters=10**6, max_time=5.0)
    assert k == 4  # 3 iterations' time left, plus the one that crosses the line


def test_warm_up_runs_at_least_one_batch_and_doubles():
    source = FakeSource([1.0], per_iter_s=1e-3)
    elapsed, per_iter = loop.warm_up(source, 0.0, 1.0)
    assert source.batches == [1] and per_iter == 1e-3
    source = FakeSource([1.0], per_iter_s=1e-3)
    loop.warm_up(source, 0.02, 1e-3)
    assert source.batches[:4] == [1, 2, 4, 8]


# ---- options --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "option, value, error",
    [
        ("warmup", -1, ValueError), ("warmup", "1", TypeError), ("min_time", math.nan, ValueError),
        ("max_time", 0, ValueError), ("max_noise", 0, ValueError), ("max_noise", -0.1, ValueError),
        ("min_iters", 0, ValueError), ("min_iters", 2.5, TypeError), ("max_iters", True, TypeError),
        ("mode", "warm", ValueError), ("clock", "cpu", ValueError), ("flush_l2", 1, TypeError),
        ("flops", -5, ValueError), ("bytes", "lots", TypeError), ("name", 3, TypeError),
        ("peak", "fp64", ValueError), ("peak", -1.0, ValueError),
    ],
)
def test_invalid_options_name_the_option(option, value, error):
    with pytest.raises(error, match=option):
        gp.benchmark(lambda: None, **{option: value})


def test_inconsistent_options():
    with pytest.raises(ValueError, match="max_time"):
        gp.benchmark(lambda: None, min_time=2, max_time=1)
    with pytest.raises(ValueError, match="max_iters"):
        gp.benchmark(lambda: None, min_iters=10, max_iters=5)
    with pytest.raises(ValueError, match="hot"):
        gp.benchmark(lambda: None, mode="hot", flush_l2=True)
    with pytest.raises(ValueError, match="stream"):
        gp.benchmark(lambda: None, mode="graph")


def test_flush_default_follows_the_mode():
    assert options(mode="cold").flush_l2 is True
    assert options(mode="graph", stream=1).flush_l2 is True
    assert options(mode="hot").flush_l2 is False
    assert options(mode="cold", flush_l2=False).flush_l2 is False


def test_fn_must_be_callable():
    with pytest.raises(TypeError, match="callable"):
        gp.benchmark(42)


def test_gpu_only_options_without_a_device(has_device):
    if has_device:
        pytest.skip("checks the no-device path")
    with pytest.raises(gp.NoDeviceError, match="clock='host'"):
        gp.benchmark(lambda: None, clock="gpu")
    with pytest.raises(ValueError, match="clock='host'"):
        gp.benchmark(lambda: None, clock="host", stream=1)


def test_other_keywords_go_to_fn():
    seen = []
    r = gp.benchmark(lambda x, *, scale: seen.append(x * scale), 2, scale=3, clock="host", warmup=0,
                     min_time=0, max_iters=20, min_iters=10, max_noise=10.0)
    assert set(seen) == {6}
    assert r.iterations <= 20  # max_iters counts calls, also when tiny calls are grouped


# ---- host clock -----------------------------------------------------------------------------------


def test_host_benchmark_of_sleep():
    r = gp.benchmark(time.sleep, 0.002, clock="host", warmup=0.01, min_time=0.05, max_time=2.0,
                     max_noise=0.05)
    assert r.clock == "host" and r.inner == 1 and r.flush_l2 is False
    assert 2.0 <= r.median_ms < 10.0  # sleep never returns early; a loaded machine adds a little
    assert r.min_ms >= 2.0
    assert r.samples.size == r.iterations
    assert r.ci_low_ms <= r.median_ms <= r.ci_high_ms
    assert r.name == "sleep"


def test_host_benchmark_groups_tiny_calls():
    r = gp.benchmark(int, clock="host", warmup=0.01, min_time=0.02, max_time=1.0, max_noise=0.5)
    assert r.inner > 1 and r.iterations == r.samples.size * r.inner
    assert r.median_ms < 0.01


def test_noise_warning_names_what_was_reached():
    with pytest.warns(RuntimeWarning, match=r"stopped at max_time .* noise"):
        gp.benchmark(lambda: time.sleep(np.random.default_rng().exponential(0.001)), clock="host",
                     warmup=0, min_time=0.02, max_time=0.05, max_noise=1e-6)


def test_fn_raising_reports_the_call_number():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) == 5:
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom") as info:
        gp.benchmark(flaky, clock="host", warmup=0.01)
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "at call 4" in notes and "warm-up" in notes


def test_keyboard_interrupt_stops_cleanly():
    calls = []

    def interrupted():
        calls.append(1)
        if len(calls) == 30:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        gp.benchmark(interrupted, clock="host", warmup=0.01)
    r = gp.benchmark(int, clock="host", warmup=0, min_time=0.01, max_noise=0.5)
    assert r.iterations > 0


def test_pedantic_setup_runs_before_each_iteration_untimed():
    log = []
    opts = options(clock="host", min_iters=5, max_iters=5, min_time=0.0, max_time=math.inf, fixed=True)
    r = bench.run(lambda: log.append("call"), (), {}, opts, setup=lambda: log.append("setup"))
    assert r.iterations == 5 and r.stop_reason == "fixed"
    assert log[-10:] == ["setup", "call"] * 5


def test_setup_needs_cold_mode():
    with pytest.raises(ValueError, match="setup"):
        bench.run(lambda: None, (), {}, options(mode="hot"), setup=lambda: None)


# ---- results --------------------------------------------------------------------------------------


def host_result(name="r"):
    return gp.benchmark(sum, [1, 2, 3], clock="host", warmup=0, min_time=0.01, max_noise=0.5,
                        flops=100, bytes=8, name=name)


def test_json_round_trip(tmp_path):
    r = host_result()
    path = tmp_path / "r.json"
    r.save(path)
    back = BenchmarkResult.load(path)
    assert back == r
    assert isinstance(back.samples, np.ndarray) and back.samples.dtype == np.float64
    assert np.array_equal(back.samples, r.samples)
    assert back.to_dict() == r.to_dict()


def test_from_dict_ignores_unknown_keys():
    d = host_result().to_dict()
    d["from_the_future"] = 1
    assert BenchmarkResult.from_dict(d).median_ms == d["median_ms"]


def test_result_fields_and_tables():
    r = host_result("sum3")
    assert r.tflops == pytest.approx(100 / (r.median_ms / 1e3) / 1e12)
    assert r.gbps == pytest.approx(8 / (r.median_ms / 1e3) / 1e9)
    assert r.pct_peak_flops is None and r.bound is None  # host clock: no device peaks
    text = repr(r)
    assert text.startswith("BenchmarkResult 'sum3'") and "95% CI of median" in text and "host clock" in text
    html = r._repr_html_()
    assert html.startswith("<table>") and "sum3" in html
    d = r.to_dict(samples=False)
    assert "samples" not in d and d["clock"] == "host" and d["mode"] == "cold"


def fake_result(name, median, low, high, rounds=3):
    """A result of `rounds` rounds (3: enough for the gate's rule to call a change)."""
    r = host_result(name)
    r.median_ms, r.ci_low_ms, r.ci_high_ms = median, low, high
    r.samples = np.array([low, median, high])  # a median that is its samples' (bench/gate.py)
    r.rel_noise = (high - low) / 2 / median
    r.rounds, r.round_medians_ms = rounds, [median] * rounds
    return r


def test_compare_ratios_and_significance():
    base = fake_result("base", 1.0, 0.99, 1.01)
    slower = fake_result("slower", 1.2, 1.19, 1.21)
    same = fake_result("same", 1.005, 0.995, 1.015)
    faster = fake_result("faster", 0.5, 0.49, 0.51)
    table = gp.compare([base, slower, same, faster])
    rows = {row.name: row for row in table.rows}
    assert rows["base"].verdict == "baseline" and rows["base"].ratio == 1.0
    assert rows["slower"].verdict == "slower" and rows["slower"].ratio == pytest.approx(1.2)
    assert rows["slower"].ratio_low == pytest.approx(1.19 / 1.01)
    assert rows["same"].verdict == "same"
    assert rows["faster"].verdict == "faster"
    one_run = gp.compare([fake_result("base", 1.0, 0.99, 1.01, rounds=1),
                          fake_result("slower", 1.2, 1.19, 1.21, rounds=1)])
    assert one_run.rows[1].verdict == "inconclusive"  # one run cannot tell change from drift
    assert "ratio" in repr(table) and "<table>" in table._repr_html_()
    assert table.to_dict()["baseline"] == "base"


def test_compare_by_label_and_errors():
    a, b = fake_result("x", 1.0, 0.9, 1.1), fake_result("x", 2.0, 1.9, 2.1)
    table = gp.compare({"old": a, "new": b}, baseline="new")
    assert table.baseline == "new" and table.rows[0].ratio == 0.5
    with pytest.raises(ValueError, match="empty"):
        gp.compare([])
    with pytest.raises(TypeError, match="BenchmarkResult"):
        gp.compare([1.0])
    with pytest.raises(ValueError, match="no result"):
        gp.compare([a], baseline="nope")
    with pytest.raises(ValueError, match="out of range"):
        gp.compare([a], baseline=3)


def test_warnings_are_not_raised_when_converged():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        host_result()


# ---- ground-truth parsing (benchmarks/cupti_truth.py) ----------------------------------------------


def load_truth_module():
    from scripts import load_benchmark

    return load_benchmark("cupti_truth")


def test_truth_trace_parsing(tmp_path):
    truth = load_truth_module()
    kernel = lambda name, ts, dur: {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur}  # noqa: E731
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0.5, "dur": 3.0},
        kernel("gp_read_kernel", 10.0, 30.0), kernel("gemm", 41.0, 5.125), kernel("epilogue", 47.0, 1.0),
        kernel("gp_read_kernel", 50.0, 30.0), kernel("gemm", 81.0, 5.25), kernel("epilogue", 87.0, 1.0),
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events[::-1]}))  # order restored from ts
    kernels = truth.kernel_events(path)
    assert [k["name"] for k in kernels][:2] == ["gp_read_kernel", "gemm"]
    assert truth.per_call_us(kernels, 2, delimited=True) == [6.125, 6.25]
    assert truth.per_call_us(kernels[1:3], 1, delimited=False) == [6.125]
    with pytest.raises(RuntimeError, match="multiple of 4"):
        truth.per_call_us(kernels, 4, delimited=True)


# ---- the GPU path's orchestration, with a fake runner in place of _C.BenchRunner -------------------


class FakeRunner:
    """Stands in for _C.BenchRunner: calls fn like the C loop does and returns constant 50 us
    samples; `taint` batches (by number, gated ones only) report a gate timeout."""

    instances = []
    taint = ()

    def __init__(self, fn, args, kwargs, mode, stream, flush, setup):
        self.fn, self.args, self.kwargs, self.mode, self.setup = fn, args, kwargs or {}, mode, setup
        self.device, self.flush_bytes = 0, (100 << 20) if flush else 0
        self.calls, self.failed_call, self.closed = 0, -1, False
        self.timeouts, self.batches = [], 0
        FakeRunner.instances.append(self)

    def _call(self):
        try:
            self.fn(*self.args, **self.kwargs)
        except BaseException:
            self.failed_call = self.calls
            raise
        finally:
            self.calls += 1

    def first_call(self):
        self._call()
        return 1_000_000

    def capture(self):
        self._call()
        return 3

    def batch(self, n, timeout_ns, sync_each=False):
        self.timeouts.append(timeout_ns)
        number, self.batches = self.batches, self.batches + 1
        if self.mode != "graph":
            for _ in range(n):
                self._call()
        state = 0 if not timeout_ns else (2 if number in self.taint else 1)
        host_ns = timeout_ns if state == 2 else n * 5_000  # a blocked host waited for the timeout
        return np.full(n, 0.05).tobytes(), host_ns, state

    def close(self):
        self.closed = True


@pytest.fixture
def fake_gpu(monkeypatch):
    from gpuprofile import _C, device
    from gpuprofile.device import DeviceInfo

    info = DeviceInfo(index=0, name="Fake GPU", compute_capability=(9, 0), sm_count=132,
                      total_memory_bytes=80 << 30, l2_cache_bytes=50 << 20, sm_clock_mhz=1980.0,
                      memory_clock_mhz=2619.0, memory_bus_width_bits=5120, peak_dram_gbps=3352.0,
                      peak_fp32_tflops=66.9, peak_fp16_tensor_tflops=1070.0, max_threads_per_sm=2048,
                      max_blocks_per_sm=32, registers_per_sm=65536, shared_memory_per_sm=233472,
                      shared_memory_per_block_optin=232448, warp_size=32, uuid="0" * 32,
                      pci_bus_id="0000:00:00.0", ecc_enabled=True)
    FakeRunner.instances, FakeRunner.taint = [], ()
    monkeypatch.setattr(device, "device_count", lambda: 1)
    monkeypatch.setattr(_C, "BenchRunner", FakeRunner)
    monkeypatch.setattr(_C, "_bench_sm_clock", lambda d, s: {"mhz": 1980.0, "source": "nvml",
                                                              "throttle_reasons": 0x1 | 0x4})
    monkeypatch.setattr(bench, "_device_info", lambda index: info)
    return FakeRunner


def test_gpu_path_builds_a_complete_result(fake_gpu):
    r = gp.benchmark(lambda: None, flops=2e9, bytes=1e8, name="k")
    runner = fake_gpu.instances[0]
    assert runner.closed and runner.timeouts[0] == int(sources.GATE_TIMEOUT_S * 1e9)
    assert r.clock == "gpu" and r.mode == "cold" and r.flush_l2 and r.l2_flush_bytes == 100 << 20
    assert r.gated and r.tainted_batches == 0 and r.converged and r.median_ms == 0.05
    assert r.device == "Fake GPU" and r.sm_clock_mhz_start == 1980.0 and r.sm_clock_source == "nvml"
    assert r.throttle_reasons == ["sw_power_cap"]
    assert r.peak_name == "fp16_tensor" and r.tflops == pytest.approx(40.0)
    assert r.bound == "memory"  # 20 FLOP/B below the ridge of 1070e12 / 3352e9
    assert r.host_ms_per_iter == pytest.approx(0.005)


def test_gpu_path_gives_up_the_gate_after_two_timeouts(fake_gpu):
    fake_gpu.taint = (0, 1)  # fn blocks the host: the first two gated batches time out
    r = gp.benchmark(lambda: None)
    runner = fake_gpu.instances[0]
    assert not r.gated and r.tainted_batches == 2
    # The timed-out batches' waits must not inflate the next timeout; then no gate at all.
    assert runner.timeouts[:2] == [int(sources.GATE_TIMEOUT_S * 1e9)] * 2
    assert set(runner.timeouts[2:]) == {0}


def test_gpu_path_annotates_the_failing_call_and_closes(fake_gpu):
    calls = []

    def fails():
        calls.append(1)
        if len(calls) == 7:
            raise RuntimeError("kernel failed")

    with pytest.raises(RuntimeError, match="kernel failed") as info:
        gp.benchmark(fails)
    assert "at call 6" in " ".join(info.value.__notes__)
    assert fake_gpu.instances[0].closed


def test_gpu_path_graph_mode_captures_once(fake_gpu):
    calls = []
    r = gp.benchmark(lambda: calls.append(1), mode="graph", stream=5)
    assert r.graph_nodes == 3 and r.mode == "graph" and r.flush_l2
    assert len(calls) == 2  # the first call and the capture; replays do not call fn


def test_setup_must_return_none_or_args_and_kwargs():
    opts = options(clock="host", min_iters=3, max_iters=3, min_time=0.0, max_time=math.inf, fixed=True)
    with pytest.raises(TypeError, match=r"setup\(\) must return None or \(args"):
        bench.run(lambda: None, (), {}, opts, setup=lambda: [1, 2])


def test_workload_helpers_validate_before_touching_the_gpu():
    from gpuprofile import kernels

    with pytest.raises(ValueError, match="nbytes"):
        kernels.DeviceBuffer(8)
    with pytest.raises(TypeError, match="nbytes"):
        kernels.DeviceBuffer(16.0)
    with pytest.raises(TypeError, match="DeviceBuffer"):
        kernels.read(b"not a device buffer")


def test_stream_without_a_device(has_device):
    if has_device:
        pytest.skip("checks the no-device path")
    with pytest.raises(gp.NoDeviceError):
        gp.Stream()


def test_errors_outside_fn_are_not_blamed_on_fn():
    opts = options(clock="host", min_iters=3, max_iters=3, min_time=0.0, max_time=math.inf, fixed=True)
    with pytest.raises(TypeError) as info:
        bench.run(lambda: None, (), {}, opts, setup=lambda: "bad")
    assert "(not in fn)" in " ".join(info.value.__notes__)
    assert not hasattr(info.value, "_gpuprofile_call_in_batch")


def test_results_of_one_rank_say_so_and_save_per_rank(tmp_path, monkeypatch):
    assert "rank" not in host_result().to_dict()  # single process: unchanged files
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    r = host_result()
    assert (r.rank, r.world_size) == (2, 4)
    assert "rank" in repr(r) and "2 of 4" in repr(r)
    path = r.save(tmp_path / "r.json")
    assert path == str(tmp_path / "r.rank2.json")
    back = BenchmarkResult.load(path)
    assert (back.rank, back.world_size) == (2, 4) and back == r
