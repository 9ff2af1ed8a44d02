"""The Python half of CUPTI activity tracing: the record kinds of the C table (KINDS, read from
_C.RECORD_KINDS: csrc/tracing/record_kinds.c defines every kind and its layout once), and the
collection of records for every consumer (profiles, memory trackers and memory=True regions)
that is active while they arrive.

Kinds are reference-counted in C, so consumers may overlap. Every collection flushes CUPTI, takes
every record parsed since the last one and hands the same chunk to each active consumer; each
consumer keeps what falls into its own time window.
"""

from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass

import numpy as np

from .. import _C
from .._C import CuptiError
from .._foreign import torch_profiler_active
from ..distributed import clock_pair
from .attribution import attribute  # noqa: F401  (re-exported: memory, tests)

# The mask bits a consumer asks for (csrc/tracing/record_kinds.h's GP_ACT_*).
BITS: dict = dict(_C.ACTIVITY_BITS)
KERNELS, MEMCPY, MEMSET, MEMORY = BITS["kernels"], BITS["memcpy"], BITS["memset"], BITS["memory"]
REGIONS, API = BITS["regions"], BITS["api"]


@dataclass(frozen=True)
class Kind:
    """One kind of activity record: a row of the C table (_C.RECORD_KINDS, csrc/tracing/record_kinds.c),
    as Kineto's ActivityType is one kind of its trace. `raw` is the NumPy dtype of its C struct;
    `start`/`end` the columns a time window clips on (None: never clipped); `bit` the mask bit
    that asks for it."""

    name: str
    bit: int
    raw: np.dtype
    start: str | None
    end: str | None


KINDS: tuple = tuple(Kind(row["name"], row["bit"], np.dtype(row["layout"]), row["start"], row["end"])
                     for row in _C.RECORD_KINDS)
RAW = {kind.name: kind.raw for kind in KINDS}
# the dtypes by their old names (tests/synthetic.py, attribution, timeline)
KERNEL_RAW, MEMCPY_RAW, MEMSET_RAW = RAW["kernels"], RAW["memcpy"], RAW["memset"]
MEMORY_RAW, EXTCORR_RAW, REGION_STREAM_RAW = RAW["memory"], RAW["extcorr"], RAW["region_streams"]


class _ChunkMethods:
    def arrays(self) -> dict:
        return {kind.name: getattr(self, kind.name) for kind in KINDS}

    @classmethod
    def empty(cls):
        return cls()

    @classmethod
    def from_raw(cls, raw: dict):
        """From _C._activity_take()'s dict: a bytes object per kind, the names, the dropped."""
        return cls(names=raw["names"], dropped=int(raw["dropped"]),
                   **{kind.name: np.frombuffer(raw[kind.name], kind.raw) for kind in KINDS})

    @classmethod
    def concat(cls, chunks: list):
        if not chunks:
            return cls.empty()
        names = max((c.names for c in chunks), key=len)  # the table only grows
        arrays = {kind.name: np.concatenate([getattr(c, kind.name) for c in chunks])
                  for kind in KINDS}
        return cls(names=names, dropped=sum(c.dropped for c in chunks), **arrays)


def _empty(kind: Kind):
    return field(default_factory=lambda: np.empty(0, kind.raw))


# Records of one collection: a raw structured array per record kind (KINDS) as a field of its
# name (chunk.kernels, chunk.memcpy, ...; empty when not given), then the kernel-name table and
# the count of dropped records. Built from the table, so a new kind needs nothing here.
Chunk = make_dataclass(
    "Chunk", [(kind.name, np.ndarray, _empty(kind)) for kind in KINDS]
    + [("names", list, field(default_factory=list)), ("dropped", int, 0)],
    bases=(_ChunkMethods,), kw_only=True)
Chunk.__module__ = __name__


_active: list = []  # consumers currently collecting, in start order
_region_log: list = []  # MEMORY2 records kept for memory=True regions (gpuprofile.memory)


def check_no_other_profiler(what: str) -> None:
    if torch_profiler_active():
        raise CuptiError(
            f"{what}: torch.profiler is recording in this process, and only one CUPTI client can "
            "trace a process at a time (each would steal the other's activity buffers). Stop the "
            "torch profiler first, or run gpuprofile's tracing in another process. Regions and "
            "benchmark() keep working without CUPTI.")


def collect(wait: bool) -> Chunk:
    """Flush CUPTI (after waiting for the GPU when `wait`), take every parsed record and give
    them to every active consumer."""
    _C._activity_flush(wait)
    chunk = Chunk.from_raw(_C._activity_take())
    for consumer in _active:
        consumer._chunks.append(chunk)
    if len(chunk.memory) and _C._attribution_state()["memory_region_entries"]:
        _region_log.append(chunk.memory)
    return chunk


def live_allocations(raw: np.ndarray) -> np.ndarray:
    """The allocation records of `raw` (MEMORY_RAW) not freed later in it, in time order: the
    memory in use that later records start from. Pure."""
    order = np.argsort(raw["timestamp"], kind="stable")
    live: dict = {}
    for i in order:
        key = (int(raw["device"][i]), int(raw["address"][i]))
        if raw["operation"][i] == 1:
            live[key] = i
        else:
            live.pop(key, None)
    return raw[np.sort(np.fromiter(live.values(), np.int64, len(live)))]


def compact_region_log() -> None:
    """After gpuprofile.reset(): no record needs the allocation history any more, only the memory
    still in use (peaks are levels above it), so the log keeps just the live allocations: it no
    longer grows with every memory=True region of a long-running process."""
    if _region_log:
        kept = live_allocations(np.concatenate(_region_log))
        _region_log[:] = [kept] if len(kept) else []


def region_memory_log():
    """(timeline, offset_ns): every allocation and free recorded so far while memory=True
    regions or other consumers tracked memory, and the CUPTI-minus-host clock offset."""
    from .timeline import build_timeline

    collect(False)
    raw = np.concatenate(_region_log) if _region_log else np.empty(0, MEMORY_RAW)
    offset = _C._clock_offset()[0] if len(raw) else 0
    return build_timeline(raw), offset


@dataclass
class Window:
    """What one consumer collected: records from its chunks that overlap [t0, t1] (CUPTI clock),
    the clock offset to the host clock, dropped records, and whether the result is partial."""

    t0: int
    t1: int
    offset_ns: int
    offset_uncertainty_ns: int
    chunk: Chunk
    partial: bool = False
    errors: list = field(default_factory=list)
    clock_pair: dict | None = None  # CUPTI and wall-clock ns read together (distributed.clock_pair)


class Collector:
    """One consumer of activity records: enables its kinds on start, collects on stop."""

    def __init__(self, mask: int, what: str):
        self.mask = mask
        self.what = what
        self._chunks: list = []
        self.running = False

    def start(self) -> None:
        """Enables the kinds. A Ctrl-C at any point leaves nothing enabled: CPython raises it after
        a C call returns, before Python stores the result, so the acquire reports into `held`."""
        check_no_other_profiler(self.what)
        self._chunks = []
        self.window = None
        held: list = []
        try:
            _C._activity_acquire(self.mask, held)
            self.offset = _C._clock_offset()
            self.t0 = _C._cupti_timestamp()
            _active.append(self)
            self.running = True
        except BaseException:
            self.running = False
            if self in _active:
                _active.remove(self)
            if held:
                _release(self.mask)
            raise

    def stop(self, wait: bool = True) -> Window:
        """Waits for the GPU (when `wait`), collects and releases the kinds; the result is also
        kept as `self.window`. On Ctrl-C or a CUDA error during the wait, still collects what
        arrived, marks the window partial and re-raises once the kinds are released."""
        error = None
        try:
            collect(wait)
        except BaseException as exc:  # KeyboardInterrupt included: keep what arrived
            error = exc
            try:
                collect(False)
            except Exception as again:
                error.__context__ = again
        finally:
            self.running = False
            if self in _active:
                _active.remove(self)
            released = _release(self.mask)
        t1 = _C._cupti_timestamp()
        offset = _C._clock_offset()
        window = Window(
            t0=self.t0, t1=t1, offset_ns=(self.offset[0] + offset[0]) // 2,
            offset_uncertainty_ns=max(self.offset[1], offset[1], abs(self.offset[0] - offset[0])),
            chunk=clip(Chunk.concat(self._chunks), self.t0, t1), partial=error is not None,
        )
        window.clock_pair = clock_pair(window.offset_ns, window.offset_uncertainty_ns)
        self._chunks = []
        if released is not None:
            window.errors.append(str(released))
        if torch_profiler_active():  # it started inside our window: its buffers and clock took over
            window.partial = True
            window.errors.append(
                "torch.profiler started while gpuprofile traced: it takes CUPTI's activity buffers "
                "and registers its own clock, so records after its start may be missing or "
                "mistimed; start it outside gpuprofile's trace")
        self.window = window
        if error is not None:
            raise error
        return window


def _release(mask: int):
    try:
        _C._activity_release(mask)
    except CuptiError as exc:  # the kinds are released regardless; say so in the result
        return exc
    return None


def clip(chunk: Chunk, t0: int, t1: int) -> Chunk:
    """Records that overlap [t0, t1]; records without timestamps (0) are kept, and so are the
    kinds without times (Kind.start None)."""
    def keep(array, kind):
        if kind.start is None:
            return array
        start, end = array[kind.start], array[kind.end]
        return array[(start == 0) | ((end >= t0) & (start <= t1))]

    return Chunk(names=chunk.names, dropped=chunk.dropped,
                 **{kind.name: keep(getattr(chunk, kind.name), kind) for kind in KINDS})
