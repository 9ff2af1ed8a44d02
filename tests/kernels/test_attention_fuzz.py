"""Fuzzing array-protocol parsing through gpuprofile.kernels.attention (marker `fuzz`): malformed
__cuda_array_interface__ dicts, DLPack producers and capsules (huge, negative and mismatched
shapes and strides, odd dtypes and devices), junk options. Only clear errors may come out.

The stand-in arrays point at no memory. Without a device every call stops at validation or at
NoDeviceError. With one, CAI pointers are rejected by the driver (not device memory) and DLPack
tensors name a device that does not exist, so nothing is ever launched on them."""

import ctypes

import numpy as np
import pytest
from fuzzing import clear_errors_only, ints, junk, scalars
from hypothesis import given
from hypothesis import strategies as st
from test_attention_args import (
    DELETER,
    NAMES,
    DLDataType,
    DLDevice,
    DLManaged,
    DLManagedVersioned,
    DLTensor,
    DLVersion,
    _capsule_new,
)

import gpuprofile as gp
from gpuprofile import _C

pytestmark = pytest.mark.fuzz
HAS_DEVICE = gp.device_count() > 0
INT64 = st.one_of(st.sampled_from([0, 1, -1, 2, 16, 17, 64, 2**31 - 1, 2**31, 2**62, 2**63 - 1,
                                   -(2**63), 4096]), st.integers(-(2**63), 2**63 - 1))
TYPESTRS = ["<f4", "<f2", "|f2", "=f4", ">f4", "<f8", "<i4", "f4", "<f4 ", "", "<f16", "<V4", "\x00f4"]
# BufferError: the DLPack protocol's error for a capsule version the consumer cannot read.
ALLOWED = (BufferError,)


def _shapes():
    near = st.lists(st.sampled_from([1, 2, 3, 16, 17, 64, 128]), min_size=4, max_size=4)
    return st.one_of(near, st.lists(INT64, max_size=10)).map(tuple)


@st.composite
def cai_arrays(draw):
    shape = draw(st.one_of(_shapes(), junk()))
    n = len(shape) if isinstance(shape, tuple) else 4
    iface = {
        "shape": shape,
        "typestr": draw(st.one_of(st.sampled_from(TYPESTRS), st.text(max_size=4), scalars())),
        "data": draw(st.one_of(st.tuples(st.sampled_from([0, 256, 0x7F0000000000]), st.booleans()),
                               st.tuples(ints(), scalars()), junk())),
        "strides": draw(st.one_of(st.none(), st.lists(INT64, min_size=n, max_size=n).map(tuple),
                                  st.lists(ints(), max_size=10).map(tuple), junk())),
        "version": draw(st.one_of(st.sampled_from([2, 3]), scalars())),
        "stream": draw(st.one_of(st.none(), st.sampled_from([0, 1, 2]), ints(), junk()))
        if not HAS_DEVICE else None,
        "mask": draw(st.one_of(st.none(), scalars())),
    }
    for key in draw(st.lists(st.sampled_from(sorted(iface)), max_size=3)):
        iface.pop(key, None)
    value = draw(st.one_of(st.just(iface), junk()))

    class CAI:
        __cuda_array_interface__ = value

    return CAI()


class DLProducer:
    """A DLPack producer with every field drawn; keeps its ctypes memory alive."""

    def __init__(self, shape, strides, dtype, device, versioned, major, flags, offset, dev_reply,
                 reply):
        self.fields = (shape, strides, dtype, device, versioned, major, flags, offset)
        self.dev_reply, self.reply, self.keep = dev_reply, reply, []

    def __dlpack_device__(self):
        return self.dev_reply

    def __dlpack__(self, stream=None, max_version=None):
        if self.reply is not None:
            return self.reply if self.reply != "wrong-name" else self._wrong_name()
        shape, strides, dtype, device, versioned, major, flags, offset = self.fields
        c_shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        c_strides = (ctypes.c_int64 * max(len(shape), 1))(*strides) if strides is not None else None
        tensor = DLTensor(0x7F0000000000, DLDevice(*device), len(shape), DLDataType(*dtype), c_shape,
                          ctypes.cast(c_strides, ctypes.POINTER(ctypes.c_int64)), offset)
        callback = DELETER(lambda _ptr: None)
        if versioned:
            managed = DLManagedVersioned(DLVersion(major, 0), None, callback, flags, tensor)
        else:
            managed = DLManaged(tensor, None, callback)
        self.keep += [c_shape, c_strides, callback, managed]
        return _capsule_new(ctypes.addressof(managed), NAMES[versioned], None)

    def _wrong_name(self):
        self.keep.append(block := ctypes.create_string_buffer(64))
        return _capsule_new(ctypes.addressof(block), b"not_a_dltensor", None)


@st.composite
def dlpack_arrays(draw):
    shape = draw(_shapes())
    n = len(shape)
    strides = draw(st.one_of(st.none(), st.lists(INT64, min_size=n, max_size=n)))
    dtype = draw(st.one_of(st.sampled_from([(2, 32, 1), (2, 16, 1), (4, 16, 1), (2, 64, 1), (0, 32, 1),
                                            (2, 32, 4)]),
                           st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 65535))))
    device_type = draw(st.sampled_from([2, 13, 1, 3, 0, 255]))
    # with a device, an ordinal that does not exist: no launch on the stand-in's pointer
    device_id = 4000 if HAS_DEVICE else draw(st.integers(-(2**31), 2**31 - 1))
    dev_reply = draw(st.one_of(st.just((device_type, device_id)), st.just((2, 0)), junk()))
    reply = draw(st.one_of(st.none(), st.none(), st.just("wrong-name"), junk()))
    return DLProducer(shape, strides, dtype, (device_type, device_id), draw(st.booleans()),
                      draw(st.sampled_from([1, 1, 0, 2, 2**32 - 1])), draw(st.integers(0, 2**64 - 1)),
                      draw(st.sampled_from([0, 2, 256, 2**63, 2**64 - 2])), dev_reply, reply)


def host_arrays():
    shapes = st.lists(st.integers(0, 5), min_size=0, max_size=5).map(tuple)
    dtypes = st.sampled_from([np.float32, np.float16, np.float64, np.int32, np.uint8, np.bool_])
    return st.builds(lambda s, d, t: np.zeros(s, d).T if t else np.zeros(s, d), shapes, dtypes,
                     st.booleans())


ARRAYS = st.one_of(cai_arrays(), dlpack_arrays(), host_arrays(), scalars())
OPTIONS = st.fixed_dictionaries({}, optional={
    "impl": st.one_of(st.sampled_from(["naive", "flash", "flash_tc", "auto"]), scalars()),
    "causal": scalars(), "scale": st.one_of(st.floats(), scalars()),
    "stream": st.none() if HAS_DEVICE else st.one_of(scalars(), ints())})


@given(first=ARRAYS, others=st.lists(st.one_of(st.none(), ARRAYS), min_size=3, max_size=3),
       same=st.booleans(), options=OPTIONS)
def test_attention_array_arguments(first, others, same, options):
    """q from the strategies; k, v, out either the same object (so that the checks go deep) or
    drawn on their own."""
    k, v, out = (first if same else x for x in others)
    if out is first and same:
        out = None
    for call in (lambda: gp.kernels.attention(first, k if k is not None else first,
                                              v if v is not None else first, out=out, **options),
                 lambda: _C._attention(first, k, v, out, **options)):
        with clear_errors_only(*ALLOWED):
            call()


@given(shape=_shapes(), typestr=st.sampled_from(["<f4", "<f2"]),
       strides=st.one_of(st.none(), st.lists(INT64, min_size=4, max_size=4).map(tuple)))
def test_cai_shapes_and_strides_at_the_limits(shape, typestr, strides):
    """Huge and negative shapes and strides on otherwise valid CAI arrays: element counts and
    extents that overflow 64 bits must be refused, not wrapped."""
    n = len(shape)
    iface = {"shape": shape, "typestr": typestr, "data": (0x7F0000000000, False), "version": 2,
             "strides": strides if strides is None or len(strides) == n else None}

    class CAI:
        __cuda_array_interface__ = iface

    with clear_errors_only():
        _C._attention(CAI(), CAI(), CAI(), None)


# ---- findings of the fuzzing above, kept as regression tests -------------------------------------

def _cai(shape, strides=None, typestr="<f4"):
    class CAI:
        __cuda_array_interface__ = {"shape": shape, "typestr": typestr, "strides": strides,
                                    "data": (0x7F0000000000, False), "version": 2}

    return CAI()


@pytest.mark.parametrize("shape, strides, message", [
    ((2**62, 2**62, 1, 1), None, "too many elements"),  # contiguous strides overflowed int64 (UB)
    ((1, 2, -3, 64), None, "dimension 2 has negative size -3"),
    ((1, 1, 2, 64), (4, 4, 2**62, 4), "strides reach beyond 64-bit addresses"),  # extent overflowed
    ((1, 1, 2, 64), (4, 4, -(2**63), 4), "strides reach beyond 64-bit addresses"),
])
def test_cai_sizes_that_overflow_are_refused(shape, strides, message):
    with pytest.raises(ValueError, match=message):
        _C._attention(_cai(shape, strides), _cai(shape, strides), _cai(shape, strides), None)


def test_dlpack_byte_offset_is_added_without_pointer_overflow():
    """data + byte_offset past the address space was pointer arithmetic UBSan reports."""
    p = DLProducer((1, 1, 16, 64), None, (2, 32, 1), (2, 4000 if HAS_DEVICE else 0), True, 1, 0,
                   2**63, (2, 0), None)
    with pytest.raises((ValueError, gp.GpuProfileError)):
        _C._attention(p, p, p, None)


@pytest.mark.parametrize("reply", [{}, [], (2,), "cuda", None])
def test_malformed_dlpack_device_reply_is_not_a_cuda_device(reply):
    """kernels.attention indexed the reply (KeyError, IndexError); C treats junk as not CUDA."""
    p = DLProducer((1, 1, 16, 64), None, (2, 32, 1), (2, 0), True, 1, 0, 0, reply, None)
    with pytest.raises((TypeError, ValueError)):  # as a host array: not one NumPy can use
        gp.kernels.attention(p, p, p)


def test_scale_beyond_float_range_is_refused():
    """(float)1e300 was undefined behaviour (UBSan float-cast-overflow) before the range check."""
    q = np.zeros((1, 1, 4, 64), np.float32)
    with pytest.raises(ValueError, match="scale must be a positive finite number"):
        gp.kernels.attention(q, q, q, scale=1e300)


@pytest.mark.parametrize("entry", [{"version": 2**70}, {"version": 3, "stream": 2**70},
                                   {"data": (2**70, False)}, {"shape": (1, 1, 2**70, 64)}])
def test_cai_ints_beyond_64_bits_are_value_errors(entry):
    """They raised OverflowError (found by the long fuzzing run)."""
    iface = {"shape": (1, 1, 16, 64), "typestr": "<f4", "data": (256, False), "version": 3, **entry}

    class CAI:
        __cuda_array_interface__ = iface

    with pytest.raises(ValueError, match="beyond 64 bits"):
        _C._attention(CAI(), CAI(), CAI())


def test_dlpack_device_type_beyond_c_long_is_not_cuda():
    class Producer:
        def __dlpack_device__(self):
            return (2**70, 0)

    with pytest.raises(TypeError, match="must be a NumPy array or a CUDA array"):
        _C._attention(Producer(), Producer(), Producer())
