"""The session half of gpuprofile.profile(): what collects while the profile runs, and the one
start/stop path over it (tracing/profile.py's Profile; tracing/profile_data.py is the data half).

Everything that is switched on at start and read at stop is a collector, with four steps:
start(), stop() (in reverse start order), take(profile) (in start order, after every stop) and
abort() (undo a start when a later one failed). The collectors, in start order:

- _Activity: CUPTI's activity records (tracing/activity.py's Collector);
- _PythonLines: the Python line or stack of each launch (tracing/pylines.py), when asked for;
- _Regions: the region records as they are at the stop (gpuprofile.records());
- _RegionClock: regions entered while the profile runs take their GPU time from the trace
  (tracing/region_clock.py): switched on last and off first, filled in at take;
- _FlightRecorder: torch's NCCL Flight Recorder, read at the stop (tracing/collectives.py).
"""

from __future__ import annotations

import contextlib
import warnings
from typing import TypeVar

import numpy as np

from .. import _C
from . import autograd_nodes, collectives, pylines
from .activity import Collector, Window
from .region_clock import cupti_region_times

_P = TypeVar("_P", bound="ProfileSession")  # start() and stop() return the Profile itself
_running = None  # the profile collecting now: profiles do not nest


def running() -> ProfileSession | None:
    """The profile recording now, if any (e.g. one started without keeping a reference)."""
    return _running


class _Activity:
    """A profile's collector of CUPTI activity records (tracing/activity.py's Collector)."""

    def __init__(self, mask: int):
        self.collector = Collector(mask, "gpuprofile.profile()")

    def start(self) -> None:
        self.collector.start()

    def stop(self) -> None:
        self.collector.stop(wait=True)

    def take(self, profile: ProfileSession) -> None:
        profile._window = self.collector.window

    def abort(self) -> None:
        if self.collector.running:
            self.collector.stop(wait=False)


class _PythonLines:
    """A profile's collector of the Python line (or stack) of each launch (tracing/pylines.py)."""

    def __init__(self, mode: str):
        self.mode = mode
        # before any collector starts: the calibration runs a tiny CPU backward
        self.autograd: str | None = autograd_nodes.calibrate()

    def start(self) -> None:
        self.autograd = autograd_nodes.enable()
        try:
            _C._pylines_start(self.mode == "stack", pylines.excluded_prefixes())
        except BaseException:
            autograd_nodes.disable()
            raise

    def stop(self) -> None:
        _C._pylines_stop()
        autograd_nodes.disable()

    def take(self, profile: ProfileSession) -> None:
        raw = _C._pylines_take()
        profile.python_lines = pylines.PyLines.from_raw(self.mode, raw, self.autograd)
        if raw["lost"]:
            profile.errors.append(f"{raw['lost']} Python-line notes lost (no memory)")

    def abort(self) -> None:  # both are no-ops when the notes are off
        _C._pylines_stop()
        autograd_nodes.disable()
        _C._pylines_take()



class _Regions:
    """The region records at the stop, which the tables attribute work to."""

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def take(self, profile: ProfileSession) -> None:
        profile._snapshot_regions()

    def abort(self) -> None:
        pass


class _RegionClock:
    """Regions entered while the profile runs record no CUDA events; their GPU time comes from
    the trace when it stops. On after every other collector started, off before any stops: only
    a profile that runs turns it on, and regions entered from the stop on use events again."""

    def __init__(self, profile: ProfileSession):
        self.profile = profile
        self.on = False

    def start(self) -> None:
        _C._regions_set_cupti_clock(True)
        self.on = True

    def stop(self) -> None:
        # the store's generation now: a reset() during the profile left the records entered
        # after it to be filled; one after this point leaves none (the clock is off)
        self.on = False
        self.profile._clock_generation = _C._regions_set_cupti_clock(False)

    def take(self, profile: ProfileSession) -> None:
        profile._fill_region_clock()

    def abort(self) -> None:
        if self.on:
            self.on = False
            _C._regions_set_cupti_clock(False)


class _FlightRecorder:
    """The NCCL collectives torch's Flight Recorder knows of, read when the profile stops (no
    hook while it runs)."""

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def take(self, profile: ProfileSession) -> None:
        profile._recorded_collectives = collectives.read_flight_recorder()

    def abort(self) -> None:
        pass


class ProfileSession:
    """start(), stop() and the context manager of a Profile (see the module docstring)."""

    state: str
    errors: list
    python_stacks: str | None
    cupti_region_clock: bool
    mask: int
    _clock_generation: int | None
    _running_collectors: list
    _records: np.ndarray | None
    _window: Window | None

    def _collectors(self) -> list:
        """What this profile collects, in start order (the module docstring): CUPTI's activity
        (the kinds asked for, the region and API records attribution needs, the memory timeline:
        one CUPTI collector), the Python lines of launches when asked for, the region records,
        the CUPTI region clock when on, the Flight Recorder."""
        collectors: list = [_Activity(self.mask)]
        if self.python_stacks:
            collectors.append(_PythonLines(self.python_stacks))
        collectors.append(_Regions())
        if self.cupti_region_clock:
            collectors.append(_RegionClock(self))
        collectors.append(_FlightRecorder())
        return collectors

    def start(self: _P) -> _P:
        global _running
        if self.state != "new":
            raise _C.GpuProfileError(f"this profile was already started (it is {self.state}); "
                                     "create a new gpuprofile.profile() to record again")
        if _running is not None:
            raise _C.GpuProfileError("gpuprofile.profile() cannot nest: another profile is "
                                     "recording; stop it first (gpuprofile.tracing.profile.running() "
                                     "returns it; memory.track() may nest)")
        collectors = self._collectors()
        try:
            for collector in collectors:
                collector.start()
        except BaseException:  # Ctrl-C included, even one raised just after a start returned
            for collector in reversed(collectors):
                with contextlib.suppress(Exception):  # the start's own error is the one to see
                    collector.abort()
            raise
        self._running_collectors = collectors  # plain stores: no signal is raised between them
        _running = self
        self.state = "running"
        return self

    def stop(self: _P) -> _P:
        """Waits for the GPU, collects the records and stops tracing. Ctrl-C during the wait
        leaves a partial result (p.partial) and re-raises.

        One error path: every collector is stopped (in reverse start order: the region clock
        first, and the activity flush, which brings the launches' API records, after the Python
        lines stopped) and then taken, in start order, whatever failed before; the first failure
        is raised at the end."""
        global _running
        if self.state != "running":
            raise _C.GpuProfileError(f"profile.stop(): the profile is {self.state}, not running")
        collectors, self._running_collectors = self._running_collectors, []
        _running = None
        self.state = "stopped"  # before the takes: they read the profile's results
        steps = [c.stop for c in reversed(collectors)] + [(lambda c=c: c.take(self))
                                                          for c in collectors]
        first = None
        for step in steps:
            try:
                step()
            except BaseException as exc:  # Ctrl-C too: the remaining steps still run
                if first is None:
                    first = exc
        window = self._window
        if window is not None:
            self.errors += window.errors
            if window.chunk.dropped:
                warnings.warn(f"gpuprofile.profile: CUPTI dropped {window.chunk.dropped} "
                              "activity records (buffers full)", RuntimeWarning, stacklevel=3)
        if first is not None:
            raise first
        return self

    def __enter__(self: _P) -> _P:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.stop()
            return False
        try:
            self.stop()
        except Exception as stop_error:  # never replace the body's exception
            self.errors.append(f"stop() after the body raised: {stop_error}")
        return False

    def _snapshot_regions(self) -> None:
        from ..regions import records

        try:
            self._records = records()
        except Exception as exc:  # e.g. a sticky CUDA error: keep the trace without regions
            self._records = None
            self.errors.append(f"region records unavailable: {exc}")

    def _fill_region_clock(self) -> None:
        """Gives the regions entered on the CUPTI clock their GPU time from this trace
        (tracing/region_clock.py), then reads the records again. Whatever fails, those regions
        end up failed (no GPU time), never waiting for a time that cannot come."""
        generation, self._clock_generation = self._clock_generation, None
        if generation is None:
            return
        target, ms = np.empty(0, np.int64), np.empty(0)
        failed: BaseException | None = None
        try:
            w = self._stopped()
            if self._records is None:
                raise _C.GpuProfileError("the region records could not be read")
            if w.partial or w.chunk.dropped:  # records are missing: a span could come out short
                raise _C.GpuProfileError(f"the trace is incomplete ({w.chunk.dropped} records "
                                         f"dropped{', stop interrupted' if w.partial else ''})")
            rows = [self._attributed(table) for table in ("kernels", "memcpy", "memset")]
            rec, start, end, device, stream, order = (np.concatenate([r[j] for r in rows])
                                                      for j in range(6))
            target, ms = cupti_region_times(self._records, rec, start, end, w.offset_ns, w.t1,
                                            (self._intervals(), device, stream, order))
        except BaseException as exc:  # Ctrl-C too: fail them now, not leave them waiting
            self.errors.append(f"regions on the CUPTI clock have no GPU time: {exc!r}")
            failed = exc
        try:  # with `failed`, every region still waiting is failed
            _C._regions_fill_cupti(generation, np.ascontiguousarray(target, np.int64),
                                   np.ascontiguousarray(ms, np.float64), failed is not None)
        except Exception as exc:
            self.errors.append(f"regions on the CUPTI clock have no GPU time: {exc}")
        self._snapshot_regions()
        if failed is not None and not isinstance(failed, Exception):
            raise failed

