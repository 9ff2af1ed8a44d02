"""The orchestration of metrics() and region(metrics=...) on a CPU: CUPTI's range profiler and
launch log are replaced by a fake that follows their contract (a pass loop until every pass is
submitted, ranges per kernel or per push, dropped ranges), so the pass loop, the replay checks,
cleanup after failures and result assembly are tested without a GPU. The GPU tests check the
real thing."""

import pytest

import gpuprofile as gp
from gpuprofile import _C
from gpuprofile.counters import catalog as _catalog
from gpuprofile.counters import metrics as counters
from gpuprofile.counters.metric_sets import DURATION

DRAM = "dram__bytes_read.sum"


class FakeCupti:
    """The launch log and the range profiler's observable behaviour."""

    def __init__(self):
        self.launched = []  # names since the last take
        self.profilers = []
        self.log_on = False
        self.log_fails = False
        self.flush_on = False
        self.events = []  # "flush" (before a pass), "start", launched names, in order

    # launch log
    def log_start(self):
        if self.log_fails:
            raise _C.CuptiError("CUPTI is already in use in this process")
        self.log_on = True
        self.launched = []

    def log_take(self):
        names, self.launched = self.launched, []
        return names, True

    def log_stop(self):
        self.log_on = self.flush_on = False

    def log_flush(self, on):
        assert self.log_on or not on
        self.flush_on = bool(on)

    def l2_flush(self):  # _C._l2_flush: outside any pass
        assert not any(p.started for p in self.profilers)
        self.events.append("flush")

    def launch(self, name):
        names = [_C._L2_FLUSH_KERNEL, name] if self.flush_on else [name]
        for n in names:  # a flush before each launch is a kernel (and range) of its own
            self.launched.append(n)
            self.events.append(n)
            for p in self.profilers:
                p.kernel(n)


class FakeRangeProfiler:
    passes_needed = 1
    fail_decode = False

    def __init__(self, cupti, config, names, range="user", replay="user", max_ranges=1):
        assert not (range == "user" and replay == "kernel")
        self.cupti, self.names, self.range, self.replay = cupti, list(names), range, replay
        self.max_ranges = max_ranges
        self.started = self.closed = False
        self.open_range = None
        self.passes = 0
        self.pass_kernels = []
        self.ranges = []
        self.counter_data_bytes = 1024 * max_ranges
        cupti.profilers.append(self)

    def kernel(self, name):
        if self.started:
            self.pass_kernels.append(name)

    def start(self):
        assert not self.started and not self.closed
        self.cupti.events.append("start")
        self.started = True
        self.pass_kernels = []

    def push(self, name):
        assert self.range == "user" and self.open_range is None
        self.open_range = name

    def pop(self):
        assert self.open_range is not None
        self.ranges = [self.open_range]
        self.open_range = None

    def stop(self):
        assert self.started and self.open_range is None
        self.started = False
        self.passes += 1
        if self.range == "auto":
            self.ranges = list(range(len(self.pass_kernels)))
        return self.replay == "kernel" or self.passes >= self.passes_needed

    def decode(self):
        if self.fail_decode:
            raise _C.CuptiError("cuptiRangeProfilerDecodeData failed: fake")
        return max(0, len(self.ranges) - self.max_ranges) if self.range == "auto" else 0

    def evaluate(self, host):
        kept = self.ranges[: self.max_ranges]
        out = []
        for i, r in enumerate(kept):
            values = tuple(1000.0 * (i + 1) if m == DURATION else float(i + 1) for m in self.names)
            out.append((str(r) if self.range == "auto" else r, values))
        return out

    def close(self):
        self.closed = True
        self.cupti.profilers.remove(self)


@pytest.fixture
def fake(monkeypatch):
    cupti = FakeCupti()
    monkeypatch.setattr(_catalog, "device_chip", lambda kind="range": ("GH100", None))
    monkeypatch.setattr(_C, "_launch_log_start", cupti.log_start)
    monkeypatch.setattr(_C, "_launch_log_take", cupti.log_take)
    monkeypatch.setattr(_C, "_launch_log_stop", cupti.log_stop)
    monkeypatch.setattr(_C, "_launch_log_flush", cupti.log_flush)
    monkeypatch.setattr(_C, "_l2_flush", cupti.l2_flush)
    monkeypatch.setattr(_C, "_synchronize", lambda: None)
    made = []

    def factory(*args, **kwargs):
        p = FakeRangeProfiler(cupti, *args, **kwargs)
        made.append(p)
        return p

    monkeypatch.setattr(_C, "RangeProfiler", factory)
    monkeypatch.setattr(FakeRangeProfiler, "passes_needed", 1)
    monkeypatch.setattr(FakeRangeProfiler, "fail_decode", False)
    cupti.made = made
    return cupti


def two_kernels(cupti):
    cupti.launch("copy(float4 const*)")
    cupti.launch("fma(float*)")


def test_per_kernel_runs_warmup_and_every_pass(fake):
    FakeRangeProfiler.passes_needed = gp.metric_passes("sol", chip="GH100")
    setups = []
    r = gp.metrics(two_kernels, fake, metrics="sol", setup=lambda: setups.append(1))
    p = fake.made[0]
    # sized by the warm-up: two kernels, each with the L2 flush before it (a range of its own)
    assert (p.range, p.replay, p.max_ranges) == ("auto", "user", 4)
    assert r.passes == 9 and r.calls == 10 and len(setups) == 10
    assert [k.name for k in r.kernels] == ["copy(float4 const*)", "fma(float*)"]
    assert r[DURATION] == 6000.0 and r.aggregation[DURATION] == "sum"  # ranges 1 and 3 kept
    assert p.closed and not fake.log_on and not fake.flush_on
    assert r.counter_data_bytes == 4096 and r.ranges == "auto" and r.replay == "user"
    assert (r.cache_control, r.clock_control) == ("all", "none")
    # the warm-up runs without flushes; each pass flushes before each kernel
    warm, first_pass = fake.events[:2], fake.events[2:7]
    assert warm == ["copy(float4 const*)", "fma(float*)"]
    assert first_pass == ["start", _C._L2_FLUSH_KERNEL, "copy(float4 const*)", _C._L2_FLUSH_KERNEL,
                          "fma(float*)"]
    assert "L2 flushed before each kernel" in str(r) and r.to_dict()["cache_control"] == "all"


def test_per_kernel_without_flush(fake):
    r = gp.metrics(two_kernels, fake, metrics=[DRAM], cache_control="none")
    assert fake.made[0].max_ranges == 2 and _C._L2_FLUSH_KERNEL not in fake.events
    assert r.cache_control == "none" and [k.name for k in r.kernels][1] == "fma(float*)"
    assert r[DURATION] == 3000.0 and "caches: not flushed" in str(r)


def test_per_call_flushes_before_each_pass_outside_the_range(fake):
    FakeRangeProfiler.passes_needed = gp.metric_passes("sol", chip="GH100")
    r = gp.metrics(two_kernels, fake, metrics="sol", per="call", setup=lambda: None)
    passes = [e for e in fake.events if e in ("flush", "start")]
    assert passes == ["flush", "start"] * r.passes and _C._L2_FLUSH_KERNEL not in fake.events
    assert r.cache_control == "all" and "L2 flushed before each pass" in r.state()
    gp.metrics(two_kernels, fake, metrics="sol", per="call", cache_control="none")
    assert fake.events.count("flush") == r.passes > 1


@pytest.mark.parametrize("bad", ["l2", None, "ALL"])
def test_cache_control_is_checked_before_anything_runs(fake, bad):
    with pytest.raises(ValueError, match="cache_control must be one of"):
        gp.metrics(two_kernels, fake, metrics=[DRAM], cache_control=bad)
    assert fake.made == [] and fake.events == []


def test_setup_kernels_are_not_counted_as_the_pass_launches(fake):
    FakeRangeProfiler.passes_needed = 2
    r = gp.metrics(two_kernels, fake, metrics=[DRAM], setup=lambda: fake.launch("restore"))
    assert [k.name for k in r.kernels] == ["copy(float4 const*)", "fma(float*)"]
    assert fake.made[0].max_ranges == 4  # the warm-up counted fn's two kernels, not setup's


def test_per_call_is_one_user_range(fake):
    r = gp.metrics(two_kernels, fake, metrics=[DRAM], per="call")
    p = fake.made[0]
    assert (p.range, p.max_ranges) == ("user", 1)
    assert [k.name for k in r.kernels] == ["two_kernels"]
    assert r[DRAM] == 1.0 and r.aggregation[DRAM] == "exact"


def test_without_warmup_the_default_capacity_is_used(fake):
    gp.metrics(two_kernels, fake, metrics=[DRAM], warmup=False, cache_control="none")
    assert fake.made[0].max_ranges == counters.DEFAULT_MAX_KERNELS
    gp.metrics(two_kernels, fake, metrics=[DRAM], warmup=False, max_kernels=5)
    assert fake.made[1].max_ranges == 2 * 5  # each kernel and the flush before it
    gp.metrics(two_kernels, fake, metrics=[DRAM], warmup=False)  # the same memory in all
    assert fake.made[2].max_ranges == counters.DEFAULT_MAX_KERNELS


def test_fn_raising_in_pass_two_closes_everything(fake):
    FakeRangeProfiler.passes_needed = 3
    runs = []

    def flaky(cupti):
        runs.append(1)
        two_kernels(cupti)
        if len(runs) == 3:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        gp.metrics(flaky, fake, metrics=[DRAM])
    assert fake.made[0].closed and not fake.log_on
    assert _C._counters_holder() is None


def test_not_replayable_fn_is_refused_before_its_pass_stops(fake):
    FakeRangeProfiler.passes_needed = 3
    runs = []

    def grows(cupti):
        runs.append(1)
        for _ in range(len(runs)):
            cupti.launch("k")

    with pytest.raises(gp.GpuProfileError, match="launched 2 kernels in pass 1 and 3 in pass 2"):
        gp.metrics(grows, fake, metrics=[DRAM], max_kernels=8)
    assert fake.made[0].closed


def test_dropped_kernels_raise(fake):
    def three(cupti):
        for _ in range(3):
            cupti.launch("k")

    with pytest.raises(ValueError, match=r"more kernels than the 2 profiled per pass \(1 not"):
        gp.metrics(three, fake, metrics=[DRAM], warmup=False, max_kernels=2)
    assert fake.made[0].closed and fake.made[0].max_ranges == 4
    with pytest.raises(ValueError, match=r"more kernels than the 2 profiled per pass \(1 not"):
        gp.metrics(three, fake, metrics=[DRAM], warmup=False, max_kernels=2, cache_control="none")


def test_without_the_launch_log_kernels_get_numbers(fake):
    fake.log_fails = True
    r = gp.metrics(two_kernels, fake, metrics=[DRAM], max_kernels=4, cache_control="none")
    assert [k.name for k in r.kernels] == ["kernel #0", "kernel #1"]
    assert any("CUPTI is already in use" in n for n in r.notes)
    # the flushes' ranges cannot be told from the kernels' without the log: refused, not guessed
    with pytest.raises(gp.GpuProfileError, match="launch callbacks, which are unavailable"):
        gp.metrics(two_kernels, fake, metrics=[DRAM], max_kernels=4)
    assert gp.metrics(two_kernels, fake, metrics=[DRAM], per="call").cache_control == "all"


def test_region_with_a_one_pass_set(fake):
    with gp.region("flow-one", metrics=[DRAM]):
        two_kernels(fake)
    r = gp.region_metrics("flow-one")
    p = fake.made[0]
    assert (p.range, p.replay) == ("user", "user") and p.closed
    assert r.replay == "user" and r.kernels[0].name == "flow-one" and r[DRAM] == 1.0
    assert gp.stats("flow-one").count == 1
    assert fake.events[:2] == ["flush", "start"] and r.cache_control == "all"
    with gp.region("flow-warm", metrics={"metrics": [DRAM], "cache_control": "none"}):
        two_kernels(fake)
    assert fake.events.count("flush") == 1 and gp.region_metrics("flow-warm").cache_control == "none"


@pytest.mark.parametrize("spec, message", [
    ({"metrics": "sol", "cache_control": "some"}, "cache_control must be one of"),
    ({"cache_control": "none"}, "takes the keys 'metrics' \\(required\\)"),
    ({"metrics": "sol", "flush": True}, "takes the keys"),
])
def test_region_spec_errors(spec, message):
    with pytest.raises(ValueError, match=message):
        counters.region_spec(spec)
    assert counters.region_spec("sol") == ("sol", "all")
    assert counters.region_spec({"metrics": [DRAM]}) == ([DRAM], "all")


def test_region_with_a_multi_pass_set_uses_kernel_replay(fake):
    with gp.region("flow-sol", metrics="sol"):
        two_kernels(fake)
    r = gp.region_metrics("flow-sol")
    p = fake.made[0]
    assert (p.range, p.replay, p.max_ranges) == ("auto", "kernel", 2 * counters.REGION_MAX_KERNELS)
    assert r.replay == "kernel" and r.passes == 9 and len(r.kernels) == 2
    assert r.kernels[1].name == "fma(float*)" and not fake.log_on and not fake.flush_on
    assert fake.events[1:] == [_C._L2_FLUSH_KERNEL, "copy(float4 const*)", _C._L2_FLUSH_KERNEL,
                               "fma(float*)"]
    assert any("first replay" in n for n in r.notes)
    assert gp.region_metrics("flow-sol", all=True) == [r]


def test_region_failure_is_stored_and_raised_on_read(fake):
    FakeRangeProfiler.fail_decode = True
    with pytest.warns(RuntimeWarning, match="counters of region 'flow-fail' failed"), \
            gp.region("flow-fail", metrics=[DRAM]):
        two_kernels(fake)
    assert fake.made[0].closed and _C._counters_holder() is None
    with pytest.raises(gp.GpuProfileError, match="collecting the counters of region 'flow-fail' failed"):
        gp.region_metrics("flow-fail")
    assert gp.stats("flow-fail").count == 1  # the region itself was recorded


def test_nested_metrics_regions_are_refused(fake, monkeypatch):
    monkeypatch.setattr(_C, "_counters_holder", lambda: "the range profiler")
    with pytest.raises(gp.GpuProfileError, match="cannot nest"), gp.region("flow-inner", metrics=[DRAM]):
        raise AssertionError("must not run")
    with pytest.raises(gp.GpuProfileError, match="cannot nest"):
        gp.metrics(two_kernels, fake, metrics=[DRAM])
    assert fake.made == []


class FakePCSampler:
    reasons = ["smsp__pcsamp_warps_issue_stalled_long_scoreboard",
               "smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued",
               "smsp__pcsamp_warps_issue_stalled_selected"]

    def __init__(self, period=0, max_pcs=4096):
        self.pcs, self.closed = {}, False
        self.totals = {"total_samples": 0, "dropped_samples": 0, "non_user_samples": 0,
                       "hardware_buffer_full": False}

    def start(self):
        pass

    def stop(self):
        self.pcs = {(1, 0, 16): ["_Z5chasePj", [90, 90, 10]]}

    def close(self):
        self.closed = True


def test_stalls_orchestration(monkeypatch):
    monkeypatch.setattr(_C, "_current_device", lambda: 0)
    capture = []
    monkeypatch.setattr(_C, "_capture_cubins", lambda pin=True: capture.append(("on", pin)))
    monkeypatch.setattr(_C, "_release_cubins", lambda unpin=False: capture.append(("off", unpin)))
    monkeypatch.setattr(_C, "PCSampler", FakePCSampler)
    monkeypatch.setattr(_C, "_sass_to_source", lambda crc, fn, off: ("chase.cu", "/src", 7))
    ran = []
    report = gp.stalls(lambda: ran.append(1))
    assert ran == [1]
    k = report["chase"]
    assert k.samples == 100 and k.shares == {"long_scoreboard": 0.9, "selected": 0.1}
    assert k.lines[0].file == "chase.cu" and k.lines[0].line == 7 and report.notes == []
    # cubins captured during the call only: a claim on CUPTI held for the rest of the process
    # kept a torch.profiler that had not run yet from ever initializing CUPTI
    assert capture == [("on", False), ("off", False)]


def test_sample_orchestration(monkeypatch):
    import struct

    class FakePmSampler:
        def __init__(self, config, names, host, interval_ns, max_samples, hw_buffer_bytes):
            self.n = len(names)
            assert interval_ns == 5000 and hw_buffer_bytes == 64 << 20

        def start(self):
            pass

        def stop(self):
            pass

        def samples(self):
            times = struct.pack("<4Q", 100, 5100, 5100, 10100)
            values = struct.pack(f"<{2 * self.n}d", *range(2 * self.n))
            return times, values, {"dropped_before_start": 1, "overflow": False, "start_timestamp": 50}

        def close(self):
            pass

    monkeypatch.setattr(_catalog, "device_chip", lambda kind="range": ("GH100", None))
    monkeypatch.setattr(_C, "_current_device", lambda: 0)
    monkeypatch.setattr(_C, "PmSampler", FakePmSampler)
    s = gp.sample(lambda: None, interval_us=5, hw_buffer_mb=64)
    a = s.arrays()
    assert list(a["start_ns"]) == [100, 5100] and list(a["end_ns"]) == [5100, 10100]
    assert a["gpu_busy_pct"][1] == 8.0 and a["gpc_clock_hz"][0] == 7.0
    assert s.info["dropped_before_start"] == 1
    with pytest.raises(ValueError, match="one-pass"):
        gp.sample(lambda: None, metrics=["sm__throughput.avg.pct_of_peak_sustained_elapsed"])


@pytest.mark.skipif(gp.device_count() > 0, reason="checks the no-device behaviour")
def test_the_c_flush_entry_points_refuse_cleanly_without_a_device():
    with pytest.raises(gp.GpuProfileError, match="needs the launch log on"):
        _C._launch_log_flush(True)
    assert _C._launch_log_flush(False) is None
    with pytest.raises(gp.NoDeviceError):
        _C._l2_flush()
    assert _C._L2_FLUSH_KERNEL == "gp_l2_flush_kernel"
