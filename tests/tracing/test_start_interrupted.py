"""A Ctrl-C that lands just after a C start call returned (CPython raises it there, before
Python stores anything) must leave nothing collecting: profile(), memory.track() and metrics()
undo what the call had started. The C calls are replaced by fakes that start, then raise
KeyboardInterrupt as the signal would; no device is needed."""

import pytest

import gpuprofile as gp
from gpuprofile import _C
from gpuprofile.tracing import activity, profile


@pytest.fixture
def fake_cupti(monkeypatch):
    """Activity acquire/release counted in `held`; collection returns nothing."""
    state = {"held": 0, "pylines": False, "interrupt": None}

    def acquire(mask, held=None):
        state["held"] += 1
        if held is not None:
            held.append(mask)
        if state["interrupt"] == "acquire":
            raise KeyboardInterrupt

    def release(mask):
        state["held"] -= 1

    def pylines_start(stack, excluded):
        state["pylines"] = True
        if state["interrupt"] == "pylines":
            raise KeyboardInterrupt

    def pylines_stop():
        state["pylines"] = False

    monkeypatch.setattr(_C, "_activity_acquire", acquire)
    monkeypatch.setattr(_C, "_activity_release", release)
    monkeypatch.setattr(_C, "_clock_offset", lambda: (0, 0))
    monkeypatch.setattr(_C, "_cupti_timestamp", lambda: 1)
    monkeypatch.setattr(_C, "_pylines_start", pylines_start)
    monkeypatch.setattr(_C, "_pylines_stop", pylines_stop)
    monkeypatch.setattr(_C, "_pylines_take", lambda: None)
    monkeypatch.setattr(activity, "collect", lambda wait=True: None)
    return state


@pytest.mark.parametrize("where", ["acquire", "pylines"])
def test_profile_start_interrupted(fake_cupti, where):
    fake_cupti["interrupt"] = where
    p = gp.profile(python_stacks=True)
    with pytest.raises(KeyboardInterrupt):
        p.start()
    assert fake_cupti == {"held": 0, "pylines": False, "interrupt": where}
    assert profile.running() is None and not activity._active


def test_profile_stop_has_one_error_path(fake_cupti, monkeypatch):
    """stop() stops and takes every collector whatever failed first, then raises the first
    failure: CUPTI released, the profile stopped, none running."""
    p = gp.profile(python_stacks=True).start()
    steps = []

    def failing(step):
        def call():
            steps.append(step)
            raise _C.GpuProfileError(f"{step} failed")
        return call

    monkeypatch.setattr(_C, "_pylines_stop", failing("pylines stop"))
    monkeypatch.setattr(_C, "_pylines_take", failing("pylines take"))
    with pytest.raises(_C.GpuProfileError, match="pylines stop failed"):
        p.stop()
    assert steps == ["pylines stop", "pylines take"]
    assert fake_cupti["held"] == 0 and not activity._active
    assert p.state == "stopped" and profile.running() is None


def test_memory_track_start_interrupted(fake_cupti):
    fake_cupti["interrupt"] = "acquire"
    with pytest.raises(KeyboardInterrupt):
        with gp.memory.track():
            pass
    assert fake_cupti["held"] == 0 and not activity._active


def test_profile_start_failing_leaves_nothing(fake_cupti, monkeypatch):
    """The same path for an ordinary error after the acquire (here the clock offset)."""
    def broken():
        raise _C.CuptiError("no clock")

    monkeypatch.setattr(_C, "_clock_offset", broken)
    with pytest.raises(_C.CuptiError, match="no clock"):
        gp.profile().start()
    assert fake_cupti["held"] == 0 and not activity._active and profile.running() is None


def test_metrics_launch_log_stopped_after_interrupt(monkeypatch):
    """metrics(): a Ctrl-C just after the launch log started still stops it."""
    from gpuprofile.counters import metrics

    calls = []

    def log_start():
        calls.append("start")
        raise KeyboardInterrupt

    monkeypatch.setattr(_C, "_launch_log_start", log_start)
    monkeypatch.setattr(_C, "_launch_log_stop", lambda: calls.append("stop"))
    plan = type("Plan", (), {"config": b"", "names": [], "passes": 1})()
    with pytest.raises(KeyboardInterrupt):
        metrics._collect(lambda: None, (), {}, plan, "f", "kernel", None, 0, None, "all")
    assert calls == ["start", "stop"]


def test_acquire_checks_its_held_argument():
    with pytest.raises(TypeError, match="held must be a list"):
        _C._activity_acquire(1, ())
