"""Leak tests (marker `leak`) of gpuprofile.kernels.attention's argument checks and array
protocols without a device: buffer views released, DLPack capsules consumed and deleted once,
references to the inputs dropped. tests/test_leaks_gpu.py runs attention on the device."""

import ctypes

import numpy as np
import pytest
from leaks import check_no_growth, raising
from test_attention_args import (
    DELETER,
    NAMES,
    DLDataType,
    DLDevice,
    DLManagedVersioned,
    DLTensor,
    DLVersion,
    FakeCAI,
    _capsule_new,
)

import gpuprofile as gp
from gpuprofile import _C

pytestmark = [pytest.mark.leak, pytest.mark.skipif(
    gp.device_count() > 0, reason="the stand-in device arrays may only be parsed without a device")]


class ReusedDLPack:
    """A CUDA DLPack producer whose capsules all wrap one tensor built once (new ctypes objects
    per capsule, as tests/kernels/test_attention_args.py's producer makes, cost memory of
    their own); counts capsules made and deleter calls."""

    def __init__(self, shape, dtype):
        self.made = self.deleted = 0
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._callback = DELETER(self._delete)
        tensor = DLTensor(0x7F0000000000, DLDevice(2, 0), len(shape), DLDataType(*dtype, 1),
                          self._shape, None, 0)
        self._managed = DLManagedVersioned(DLVersion(1, 0), None, self._callback, 0, tensor)

    def _delete(self, _ptr):
        self.deleted += 1

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None, max_version=None):
        self.made += 1
        return _capsule_new(ctypes.addressof(self._managed), NAMES[True], None)


def test_attention_argument_errors_and_array_protocols():
    q = np.zeros((1, 2, 16, 64), np.float32)
    bad = np.zeros((1, 2, 16), np.float32)
    f64 = np.zeros((1, 2, 16, 64), np.float64)
    cai = FakeCAI(shape=(1, 2, 16, 64), typestr="<f8")
    dl = ReusedDLPack((1, 2, 16, 64), (0, 32))  # int32: refused after the capsule is taken
    ok = ReusedDLPack((1, 2, 16, 64), (2, 32))  # valid: NoDeviceError after parsing

    def step():
        raising(lambda: gp.kernels.attention(bad, bad, bad), ValueError)()
        raising(lambda: gp.kernels.attention(q, q, f64), ValueError)()
        raising(lambda: gp.kernels.attention(q, q, q, impl="fast"), ValueError)()
        raising(lambda: gp.kernels.attention(cai, cai, cai), ValueError)()
        raising(lambda: gp.kernels.attention(dl, dl, dl), ValueError)()
        raising(lambda: _C._attention(q, q, q, q, impl="flash_tc_v1"), ValueError)()
        raising(lambda: gp.kernels.attention(q, q, q), gp.GpuProfileError)()  # NoDeviceError here
        raising(lambda: gp.kernels.attention(ok, ok, ok), gp.GpuProfileError)()
        for producer in (dl, ok):
            assert producer.deleted == producer.made  # each capsule's deleter ran exactly once

    check_no_growth(step, inputs=[q, bad, f64, cai, dl, ok])
