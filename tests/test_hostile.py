"""Hostile objects at every entry point where the C code calls back into Python (issue 23).

Each test hands an entry point an object whose protocol methods (__hash__, __eq__, __index__,
__len__, __bool__, __dlpack__, __cuda_array_interface__, __cuda_stream__, a finalizer run by the
gc) run Python that enters regions, resets them, or changes the container the C code is reading.
The rule they check (docs/architecture.md, "Callbacks and sizes"): C owns what it reads across
a callback and re-validates after it, so the result is a clean exception or the right answer,
never a crash. The memory errors themselves are caught by running these under ASan
(tools/sanitize.sh, with PYTHONMALLOC=malloc); here they check the answers are exact."""

import ctypes
import gc
import os
import sys

import numpy as np
import pytest

import gpuprofile as gp
from gpuprofile import _C

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "kernels"))
from test_attention_args import (  # noqa: E402
    DELETER,
    DLDataType,
    DLDevice,
    DLManaged,
    DLTensor,
    FakeCAI,
    FakeDLPack,
    _capsule_new,
)

from gpuprofile.kernels import attention  # noqa: E402

no_device = pytest.mark.skipif(gp.device_count() > 0, reason="checks the no-device behaviour")


# ---- region names: str subclasses whose __hash__ / __eq__ run Python ---------------------------

class EntersRegions(str):
    """A name whose hash enters `n` regions each time it is taken."""

    n = 200

    def __hash__(self):
        for _ in range(self.n):
            with gp.region("inner"):
                pass
        return str.__hash__(self)

    def __eq__(self, other):
        return str.__eq__(self, other)


class Resets(str):
    def __hash__(self):
        gp.reset()
        return str.__hash__(self)

    def __eq__(self, other):
        return str.__eq__(self, other)


class EqEntersRegions(str):
    """Equal hashes for equal text, so the second of two equal names is compared with __eq__."""

    def __hash__(self):
        return str.__hash__(self)

    def __eq__(self, other):
        for _ in range(100):
            with gp.region("inner"):
                pass
        return str.__eq__(self, other)


class HashRaises(str):
    armed = True

    def __hash__(self):
        if HashRaises.armed:
            raise RuntimeError("hash refused")
        return str.__hash__(self)

    def __eq__(self, other):
        return str.__eq__(self, other)


def export_while_names_enter_regions(count=20):
    """Enters `count` regions named by EntersRegions, then checks the raw export: exactly those
    records, although exporting them entered thousands more. Returns the export's records."""
    for i in range(count):
        with gp.region(EntersRegions(f"e{i}")):
            pass
    names, packed = _C._records()
    assert [str(n) for n in names] == [f"e{i}" for i in range(count)]
    raw = np.frombuffer(packed, dtype=np.dtype(_C._record_layout()))
    assert raw["name_index"].tolist() == list(range(count))
    assert raw["depth"].tolist() == [0] * count
    # the regions entered during the export are recorded after it, whole and closed
    recs = gp.records()
    assert len(recs) >= count + count * EntersRegions.n
    assert set(recs["name"][count:].tolist()) == {"inner"}
    assert not recs["open"].any()
    return raw


def test_records_while_names_enter_regions():
    """The records() export once wrote past its buffer here: the store grew (and moved) while it
    was being copied out. The export is the records that existed when it was called."""
    export_while_names_enter_regions()
    assert gp.stats("e7").count == 1
    assert gp.stats("e7").count == 1


def test_report_while_names_enter_regions():
    for i in range(5):
        with gp.region(EntersRegions(f"r{i}")):
            pass
    text = str(gp.report())
    for i in range(5):
        assert f"r{i}" in text


def test_records_while_a_name_resets():
    """reset() from inside the export frees the store; the export keeps what it copied."""
    for i in range(8):
        with gp.region(Resets(f"z{i}")):
            pass
    names, packed = _C._records()
    assert [str(n) for n in names] == [f"z{i}" for i in range(8)]
    assert len(packed) == 8 * np.dtype(_C._record_layout()).itemsize
    assert len(gp.records()) == 0  # the reset happened


def test_records_names_compared_with_python_eq():
    a, b = EqEntersRegions("same"), EqEntersRegions("same")
    assert a is not b
    for name in (a, b, a):
        with gp.region(name):
            pass
    names, packed = _C._records()
    raw = np.frombuffer(packed, dtype=np.dtype(_C._record_layout()))
    assert [str(n) for n in names] == ["same"]
    assert raw["name_index"].tolist() == [0, 0, 0]


def test_records_name_hash_raises():
    HashRaises.armed = True
    with gp.region(HashRaises("h")):
        pass
    with pytest.raises(RuntimeError, match="hash refused"):
        gp.records()
    HashRaises.armed = False
    assert gp.records()["name"].tolist() == ["h"]


class BoolRaises:
    def __bool__(self):
        raise ZeroDivisionError("bool refused")


class StreamProto:
    def __init__(self, result):
        self.result = result

    def __cuda_stream__(self):
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result


@pytest.mark.parametrize("kwargs, error, message", [
    ({"nvtx": BoolRaises()}, ZeroDivisionError, "bool refused"),
    ({"memory": BoolRaises()}, ZeroDivisionError, "bool refused"),
    ({"stream": StreamProto(KeyError("no stream"))}, KeyError, "no stream"),
    ({"stream": StreamProto((0, "7"))}, TypeError, "must give an int stream handle, got str"),
    ({"stream": StreamProto((0, -1))}, ValueError, "must be a non-negative integer"),
    ({"stream": StreamProto([0, 1])}, TypeError, r"must return \(version, handle\)"),
])
def test_region_arguments_that_run_python(kwargs, error, message):
    with pytest.raises(error, match=message):
        gp.region("x", **kwargs)
    assert len(gp.records()) == 0


# ---- __cuda_array_interface__: entries whose __index__ changes the dict ------------------------

class ClearsDict:
    """An int for the interface whose __index__ empties the dict it came from first (freeing the
    tuples it was read from, had the parser not held them)."""

    def __init__(self, value, owner):
        self.value, self.owner = value, owner

    def __index__(self):
        self.owner.clear()
        gc.collect()
        return self.value


def _cai_with(entry):
    q = FakeCAI()
    iface = q.__cuda_array_interface__
    if entry == "shape":
        shape = list(iface["shape"])
        shape[1] = ClearsDict(shape[1], iface)
        iface["shape"] = tuple(shape)
    elif entry == "data":
        iface["data"] = (ClearsDict(iface["data"][0], iface), False)
    elif entry == "strides":
        iface["strides"] = (3 * 17 * 64 * 2, 17 * 64 * 2, ClearsDict(64 * 2, iface), 2)
    elif entry == "version":
        iface["version"] = ClearsDict(3, iface)
        iface["stream"] = 5
    return q


@no_device
@pytest.mark.parametrize("entry", ["shape", "data", "strides", "version"])
def test_cai_entry_index_empties_the_dict(entry):
    q = _cai_with(entry)
    with pytest.raises(gp.NoDeviceError):
        attention(q, FakeCAI(), FakeCAI())
    assert q.__cuda_array_interface__ == {}  # the hostile code did run


class CollidingKey:
    """A key with the hash of 'shape' whose __eq__ raises: the lookup's error is reported, not
    taken for a missing entry."""

    def __hash__(self):
        return hash("shape")

    def __eq__(self, other):
        raise LookupError("eq refused")


def test_cai_key_eq_raises():
    q = FakeCAI()
    iface = q.__cuda_array_interface__
    del iface["shape"]
    iface[CollidingKey()] = (2, 3, 17, 64)
    with pytest.raises(LookupError, match="eq refused"):
        attention(q, FakeCAI(), FakeCAI())


class RaisingCAI:
    @property
    def __cuda_array_interface__(self):
        raise OSError("interface refused")


def test_cai_property_raises():
    with pytest.raises(OSError, match="interface refused"):
        attention(RaisingCAI(), FakeCAI(), FakeCAI())


def test_cai_shape_beyond_64_bits():
    with pytest.raises(ValueError, match="shape has too many elements for 64-bit sizes"):
        attention(FakeCAI((2**40, 2**40, 17, 64)), FakeCAI(), FakeCAI())


# ---- DLPack: capsules that lie ------------------------------------------------------------------

class NullShapeDLPack(FakeDLPack):
    """A producer whose tensor says 4 dimensions but has no shape array."""

    def _capsule(self, versioned):
        def deleter(_ptr):
            self.deleted += 1

        callback = DELETER(deleter)
        tensor = DLTensor(0x7F0000000000, DLDevice(2, 0), 4, DLDataType(2, 16, 1), None, None, 0)
        managed = DLManaged(tensor, None, callback)
        self._keep += [callback, managed]
        cap = _capsule_new(ctypes.addressof(managed), b"dltensor", None)
        self.capsules.append(cap)
        return cap


def test_dlpack_null_shape():
    q = NullShapeDLPack()
    with pytest.raises(ValueError, match="q: DLPack tensor of 4 dimensions has no shape"):
        attention(q, FakeDLPack(), FakeDLPack())
    assert q.deleted == 1


class DLPackReturns(FakeDLPack):
    def __init__(self, result):
        super().__init__()
        self.result = result

    def __dlpack__(self, stream=None, max_version=None):
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result


@pytest.mark.parametrize("result, error, message", [
    (object(), TypeError, "did not return an unused DLPack capsule"),
    (MemoryError("producer out of memory"), MemoryError, "producer out of memory"),
])
def test_dlpack_method_misbehaves(result, error, message):
    with pytest.raises(error, match=message):
        attention(DLPackReturns(result), FakeDLPack(), FakeDLPack())


class DeviceIndexRaises:
    def __index__(self):
        raise ArithmeticError("device type refused")


def test_dlpack_device_misbehaves():
    q = FakeDLPack()
    q.__dlpack_device__ = lambda: (DeviceIndexRaises(), 0)
    with pytest.raises(ArithmeticError, match="device type refused"):
        attention(q, FakeDLPack(), FakeDLPack())
    q.__dlpack_device__ = lambda: 2  # not a (type, id) pair: not CUDA, and no other protocol
    with pytest.raises(TypeError, match="q must be a NumPy array or a CUDA array"):
        attention(q, FakeDLPack(), FakeDLPack())
    assert q.deleted == 0


def test_dlpack_shape_beyond_64_bits():
    q = FakeDLPack(shape=(2**40, 2**40, 17, 64))
    with pytest.raises(ValueError, match="shape has too many elements for 64-bit sizes"):
        attention(q, FakeDLPack(), FakeDLPack())
    assert q.deleted == 1


# ---- DeviceArray sizes and shapes ---------------------------------------------------------------

@pytest.mark.parametrize("shape, dtype, dims", [
    ((2**62, 4), "float32", "(4611686018427387904, 4)"),
    ((2**31, 2**31, 4), "float16", "(2147483648, 2147483648, 4)"),
    ((2**63 - 1,), "bfloat16", "(9223372036854775807,)"),
    ((2**32, 2**32, 0), "float32", "(4294967296, 4294967296, 0)"),
])
def test_empty_size_beyond_64_bits(shape, dtype, dims):
    """The size product once wrapped: (2**62, 4) float32 gave an array with nbytes == 0. It is
    refused before any device is needed."""
    with pytest.raises(ValueError) as info:
        gp.kernels.empty(shape, dtype)
    assert str(info.value) == (f"shape {dims} of {dtype} is too large: its size in bytes does not "
                               "fit 64 bits")


class ShrinksList:
    def __init__(self, owner):
        self.owner = owner

    def __index__(self):
        del self.owner[:]
        gc.collect()
        return 3


class LyingLength:
    """Says it has 2 items, iterates 3."""

    def __len__(self):
        return 2

    def __iter__(self):
        return iter([2, 3, 4])


@no_device
def test_empty_shape_that_changes_while_read():
    shape = [2, 0, 5]
    shape[1] = ShrinksList(shape)
    with pytest.raises(gp.NoDeviceError):
        _C._device_array_empty(shape, "float32")
    assert shape == []
    with pytest.raises(gp.NoDeviceError):
        _C._device_array_empty(LyingLength(), "float32")


@pytest.mark.parametrize("shape, error, message", [
    ([1, -2], ValueError, "shape must be at most 8 non-negative ints"),
    ([1] * 9, ValueError, "shape must be at most 8 non-negative ints"),
    ([1, "2"], TypeError, "'str' object cannot be interpreted as an integer"),
    ([1, DeviceIndexRaises()], ArithmeticError, "device type refused"),
    (5, TypeError, "'int' object is not iterable"),
])
def test_empty_bad_shapes(shape, error, message):
    with pytest.raises(error, match=message):
        _C._device_array_empty(shape, "float32")


# ---- Python lines: a reset from a finalizer while the sites are being taken ---------------------

class ResetsTables:
    """Cyclic garbage whose finalizer clears the Python-line tables."""

    def __init__(self):
        self.cycle = self

    def __del__(self):
        _C._pylines_reset(())


def test_pylines_take_survives_a_reset_from_a_finalizer():
    """take() copies the names under its lock; a finalizer run by the objects it then makes
    (gc at every allocation) clears the tables, which once freed the names being read. Whether
    the collection falls inside take() depends on the interpreter's gc state (another thread or
    an xdist worker's own collections can age the garbage first), so the attempt is repeated
    until one shows it: the full tables taken, and the finalizers' reset after them."""
    n_sites = 40
    codes = [compile("\n" * k + f"capture({k}, False, False, False)", f"<hostile-{k}>", "exec")
             for k in range(n_sites)]  # kept alive: a dead code object's address may be reused
    want = [(f"<hostile-{k}>", k + 1, "<module>") for k in range(n_sites)]
    seen = []
    for _attempt in range(10):
        _C._pylines_reset(())
        for code in codes:  # site k: file <hostile-k>, line k + 1
            exec(code, {"capture": _C._testing.pylines_capture})
        threshold = gc.get_threshold()
        gc.collect()
        gc.disable()
        try:
            for _ in range(50):
                ResetsTables()
            gc.enable()
            gc.set_threshold(1)
            taken = _C._pylines_take()
        finally:
            gc.set_threshold(*threshold)
            gc.enable()
        after = _C._pylines_take()["sites"]
        gc.collect()  # whatever the attempt left runs its finalizers now
        full = [s[:3] for s in taken["sites"]] == want
        if full:
            assert len(taken["notes"]) == n_sites * np.dtype(_C._pylines_layout()).itemsize
        seen.append((full, after == []))
        if full and after == []:
            break
    _C._pylines_reset(())
    assert (True, True) in seen, seen  # the tables reset by a finalizer inside take()


# ---- region(metrics=...): the Python hooks the observer calls -----------------------------------

@pytest.fixture
def metrics_hooks():
    """Installs test hooks for region(metrics=...) and puts gpuprofile's back afterwards."""
    yield lambda enter, exit: _C._set_region_metrics_hooks(enter, exit)
    _C._set_region_metrics_hooks(gp._region_metrics_enter, gp._region_metrics_exit)


def test_metrics_hook_replaces_itself_while_it_runs(metrics_hooks, monkeypatch):
    calls, unraisable = [], []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unraisable.append(str(u.exc_value)))

    def exit_hook(record):
        calls.append(("exit", record))
        metrics_hooks(lambda *a: calls.append(("enter2", a[2])), lambda r: calls.append(("exit2", r)))
        raise RuntimeError("exit hook fails after replacing itself")

    def enter_hook(name, spec, record):
        calls.append(("enter", record))
        metrics_hooks(enter_hook, exit_hook)  # drops the last reference to an older hook pair

    metrics_hooks(enter_hook, exit_hook)
    with gp.region("m", metrics=["x"]):
        pass
    with gp.region("m", metrics=["x"]):
        pass
    assert calls == [("enter", 0), ("exit", 0), ("enter2", 1), ("exit2", 1)]
    assert unraisable == ["exit hook fails after replacing itself"]
    assert gp.records()["name"].tolist() == ["m", "m"]


def test_metrics_hook_that_leaves_regions_open(metrics_hooks):
    """Each enter hook opens another metrics region and leaves it open, 100 deep: the observer's
    table of open records fills (64), the enter that finds it full is refused and closed again,
    and the refused enters are undone at their own frames, not at the top of the stack (which
    once dropped an open region's frame and a reference it did not own)."""
    opened, closed, entered = [], [], []

    def enter_hook(name, spec, record):
        opened.append(record)
        if len(opened) < 100:
            r = gp.region("deeper", metrics=["x"])
            r.__enter__()
            entered.append(r)

    metrics_hooks(enter_hook, closed.append)
    with pytest.raises(gp.GpuProfileError, match="too many open regions with metrics"):
        with gp.region("top", metrics=["x"]):
            pass
    assert len(opened) == 100 and len(entered) == 64
    assert closed == [opened[35]]  # its hook ran, then the table was full
    for r in entered:  # innermost first: the order they sit on the thread's stack
        r.__exit__(None, None, None)
    # (the observer pairs enters and exits last-in first-out, which hooks that leave regions
    # open break: only the last of these exits finds its record on top, and is told)
    assert closed[1:] == [opened[36]]
    recs = gp.records()
    assert not recs["open"].any()
    assert (recs["name"] == "deeper").sum() == 99
