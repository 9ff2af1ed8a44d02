"""gpuprofile.kernels.attention's argument checks and array protocols, on any machine.

Every bad argument is rejected before the first CUDA call, so these run without a GPU. Device
arrays are stand-ins: objects with a __cuda_array_interface__, and DLPack producers built with
ctypes that record how their capsules are consumed. The stand-ins point at no real memory, so
each test that uses them either fails validation or runs only where there is no device."""

import ctypes

import numpy as np
import pytest

import gpuprofile as gp
from gpuprofile import _C
from gpuprofile.kernels import attention

no_device = pytest.mark.skipif(gp.device_count() > 0, reason="checks the no-device behaviour")
SHAPE = (2, 3, 17, 64)


class FakeCAI:
    """A device array as far as the CUDA Array Interface goes."""

    def __init__(self, shape=SHAPE, typestr="<f2", strides=None, ptr=0x7F0000000000, **extra):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "data": (ptr, False), "strides": strides, "version": 3,
                                         **extra}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManaged(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedVersioned(ctypes.Structure):
    _fields_ = [("version", DLVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
NAMES = {False: b"dltensor", True: b"dltensor_versioned"}


class FakeDLPack:
    """A CUDA DLPack producer; counts deleter calls and remembers the streams it was given."""

    def __init__(self, shape=SHAPE, dtype=(4, 16), strides=None, versioned=True, flags=0,
                 major=1, device=(2, 0)):
        self.shape, self.dtype, self.strides = shape, dtype, strides
        self.versioned, self.flags, self.major, self.device = versioned, flags, major, device
        self.deleted, self.streams, self.capsules = 0, [], []
        self._keep = []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None):
        self.streams.append(stream)
        versioned = self.versioned and max_version is not None and max_version[0] >= 1
        return self._capsule(versioned)

    def _capsule(self, versioned):
        shape = (ctypes.c_int64 * len(self.shape))(*self.shape)
        strides = (ctypes.c_int64 * len(self.shape))(*self.strides) if self.strides else None
        tensor = DLTensor(0x7F0000000000, DLDevice(*self.device), len(self.shape),
                          DLDataType(self.dtype[0], self.dtype[1], 1), shape,
                          ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)), 0)

        def deleter(_ptr):
            self.deleted += 1

        callback = DELETER(deleter)
        if versioned:
            managed = DLManagedVersioned(DLVersion(self.major, 0), None, callback, self.flags, tensor)
        else:
            managed = DLManaged(tensor, None, callback)
        self._keep += [shape, strides, callback, managed]
        cap = _capsule_new(ctypes.addressof(managed), NAMES[versioned], None)
        self.capsules.append(cap)
        return cap


class OldFakeDLPack(FakeDLPack):
    """A producer from before DLPack 1.0: no max_version keyword."""

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return self._capsule(False)


def host(shape=SHAPE, dtype=np.float32):
    return np.zeros(shape, dtype=dtype)


@pytest.mark.parametrize("kwargs, message", [
    ({"q": host((2, 17, 64))}, r"q must have 4 dimensions .* got shape \(2, 17, 64\)"),
    ({"k": host((2, 3, 16, 64))}, r"k has shape \(2, 3, 16, 64\) but q has shape \(2, 3, 17, 64\)"),
    ({"q": host(dtype=np.float64), "k": host(dtype=np.float64), "v": host(dtype=np.float64)},
     "q has dtype float64; supported: float32, float16, bfloat16"),
    ({"v": host(dtype=np.int32)}, "v has dtype int32; supported"),
    ({"v": host(dtype=np.float16)}, "v is float16 but q is float32"),
    ({"q": host((2, 0, 17, 64))}, r"q is empty \(shape \(2, 0, 17, 64\)\)"),
    ({"impl": "fast"}, "impl must be 'naive', 'flash', 'flash_tc', 'flash_wgmma' or 'auto', got 'fast'"),
    ({"impl": "flash_tc"}, "impl='flash_tc' supports float16 and bfloat16, got float32"),
    ({"impl": "flash_wgmma"}, "impl='flash_wgmma' supports float16 and bfloat16, got float32"),
    ({"scale": -1.0}, "scale must be a positive finite number"),
    ({"scale": float("nan")}, "scale must be a positive finite number"),
    ({"scale": 0.0}, "scale must be a positive finite number"),
    ({"out": host((2, 3, 17, 32))}, r"out has shape \(2, 3, 17, 32\)"),
    ({"out": host(dtype=np.float16)}, "out is float16 but q is float32"),
    ({"out": host()[..., ::2, :]}, "out: host arrays must be C-contiguous"),
])
def test_bad_host_arguments(kwargs, message):
    args = {"q": host(), "k": host(), "v": host(), **kwargs}
    with pytest.raises(ValueError, match=message):
        attention(**args)


@pytest.mark.parametrize("impl, head_dim, message", [
    ("flash", 80, "impl='flash' supports head_dim 64 and 128, got 80"),
    ("flash_tc", 96, "impl='flash_tc' supports head_dim 64 and 128, got 96"),
    ("flash_wgmma", 96, "impl='flash_wgmma' supports head_dim 64 and 128, got 96"),
    ("naive", 300, "head_dim 300 is not supported: impl='naive' takes up to 256"),
    ("auto", 512, "head_dim 512 is not supported"),
])
def test_unsupported_head_dim_lists_what_is(impl, head_dim, message):
    x = host((1, 1, 8, head_dim), np.float16)
    with pytest.raises(ValueError, match=message):
        attention(x, x, x, impl=impl)


def test_the_implementations_are_one_table():
    """impl= takes the names of the C table (and 'auto'), and Python, the CLI and the help read
    that table: one vocabulary (issue 24 removed the numbered variants)."""
    from gpuprofile.kernels import attention_bench

    table = _C.ATTENTION_IMPLS
    assert [e["name"] for e in table] == ["naive", "flash", "flash_tc", "flash_wgmma"]
    assert all(set(e) == {"name", "takes", "devices", "workspace", "tensor_cores", "priority"}
               for e in table)
    assert [e["tensor_cores"] for e in table] == [False, False, True, True]
    assert [e["workspace"] is not None for e in table] == [True, False, False, False]
    assert gp.kernels.IMPLS == ("naive", "flash", "flash_tc", "flash_wgmma", "auto")
    assert [i.name for i in gp.kernels.IMPLEMENTATIONS] == [e["name"] for e in table]
    assert attention_bench.OURS == gp.kernels.IMPLS
    for entry in table:
        assert f"{entry['name']}: {entry['takes']}" in gp.kernels.attention.__doc__
    # auto's order is the table's priority column: the help, the reasons and AUTO_ORDER read it
    assert sorted(e["priority"] for e in table) == [1, 2, 3, 4]
    assert gp.kernels.AUTO_ORDER == ("flash_wgmma", "flash_tc", "flash", "naive")
    assert f"auto's order: {', '.join(gp.kernels.AUTO_ORDER)}." in gp.kernels.attention.__doc__


def test_the_shipped_attention_has_no_schedule_keyword():
    """_C._attention takes what gp.kernels.attention does; forcing one of flash_wgmma's schedules
    is _C._testing.attention_wgmma's (the tests' and benchmarks' only)."""
    for keyword in ("_variant", "variant", "schedule"):
        with pytest.raises(TypeError, match=keyword):
            _C._attention(host(), host(), host(), host(), impl="flash_wgmma", **{keyword: 1})


@pytest.mark.parametrize("kwargs, message", [
    ({"schedule": "v9"}, "attention_wgmma: unknown schedule 'v9' \\(per_shape, persist, bm128, "
                         "persist_bm128, fixed, persist_lookahead, persist_lookahead_chained\\)"),
    ({"store": "tma"}, "store must be 'smem', 'regs' or None, got 'tma'"),
    ({"schedule": 5}, "must be str"),
])
def test_forced_schedule_arguments(kwargs, message):
    x = host((1, 2, 8, 64), np.float16)
    with pytest.raises((ValueError, TypeError), match=message):
        _C._testing.attention_wgmma(x, x, x, x, **kwargs)


@pytest.mark.parametrize("head_dim", [128, 32])
@pytest.mark.parametrize("store", [None, "smem", "regs"])
@pytest.mark.parametrize("name", ["persist_lookahead", "persist_lookahead_chained"])
def test_lookahead_schedules_take_head_dim_64_only(name, store, head_dim):
    """persist_lookahead, unchained or chained (two S tiles per consumer, 240 registers), exists
    at head_dim 64 only (the table: ATTENTION_WGMMA_SCHEDULES); other head_dims are refused by
    name before any device work (head_dim 32: by flash_wgmma's own check first)."""
    x = host((1, 2, 8, head_dim), np.float16)
    message = (f"schedule '{name}' takes head_dim 64, got 128" if head_dim == 128
               else "impl='flash_wgmma' supports head_dim 64 and 128, got 32")
    with pytest.raises(ValueError, match=message):
        _C._testing.attention_wgmma(x, x, x, x, schedule=name, store=store)


def test_a_configuration_the_build_lacks_is_refused_by_name():
    """The shipped build has the configurations the per-shape rule reaches (the table's ships);
    forcing another is refused before any device work, naming the switch that builds it."""
    x = host((1, 2, 8, 64), np.float16)
    if _C._testing.ATTENTION_WGMMA_LAB:
        pytest.skip("a GPUPROFILE_ATTN_LAB=1 build has every configuration")
    with pytest.raises(ValueError, match="schedule 'fixed' at head_dim 64 with O through shared "
                       "memory is not in this build: .* GPUPROFILE_ATTN_LAB=1 has every one"):
        _C._testing.attention_wgmma(x, x, x, x, schedule="fixed")
    with pytest.raises(ValueError, match="O from registers under the per-shape schedule needs a "
                       "build with GPUPROFILE_ATTN_LAB=1"):
        _C._testing.attention_wgmma(x, x, x, x, store="regs")


def test_read_only_out():
    out = host()
    out.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        attention(host(), host(), host(), out=out)


def test_bad_stream_type():
    with pytest.raises(TypeError, match="stream must be None"):
        attention(host(), host(), host(), stream="default")


def test_not_an_array():
    with pytest.raises(TypeError, match="q must be a NumPy array or a CUDA array"):
        _C._attention(object(), host(), host(), host())


def test_host_device_mix():
    with pytest.raises(ValueError, match=r"cannot mix host and device arrays: q is a device array "
                       r"\(__cuda_array_interface__\), k is a host array"):
        attention(FakeCAI(typestr="<f4"), host(), host())
    with pytest.raises(ValueError, match="q, k, v are host arrays but out is a device array"):
        attention(host(), host(), host(), out=FakeCAI(typestr="<f4"))


@pytest.mark.parametrize("kwargs, message", [
    ({"typestr": "<f8"}, "q has dtype <f8; supported"),
    ({"strides": (3 * 17 * 128 * 2, 17 * 128 * 2, 128 * 2, 4)},
     "q must be contiguous in head_dim .* got stride 2"),
    ({"strides": (1, 1, 1, 3)}, "not a multiple of the element size"),
    ({"mask": object()}, "masked arrays are not supported"),
    ({"stream": 0}, "is 0, which the interface forbids"),
])
def test_bad_cuda_array_interface(kwargs, message):
    q = FakeCAI(**kwargs)
    with pytest.raises(ValueError, match=message):
        attention(q, FakeCAI(), FakeCAI())


def test_batch_limit():
    big = (70000, 1, 17, 64)
    with pytest.raises(ValueError, match="batch and heads must each be at most 65535"):
        attention(FakeCAI(big), FakeCAI(big), FakeCAI(big))


def test_cai_readonly_out():
    out = FakeCAI()
    out.__cuda_array_interface__["data"] = (0x7F0000000000, True)
    with pytest.raises(ValueError, match="out is read-only"):
        attention(FakeCAI(), FakeCAI(), FakeCAI(), out=out)


def test_flash_wgmma_shape_checks_need_no_device():
    """flash_wgmma (explicit only) rejects what its TMA tensor maps cannot describe before any
    CUDA call: misaligned rows and negative strides."""
    with pytest.raises(ValueError, match="impl='flash_wgmma' needs 16-byte aligned rows"):
        attention(FakeCAI(ptr=0x7F0000000002), FakeCAI(), FakeCAI(), impl="flash_wgmma")
    item = 2
    reversed_seq = (3 * 17 * 64 * item, 17 * 64 * item, -64 * item, item)
    with pytest.raises(ValueError, match="impl='flash_wgmma' needs non-negative batch, head and seq"):
        attention(FakeCAI(strides=reversed_seq, ptr=0x7F0000100000), FakeCAI(), FakeCAI(),
                  impl="flash_wgmma")


def test_auto_choice():
    # On a compute capability 9.0 device (with the sm_90a build) flash_wgmma takes flash_tc's
    # place; test_attention_wgmma_gpu.py checks that it is the kernel that runs.
    hopper = gp.device_count() > 0 and tuple(gp.device_info().compute_capability) == (9, 0)
    tc = "flash_wgmma" if hopper else "flash_tc"
    auto_impl = _C._testing.attention_auto_impl
    assert auto_impl("bfloat16", 64, True) == tc
    assert auto_impl("float16", 128, True) == tc
    assert auto_impl("float16", 128, False) == "flash"
    assert auto_impl("float32", 64, True) == "flash"
    assert auto_impl("bfloat16", 80, True) == "naive"
    with pytest.raises(ValueError, match="head_dim 512 is not supported"):
        auto_impl("float32", 512, True)


@pytest.mark.parametrize("producer", [FakeDLPack, OldFakeDLPack])
def test_dlpack_capsules_are_consumed_and_deleted_once(producer):
    """A failing call still renames each capsule and calls each deleter exactly once."""
    q, k = producer(), producer(shape=(2, 3, 18, 64))
    with pytest.raises(ValueError, match="k has shape"):
        attention(q, k, producer())
    for p in (q, k):
        assert p.deleted == 1
        assert p.streams == [1]  # the legacy default stream, as DLPack spells it
        versioned = producer is FakeDLPack
        assert _capsule_name(p.capsules[0]) == b"used_" + NAMES[versioned]


def test_dlpack_stream_handle_and_dtype_checks():
    q = FakeDLPack(dtype=(2, 64))
    with pytest.raises(ValueError, match="q has dtype float64; supported"):
        attention(q, FakeDLPack(), FakeDLPack(), stream=0x1234)
    assert q.streams == [0x1234] and q.deleted == 1


@pytest.mark.parametrize("q, message", [
    (FakeDLPack(strides=(3 * 17 * 128, 17 * 128, 128, 2)), "q must be contiguous in head_dim"),
    (FakeDLPack(dtype=(2, 16)), "k is bfloat16 but q is float16"),
    (FakeDLPack(device=(1, 0)), "q: DLPack device type 1 is not CUDA"),
])
def test_dlpack_bad_tensors(q, message):
    if "device type" in message:  # a producer that says CUDA, then hands over host memory
        q.__dlpack_device__ = lambda: (2, 0)
    with pytest.raises(ValueError, match=message):
        attention(q, FakeDLPack(), FakeDLPack())
    assert q.deleted == 1


def test_dlpack_newer_major_version_is_left_to_its_producer():
    q = FakeDLPack(major=2)
    with pytest.raises(BufferError, match="q: DLPack version 2.0 is not supported"):
        attention(q, FakeDLPack(), FakeDLPack())
    # not consumed: the capsule keeps its name, so its own destructor frees the tensor
    assert _capsule_name(q.capsules[0]) == b"dltensor_versioned" and q.deleted == 0


def test_dlpack_read_only_out():
    out = FakeDLPack(flags=1)
    with pytest.raises(ValueError, match="out is read-only"):
        attention(FakeDLPack(), FakeDLPack(), FakeDLPack(), out=out)
    assert out.deleted == 1


def test_dlpack_cpu_tensor_is_a_host_array():
    class CpuTensor(np.ndarray):
        pass

    x = host().view(CpuTensor)
    assert x.__dlpack_device__()[0] == 1
    with pytest.raises(ValueError, match="cannot mix host and device arrays"):
        attention(FakeDLPack(), x, x)


def test_auto_is_the_default():
    """impl defaults to "auto" in Python, in C and in the CLI (issue 46): head_dim 80 in float16,
    which every fused implementation refuses, passes the checks (naive takes it) and reaches the
    device step."""
    import inspect

    from gpuprofile.cli import build_parser

    assert inspect.signature(attention).parameters["impl"].default == "auto"
    assert inspect.signature(gp.kernels.attention_bytes).parameters["impl"].default == "auto"
    assert build_parser().parse_args(["profile-kernels"]).impl == "auto"
    x = host((1, 1, 8, 80), np.float16)
    for call in (lambda: attention(x, x, x), lambda: _C._attention(x, x, x, x)):
        if gp.device_count() == 0:
            with pytest.raises(gp.NoDeviceError):
                call()
        else:
            assert call().shape == x.shape


@no_device
def test_no_device_error_after_valid_arguments():
    with pytest.raises(gp.NoDeviceError, match="no usable CUDA device"):
        attention(host(), host(), host())
    q = FakeDLPack()
    with pytest.raises(gp.NoDeviceError):
        attention(q, FakeDLPack(), FakeDLPack(), impl="flash_tc")
    assert q.deleted == 1


@no_device
@pytest.mark.parametrize("call", [lambda: gp.kernels.empty((2, 3), "float16"),
                                  lambda: gp.kernels.to_device(np.zeros(3, np.float32))])
def test_device_arrays_need_a_device(call):
    with pytest.raises(gp.NoDeviceError):
        call()


def test_device_array_arguments():
    with pytest.raises(TypeError):
        gp.kernels.DeviceArray()
    with pytest.raises(ValueError, match="has no device dtype"):
        gp.kernels.to_device(np.zeros(3))
    with pytest.raises(ValueError, match="dtype must be 'float32', 'float16' or 'bfloat16'"):
        gp.kernels.to_device(np.zeros(3), dtype="int8")
    with pytest.raises(ValueError, match="dtype must be 'float32', 'float16' or 'bfloat16'"):
        gp.kernels.empty((2, 3), "float64")
    gp.kernels.release_workspace()  # nothing allocated: a no-op on any machine
