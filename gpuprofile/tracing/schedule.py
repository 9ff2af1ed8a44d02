"""Step-scheduled tracing, as torch.profiler users write it:

    with gp.profile(schedule=gp.schedule(wait=1, warmup=1, active=3, repeat=2),
                    on_trace_ready=lambda p: p.export_chrome_trace(f"step{p.step_num}.json")) as p:
        for batch in loader:
            train_step(batch)
            p.step()                      # the end of one step, the start of the next

`schedule(...)` is a pure function of the step number (ProfilerAction per step, as
torch.profiler.schedule). ScheduledProfile turns the actions into gpuprofile.profile() traces:
one Profile per cycle, started at its first active step and stopped after its last, handed to
on_trace_ready. Warm-up steps hold CUPTI's activity kinds enabled without keeping their records
(an activity.Collector of the same kinds), so enabling CUPTI, its buffers and its first flush
fall before the recorded steps; the recorded profile starts while the warm-up consumer still
holds the kinds, so they are never switched off in between and nothing waits for the GPU there.
"""

from __future__ import annotations

import contextlib
import enum
import operator
from dataclasses import dataclass
from typing import Any

from .. import _C


class ProfilerAction(enum.Enum):
    """What the profiler does during one step (torch.profiler.ProfilerAction's names)."""

    NONE = 0  # not traced
    WARMUP = 1  # CUPTI enabled, records thrown away
    RECORD = 2  # traced
    RECORD_AND_SAVE = 3  # traced, the cycle's last step: its trace goes to on_trace_ready after it


def _count(name: str, value, least: int) -> int:
    if isinstance(value, bool):
        raise TypeError(f"schedule({name}=...) must be an int, got {value!r}")
    try:
        value = operator.index(value)  # NumPy integers too
    except TypeError:
        raise TypeError(f"schedule({name}=...) must be an int, got {value!r}") from None
    if value < least:
        raise ValueError(f"schedule({name}=...) must be >= {least}, got {value}")
    return value


@dataclass(frozen=True)
class Schedule:
    """Which steps are traced: skip_first steps untraced, then cycles of `wait` untraced,
    `warmup` warm-up and `active` traced steps, `repeat` times (0: until the loop ends). Call it
    with a step number (from 0) for that step's ProfilerAction."""

    wait: int
    warmup: int
    active: int
    repeat: int = 0
    skip_first: int = 0

    def __post_init__(self):
        for name, least in (("wait", 0), ("warmup", 0), ("active", 1), ("repeat", 0),
                            ("skip_first", 0)):
            object.__setattr__(self, name, _count(name, getattr(self, name), least))

    @property
    def cycle(self) -> int:
        """Steps in one cycle: wait + warmup + active."""
        return self.wait + self.warmup + self.active

    def __call__(self, step: int) -> ProfilerAction:
        step = _count("step", step, 0)
        if step < self.skip_first:
            return ProfilerAction.NONE
        step -= self.skip_first
        if self.repeat and step // self.cycle >= self.repeat:
            return ProfilerAction.NONE
        at = step % self.cycle
        if at < self.wait:
            return ProfilerAction.NONE
        if at < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < self.cycle - 1 else ProfilerAction.RECORD_AND_SAVE


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0) -> Schedule:
    """torch.profiler.schedule's arguments: skip the first `skip_first` steps, then repeat
    cycles of `wait` untraced steps, `warmup` warm-up steps and `active` traced steps, `repeat`
    times (0: as long as the loop calls p.step()). Pass it to gpuprofile.profile(schedule=...)."""
    return Schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)


_TRACING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


class ScheduledProfile:
    """gpuprofile.profile(schedule=..., on_trace_ready=...): traces the steps the schedule
    marks active, one Profile per cycle. Use it as a context manager (or start() / stop()) and
    call step() at the end of every step. on_trace_ready(p) runs after each cycle's last step
    (and at stop() for a cycle cut short); p.profile is that cycle's Profile, and p's own
    attributes (p.kernels, p.summary(), p.export_chrome_trace(...)) read it. Without a schedule
    every step is traced, as one cycle that ends at stop()."""

    def __init__(self, make_profile, schedule: Schedule | None = None, on_trace_ready=None,
                 make_warmup=None):
        if schedule is not None and not isinstance(schedule, Schedule):
            raise TypeError(f"profile(schedule=...) takes gpuprofile.schedule(...), got {schedule!r}")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError(f"profile(on_trace_ready=...) must be callable, got {on_trace_ready!r}")
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self._make_profile = make_profile
        self._make_warmup = make_warmup or _warmup_collector
        self._next = make_profile()  # made now: a bad option is an error here, not at some step
        self._recording: Any = None  # the cycle's Profile while its steps run
        self._warming: Any = None  # the warm-up consumer while warm-up steps run
        self.profile: Any = None  # the last finished cycle's Profile
        self.step_num = 0
        self.cycles = 0  # cycles handed over (on_trace_ready calls)
        self._failed_cycle: int | None = None  # the cycle whose start failed: skipped
        self.state = "new"

    def _action(self, step: int) -> ProfilerAction:
        return self.schedule(step) if self.schedule is not None else ProfilerAction.RECORD

    # ---- the state machine --------------------------------------------------------------------

    def start(self) -> ScheduledProfile:
        if self.state != "new":
            raise _C.GpuProfileError(f"this scheduled profile was already started (it is "
                                     f"{self.state}); create a new gpuprofile.profile()")
        self.state = "running"
        try:
            self._enter(self._action(0))
        except BaseException:
            self.state = "stopped"
            raise
        return self

    def step(self) -> None:
        """The current step ended: move to the next one, starting, stopping or handing over a
        trace where the schedule says so. An error on the way (on_trace_ready raised, a start or
        a stop failed) is raised here once, after the profiler has moved on: later steps go on
        tracing. A start that failed skips the rest of its cycle; the next cycle starts afresh."""
        if self.state != "running":
            raise _C.GpuProfileError(f"step(): the scheduled profile is {self.state}, not running")
        before, after = self._action(self.step_num), self._action(self.step_num + 1)
        self.step_num += 1
        errors: list = []
        if before is ProfilerAction.RECORD_AND_SAVE:
            _attempt(errors, self._finish)
        elif before is ProfilerAction.WARMUP and after not in _TRACING + (ProfilerAction.WARMUP,):
            _attempt(errors, self._stop_warmup)
        needed = (after is ProfilerAction.WARMUP and self._warming is None
                  or after in _TRACING and self._recording is None)
        if (needed and self._failed_cycle != self._cycle(self.step_num)
                and not _attempt(errors, lambda: self._enter(after))):
            self._failed_cycle = self._cycle(self.step_num)
        if errors:
            raise errors[0]

    def _cycle(self, step: int) -> int:
        """The schedule's cycle that `step` belongs to (-1 before it, 0 without a schedule)."""
        s = self.schedule
        if s is None:
            return 0
        return -1 if step < s.skip_first else (step - s.skip_first) // s.cycle

    def _enter(self, action: ProfilerAction) -> None:
        """Start what `action` needs when nothing runs yet (the first step, or after a cycle)."""
        if self._next is None:  # a start that failed at an earlier step took it
            self._next = self._make_profile()
        if action is ProfilerAction.WARMUP:
            warming = self._make_warmup(self._next.mask)
            warming.start()
            self._warming = warming
        elif action in _TRACING:
            recording, self._next = self._next, None
            try:
                recording.start()  # while a warm-up consumer still holds the kinds
            finally:
                self._stop_warmup()
            self._recording = recording

    def _stop_warmup(self) -> None:
        warming, self._warming = self._warming, None
        if warming is not None:
            warming.stop(wait=False)

    def _finish(self) -> None:
        """Stop the recording profile and hand it over (nothing when its start failed)."""
        recording, self._recording = self._recording, None
        if recording is None:
            return
        if self._next is None:
            self._next = self._make_profile()
        recording.stop()
        self.profile = recording
        self.cycles += 1
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def stop(self) -> ScheduledProfile:
        """Ends the loop: a cycle cut short is stopped and handed over (its steps are all
        recorded ones); a warm-up in progress is dropped."""
        if self.state != "running":
            raise _C.GpuProfileError(f"stop(): the scheduled profile is {self.state}, not running")
        self.state = "stopped"
        try:
            self._stop_warmup()
        finally:
            if self._recording is not None:
                self._finish()
        return self

    def __enter__(self) -> ScheduledProfile:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.stop()
            return
        self.state = "stopped"
        with contextlib.suppress(Exception):  # never replace the body's exception
            self._stop_warmup()
        recording, self._recording = self._recording, None
        if recording is not None:
            with contextlib.suppress(Exception):
                recording.stop()
            self.profile = recording  # stopped, or partial: not handed to on_trace_ready

    # ---- results: the last finished cycle ----------------------------------------------------

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        profile = self.__dict__.get("profile")
        if profile is None:
            raise _C.GpuProfileError(f"{name}: no traced cycle has finished yet (step "
                                     f"{self.__dict__.get('step_num', 0)}; the schedule is "
                                     f"{self.__dict__.get('schedule')})")
        return getattr(profile, name)

    def __repr__(self) -> str:
        return (f"<gpuprofile.profile {self.state}, scheduled: step {self.step_num}, "
                f"{self.cycles} cycle(s) traced, {self.schedule}>")


def _attempt(errors: list, action) -> bool:
    """Run action(); an Exception it raises is kept in `errors` (False) for step() to raise once
    it has moved on. KeyboardInterrupt and the like go through at once."""
    try:
        action()
    except Exception as e:
        errors.append(e)
        return False
    return True


def _warmup_collector(mask: int):
    from .activity import Collector

    return Collector(mask, "gpuprofile.profile(schedule=...) warm-up")


def scheduled(schedule=None, on_trace_ready=None, **flags) -> ScheduledProfile:
    """gpuprofile.profile(schedule=..., on_trace_ready=..., **flags): a ScheduledProfile whose
    cycles are gpuprofile.profile(**flags) traces."""
    from .profile import Profile

    return ScheduledProfile(lambda: Profile(**flags), schedule, on_trace_ready)
