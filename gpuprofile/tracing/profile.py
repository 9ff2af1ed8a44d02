"""gpuprofile.profile(): CUPTI activity tracing of what the GPU ran (gpuprofile.tracing.profile).

    with gpuprofile.profile() as p:      # or p = gpuprofile.profile(); p.start(); ...; p.stop()
        with gpuprofile.region("attn"):
            out = attn(q, k, v)
    p.kernels          # NumPy structured array, one row per kernel
    p.memcpy, p.memset, p.memory, p.dropped
    print(p.summary())
    p.export_chrome_trace("trace.json.gz")

Kernel, copy and set times are in CUPTI's clock (ns); p.clock_offset_ns converts to the host
clock of gpuprofile.records() (time.monotonic_ns): host_ns = cupti_ns - clock_offset_ns.
"""

from __future__ import annotations

from . import pylines
from .activity import API, KERNELS, KINDS, MEMCPY, MEMSET, REGIONS, Window
from .options import OPTIONS_HELP, SIGNATURE, ProfileOptions
from .profile_data import ProfileData
from .session import ProfileSession, running

__all__ = ["Profile", "profile", "running"]


class Profile(ProfileSession, ProfileData):
    """CUPTI activity trace of everything the GPU ran between start() and stop(), in this
    process, on every device and stream. See the module docstring; build it with
    gpuprofile.profile(). The session half (collectors, start/stop) is
    tracing/session.py's, the data half (tables, exports) tracing/profile_data.py's."""

    def __init__(self, *args, **kwargs):
        """profile()'s arguments, or one ProfileOptions (tracing/options.py checks them)."""
        self.options = options = ProfileOptions.of(*args, **kwargs)
        self.mask = 0
        for kind in KINDS:  # a record kind is asked for by the option of its name
            if getattr(options, kind.name, False) is True:
                self.mask |= kind.bit
        if options.regions and self.mask & (KERNELS | MEMCPY | MEMSET):
            self.mask |= REGIONS
        self.stream_attribution = options.stream_attribution and bool(self.mask & REGIONS)
        # regions entered while this profile runs take their GPU time from its trace
        self.cupti_region_clock = options.region_clock == "cupti" and bool(self.mask & REGIONS)
        self._clock_generation: int | None = None
        self.python_stacks = options.python_stacks
        if self.python_stacks and self.mask & (KERNELS | MEMCPY | MEMSET):
            self.mask |= API  # the launches' API records: which runtime call each driver call is in
        self.python_lines: pylines.PyLines | None = None
        self.kinds = options.kinds
        self.state = "new"
        self.errors: list = []
        self._window: Window | None = None
        self._records = None
        self._cache: dict = {}
        self._limits: dict = {}
        self._running_collectors: list = []
        self._recorded_collectives = (None, "the profile did not run")  # (entries, why not)

    @classmethod
    def _from_window(cls, window: Window, records=None, limits=None, python_lines=None,
                     **flags) -> Profile:
        """A stopped profile over given records (tests, synthetic traces). `limits` maps device
        index to SMLimits; `python_lines` is a tracing.pylines.PyLines."""
        p = cls(**flags)
        p.python_lines = python_lines
        p.state = "stopped"
        p._window = window
        p._records = records
        p._limits = dict(limits or {})
        return p


def profile(*args, **kwargs) -> Profile:
    return Profile(*args, **kwargs)


profile.__signature__ = SIGNATURE  # type: ignore[attr-defined]  # one definition: options.py
profile.__doc__ = f"""Trace the GPU: `with gpuprofile.profile() as p:` or p.start() / p.stop().

    {OPTIONS_HELP}.

    Needs a device and CUPTI; raises CuptiError if another profiler holds CUPTI, GpuProfileError
    if a profile is already recording."""
