"""Step-scheduled profiling (gp.schedule, gp.profile(schedule=..., on_trace_ready=...), p.step())
and summary(sort_by=, row_limit=), without a device: the schedule is a pure function, the
ScheduledProfile state machine runs on fake profiles that log what they were asked to do, and
summaries come from synthetic records."""

import pytest
import synthetic as S

import gpuprofile as gp
from gpuprofile.tracing.profile import Profile
from gpuprofile.tracing.schedule import ProfilerAction, Schedule, ScheduledProfile
from gpuprofile.tracing.summary import GroupRow, sort_rows

N, W, R, S_ = (ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD,
               ProfilerAction.RECORD_AND_SAVE)


def actions(schedule, steps):
    return [schedule(i) for i in range(steps)]


def test_schedule_actions_follow_torch_profiler():
    assert actions(gp.schedule(wait=1, warmup=1, active=3), 11) == [
        N, W, R, R, S_, N, W, R, R, S_, N]
    assert actions(gp.schedule(wait=1, warmup=1, active=2, repeat=1, skip_first=2), 9) == [
        N, N, N, W, R, S_, N, N, N]
    assert actions(gp.schedule(wait=0, warmup=0, active=1), 3) == [S_, S_, S_]
    assert actions(gp.schedule(wait=2, warmup=0, active=2, repeat=2), 10) == [
        N, N, R, S_, N, N, R, S_, N, N]
    assert gp.schedule(wait=1, warmup=2, active=3).cycle == 6


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(wait=1, warmup=1, active=0), ValueError, "active=...\\) must be >= 1, got 0"),
    (dict(wait=-1, warmup=1, active=1), ValueError, "wait"),
    (dict(wait=1, warmup=1, active=1, repeat=-2), ValueError, "repeat"),
    (dict(wait=1, warmup=1, active=1, skip_first=-1), ValueError, "skip_first"),
    (dict(wait=1.0, warmup=1, active=1), TypeError, "wait=...\\) must be an int, got 1.0"),
    (dict(wait=True, warmup=1, active=1), TypeError, "wait"),
])
def test_schedule_arguments_are_checked(kwargs, error, match):
    with pytest.raises(error, match=match):
        gp.schedule(**kwargs)


def test_numpy_integers_are_ints():
    np = pytest.importorskip("numpy")
    s = gp.schedule(wait=np.int64(1), warmup=np.int32(0), active=np.uint8(2))
    assert (s.wait, s.active) == (1, 2) and type(s.wait) is int
    assert s(np.int64(2)) is ProfilerAction.RECORD_AND_SAVE


def test_schedule_takes_keywords_and_step_numbers_from_zero():
    with pytest.raises(TypeError):
        gp.schedule(1, 1, 3)  # keyword-only, as torch.profiler.schedule
    with pytest.raises(ValueError, match="step"):
        gp.schedule(wait=0, warmup=0, active=1)(-1)


class Log:
    """What the fakes were asked to do, with the step number of the profiler at the time."""

    def __init__(self):
        self.events = []
        self.p = None

    def add(self, *what):
        self.events.append((self.p.step_num, *what))


class FakeProfile:
    mask = 0x2B

    def __init__(self, log, n):
        self.log, self.n, self.state = log, n, "new"

    def start(self):
        assert self.state == "new"
        self.state = "running"
        self.log.add("start", self.n)

    def stop(self):
        assert self.state == "running"
        self.state = "stopped"
        self.log.add("stop", self.n)

    def summary(self):
        return f"summary of profile {self.n}"


class FakeWarmup:
    def __init__(self, log, mask):
        self.log = log
        assert mask == FakeProfile.mask  # the warm-up enables the kinds the profile records

    def start(self):
        self.log.add("warmup start")

    def stop(self, wait=True):
        assert wait is False  # dropping warm-up records never waits for the GPU
        self.log.add("warmup stop")


def scheduled(schedule, on_trace_ready=None):
    log = Log()
    made = []

    def make():
        made.append(FakeProfile(log, len(made)))
        return made[-1]

    p = ScheduledProfile(make, schedule, on_trace_ready, make_warmup=lambda mask: FakeWarmup(log, mask))
    log.p = p
    return p, log


def run_steps(p, steps):
    with p:
        for _ in range(steps):
            p.step()


def test_cycles_record_the_active_steps_and_hand_each_over_once():
    ready = []
    p, log = scheduled(gp.schedule(wait=1, warmup=1, active=2, repeat=2),
                       lambda prof: ready.append((prof.step_num, prof.profile.n, prof.cycles)))
    run_steps(p, 10)
    assert log.events == [
        (1, "warmup start"), (2, "start", 0), (2, "warmup stop"), (4, "stop", 0),
        (5, "warmup start"), (6, "start", 1), (6, "warmup stop"), (8, "stop", 1),
    ]
    assert ready == [(4, 0, 1), (8, 1, 2)]  # after steps 3 and 7, each cycle's last active step
    assert p.cycles == 2 and p.profile.n == 1 and p.state == "stopped"
    assert p.summary() == "summary of profile 1"  # results read the last cycle's profile


def test_back_to_back_cycles_without_wait_or_warmup():
    ready = []
    p, log = scheduled(gp.schedule(wait=0, warmup=0, active=2, repeat=2),
                       lambda prof: ready.append(prof.profile.n))
    run_steps(p, 5)
    assert log.events == [(0, "start", 0), (2, "stop", 0), (2, "start", 1), (4, "stop", 1)]
    assert ready == [0, 1]


def test_a_cycle_cut_short_is_handed_over_and_a_warmup_dropped():
    ready = []
    p, log = scheduled(gp.schedule(wait=0, warmup=1, active=3), lambda prof: ready.append(prof.step_num))
    run_steps(p, 2)  # steps 0 (warm-up), 1 and 2 (recorded); the loop ends before step 3
    assert log.events == [(0, "warmup start"), (1, "start", 0), (1, "warmup stop"),
                          (2, "stop", 0)]
    assert ready == [2]
    p, log = scheduled(gp.schedule(wait=1, warmup=2, active=1), lambda prof: ready.append("no"))
    run_steps(p, 2)  # ends in the warm-up
    assert log.events == [(1, "warmup start"), (2, "warmup stop")] and ready == [2]
    with pytest.raises(gp.GpuProfileError, match="no traced cycle has finished yet"):
        _ = p.kernels


def test_without_a_schedule_every_step_is_one_cycle():
    ready = []
    p, log = scheduled(None, lambda prof: ready.append(prof.step_num))
    run_steps(p, 3)
    assert log.events == [(0, "start", 0), (3, "stop", 0)] and ready == [3]


def test_an_exception_in_the_loop_stops_without_handing_over():
    ready = []
    p, log = scheduled(gp.schedule(wait=0, warmup=0, active=4), lambda prof: ready.append(1))
    with pytest.raises(RuntimeError, match="boom"), p:
        p.step()
        raise RuntimeError("boom")
    assert log.events == [(0, "start", 0), (1, "stop", 0)] and ready == []
    assert p.state == "stopped" and p.profile.state == "stopped"


def test_state_errors():
    p, _ = scheduled(gp.schedule(wait=0, warmup=0, active=1))
    with pytest.raises(gp.GpuProfileError, match="not running"):
        p.step()
    run_steps(p, 1)
    with pytest.raises(gp.GpuProfileError, match="already started"):
        p.start()
    with pytest.raises(gp.GpuProfileError, match="not running"):
        p.stop()


def test_gp_profile_with_a_schedule_checks_its_arguments_without_a_device():
    p = gp.profile(schedule=gp.schedule(wait=1, warmup=1, active=1), memory=False)
    assert isinstance(p, ScheduledProfile) and p.state == "new" and p.step_num == 0
    assert "wait=1" in repr(p)
    assert isinstance(gp.profile(on_trace_ready=print), ScheduledProfile)
    assert isinstance(gp.profile(), Profile)
    with pytest.raises(TypeError, match="gpuprofile.schedule"):
        gp.profile(schedule=lambda step: True)
    with pytest.raises(TypeError, match="on_trace_ready"):
        gp.profile(schedule=gp.schedule(wait=0, warmup=0, active=1), on_trace_ready="trace.json")
    with pytest.raises(ValueError, match="nothing to record"):  # the profile's own checks, now
        gp.profile(schedule=gp.schedule(wait=0, warmup=0, active=1), kernels=False,
                   memcpy=False, memset=False, memory=False)
    assert isinstance(gp.schedule(wait=0, warmup=0, active=1), Schedule)


# ---- summary(sort_by=..., row_limit=...) -------------------------------------------------------

def row(key, calls, total_ms, occupancy=50.0):
    return GroupRow(key=key, calls=calls, total_ms=total_ms, mean_us=total_ms * 1e3 / calls,
                    min_us=1.0, max_us=9.0, pct_busy=10.0, occupancy_pct=occupancy, limiter="")


def test_sort_rows_by_column_alias_and_name():
    rows = [row("b", 3, 1.0, float("nan")), row("a", 1, 5.0, 20.0), row("c", 3, 2.0, 70.0)]
    assert [r.key for r in sort_rows(rows, "total_ms")] == ["a", "c", "b"]
    assert [r.key for r in sort_rows(rows, "cuda_time_total")] == ["a", "c", "b"]
    assert [r.key for r in sort_rows(rows, "calls")] == ["b", "c", "a"]  # ties by name
    assert [r.key for r in sort_rows(rows, "count")] == ["b", "c", "a"]
    assert [r.key for r in sort_rows(rows, "occupancy_pct")] == ["c", "a", "b"]  # NaN last
    assert [r.key for r in sort_rows(rows, "key")] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="sort_by=...\\) must be one of .*got 'cpu_time'"):
        sort_rows(rows, "cpu_time")


def test_profile_summary_sorts_and_limits_rows():
    k, ext = S.kernels(7, names=3)  # kernel_0 runs 3 times, kernel_1 and kernel_2 twice
    p = Profile._from_window(S.window(k, ext), None, S.LIMITS)
    full = p.summary()
    assert [r.key for r in full.by_kernel] == ["kernel_0(float*)", "kernel_1(float*)",
                                               "kernel_2(float*)"]
    top = p.summary(sort_by="calls", row_limit=1)
    assert [(r.key, r.calls) for r in top.by_kernel] == [("kernel_0(float*)", 3)]
    assert top.kernels == 7 and top.busy_ms == full.busy_ms  # totals of every kernel
    assert "kernels: the first 1 of 3 rows by calls (row_limit=1)" in top.notes
    assert "note: kernels: the first 1 of 3 rows" in str(top)
    by_name = p.summary(sort_by="key", row_limit=-1)
    assert [r.key for r in by_name.by_kernel] == [r.key for r in full.by_kernel]
    assert by_name.notes == full.notes
    for bad in (0, 1.5, True, "3"):
        with pytest.raises(ValueError, match="row_limit"):
            p.summary(row_limit=bad)


class Failing:
    """Makes the n-th call of a fake's method raise (once)."""

    def __init__(self, **at):
        self.at = at  # method -> the call numbers that raise
        self.calls: dict = {}

    def check(self, what):
        self.calls[what] = self.calls.get(what, 0) + 1
        if self.calls[what] in self.at.get(what, ()):
            raise OSError(28, f"No space left on device ({what} #{self.calls[what]})")


def scheduled_failing(schedule, failing, on_trace_ready=None):
    p, log = scheduled(schedule, on_trace_ready)
    make = p._make_profile

    def make_failing():
        prof = make()
        start, stop = prof.start, prof.stop

        def failing_start():
            failing.check("start")
            start()

        def failing_stop():
            failing.check("stop")
            stop()
        prof.start, prof.stop = failing_start, failing_stop
        return prof

    p._make_profile = make_failing
    p._next = make_failing()
    return p, log


def steps_raising(p, n):
    """Run n steps; the errors raised, by step number (each step's at most once)."""
    raised = {}
    for _ in range(n):
        try:
            p.step()
        except OSError as e:
            raised[p.step_num] = str(e)
    return raised


@pytest.mark.parametrize("wait", [0, 1])
def test_an_on_trace_ready_that_raises_reaches_the_user_once_and_tracing_goes_on(wait):
    """A full disk in on_trace_ready: that step raises, once; the next cycle is traced and
    handed over as if nothing happened, and no later step raises (AttributeError before)."""
    ready = []

    def export(prof):
        ready.append(prof.profile.n)
        if len(ready) == 1:
            raise OSError(28, "No space left on device")

    p, log = scheduled(gp.schedule(wait=wait, warmup=0, active=1, repeat=3), export)
    p.start()
    raised = steps_raising(p, 8)
    p.stop()
    assert raised == {1 + wait: "[Errno 28] No space left on device"}
    assert ready == [0, 1, 2] and p.cycles == 3
    assert [e[1:] for e in log.events] == [("start", 0), ("stop", 0), ("start", 1), ("stop", 1),
                                           ("start", 2), ("stop", 2)]


@pytest.mark.parametrize("active", [1, 3])
def test_a_start_that_fails_mid_cycle_skips_that_cycle_and_the_next_one_is_traced(active):
    failing = Failing(start=[2])  # the second cycle's start fails
    ready = []
    p, log = scheduled_failing(gp.schedule(wait=1, warmup=1, active=active, repeat=3), failing,
                               lambda prof: ready.append(prof.profile.n))
    p.start()
    cycle = 2 + active
    raised = steps_raising(p, 3 * cycle + 2)
    p.stop()
    assert list(raised) == [cycle + 2] and "start #2" in raised[cycle + 2]  # once, where it failed
    assert len(ready) == 2 and p.cycles == 2  # cycles 1 and 3; the 2nd was skipped, not retried
    assert failing.calls["start"] == 3  # no retry within the failed cycle
    assert [e[1] for e in log.events].count("warmup stop") == 3  # the warm-up did not linger
    assert p.state == "stopped"


def test_a_stop_that_fails_is_raised_once_and_the_next_cycle_starts():
    failing = Failing(stop=[1])
    p, log = scheduled_failing(gp.schedule(wait=0, warmup=0, active=2, repeat=3), failing)
    p.start()
    raised = steps_raising(p, 6)
    p.stop()
    assert list(raised) == [2] and "stop #1" in raised[2]
    # profile 0 is the one ScheduledProfile made before the fakes were wrapped: unused
    assert [e[1:] for e in log.events] == [("start", 1), ("start", 2), ("stop", 2), ("start", 3),
                                           ("stop", 3)]
    assert p.cycles == 2
