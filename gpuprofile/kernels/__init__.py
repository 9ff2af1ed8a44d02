"""Bundled CUDA kernels: calibration workloads of known cost (ground truth for tests and
benchmarks), and attention forward kernels (reference workloads to profile: a naive three-kernel
version, fused ones on CUDA cores, on tensor cores and on Hopper's; IMPLEMENTATIONS lists them).
docs/attention.md explains them."""

from __future__ import annotations

import weakref
from typing import NamedTuple

from .. import _C
from .._C import (
    DeviceArray,
    _attention_release_workspace,
    _device_array_empty,
    _device_array_from_host,
    spin,
)
from .._C import _attention as _attention_c


class DeviceBuffer:
    """Zeroed device memory on the current device, freed by close() or when collected. A workload
    buffer for read(); `.ptr` is the raw device address (an int)."""

    def __init__(self, nbytes: int):
        if isinstance(nbytes, bool) or not isinstance(nbytes, int):
            raise TypeError(f"nbytes must be an int, got {type(nbytes).__name__}")
        if nbytes < 16:
            raise ValueError(f"nbytes must be >= 16, got {nbytes}")
        self.nbytes = nbytes
        # One more 16-byte word: the read kernel's sink, never written for zeroed data.
        self.ptr = _C._device_malloc(nbytes + 16)
        self._finalizer = weakref.finalize(self, _C._device_free, self.ptr)
        _C._device_memset(self.ptr, 0, nbytes + 16)

    def close(self) -> None:
        self._finalizer()

    def __repr__(self) -> str:
        return f"<gpuprofile.kernels.DeviceBuffer {self.nbytes} bytes at {self.ptr:#x}>"


def read(buffer: DeviceBuffer, stream=None) -> None:
    """Launch one pass that reads every 16-byte word of `buffer` (all SMs, coalesced). Returns at
    once. Timed cold it runs from DRAM, timed hot from L2 when the buffer fits there."""
    if not isinstance(buffer, DeviceBuffer):
        raise TypeError(f"buffer must be a gpuprofile.kernels.DeviceBuffer, got {type(buffer).__name__}")
    if not buffer._finalizer.alive:
        raise ValueError("buffer is closed")
    _C._bench_read(buffer.ptr, buffer.nbytes, buffer.ptr + buffer.nbytes, stream)



class Implementation(NamedTuple):
    """One attention implementation, as the table in C defines it (csrc/workloads/attention_impls.c)."""

    name: str  # impl=
    takes: str  # the arguments it takes, in words
    devices: str  # the devices it runs on
    workspace: str | None  # what its device workspace holds; None: it needs none
    tensor_cores: bool
    priority: int  # auto's order: 1 first


class WgmmaConfig(NamedTuple):
    """One flash_wgmma schedule at one head_dim: its kernel, and the O stores the shipped build has
    (the ones the per-shape rule reaches; a GPUPROFILE_ATTN_LAB=1 build has both)."""

    consumers: int  # 64-row consumer warpgroups per block
    rows: int  # query rows per block: 64 * consumers
    order: str  # a consumer's work per key tile: "sequential", "overlapped" or "lookahead"
    persistent: bool  # one block per SM walks (query tile, head, batch) items
    chained: bool  # persistent: an item's first Q·Kᵀ issued behind the last P·V of the one before
    ships: tuple[str, ...]  # "regs", "smem"
    words: str


class WgmmaSchedule(NamedTuple):
    """One row of flash_wgmma's table of schedules (kernels/attention/flash_wgmma/schedules.h)."""

    name: str
    number: int
    head_dims: tuple[int, ...]
    configs: dict[int, WgmmaConfig]  # per head_dim it takes


# The implementations, from the one table in C; impl="auto" chooses among them in AUTO_ORDER.
IMPLEMENTATIONS = tuple(Implementation(**entry) for entry in _C.ATTENTION_IMPLS)
IMPLS = (*(i.name for i in IMPLEMENTATIONS), "auto")
AUTO_ORDER = tuple(i.name for i in sorted(IMPLEMENTATIONS, key=lambda i: i.priority))
# flash_wgmma's schedules, from their one table in C: what the per-shape rule picks among.
WGMMA_SCHEDULES = tuple(
    WgmmaSchedule(e["name"], e["number"], e["head_dims"],
                  {d: WgmmaConfig(**c) for d, c in e["configs"].items() if c is not None})
    for e in _C.ATTENTION_WGMMA_SCHEDULES)
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


def attention(q, k, v, impl: str = "auto", causal: bool = False, scale: float | None = None,
              out=None, stream=None):
    """softmax(scale · Q Kᵀ) V for arrays shaped [batch, heads, seq, head_dim] (forward only).

    impl:   "auto" (the default): the first of AUTO_ORDER that takes the arguments and runs on
            the arrays' device (listed at the end); or the name of one of IMPLEMENTATIONS to run
            that one.
    causal: query i attends to keys 0..i.
    scale:  defaults to 1/sqrt(head_dim).
    q, k, v share one shape and dtype (float32, float16 or bfloat16). Either all are NumPy (host)
    arrays: they are copied to the device and the result comes back as NumPy (in `out` when
    given); or all are device arrays of any framework (__cuda_array_interface__ or DLPack:
    torch, CuPy, ...): the kernels read them in place, on their device, ordered on `stream`
    (None: the legacy default stream), and write `out` when given, else a new DeviceArray
    that torch.as_tensor / torch.from_dlpack / cupy.asarray take without a copy. head_dim must
    be contiguous; other strides are honoured.
    The call returns once the work is queued (device arrays) or finished (host arrays).

    The implementations:
    """
    if _on_device(q) or _on_device(k) or _on_device(v):
        return _attention_c(q, k, v, out, impl=impl, causal=causal, scale=scale, stream=stream)
    import numpy as np

    q, k, v = (np.ascontiguousarray(x) for x in (q, k, v))
    if out is None:
        out = np.empty(q.shape, dtype=q.dtype)
    elif _on_device(out):
        raise ValueError("attention: cannot mix host and device arrays: q, k, v are host arrays "
                         "but out is a device array")
    return _attention_c(q, k, v, out, impl=impl, causal=causal, scale=scale, stream=stream)


if attention.__doc__:  # from the table, so the help cannot drift from what C takes (None under -OO)
    attention.__doc__ += "".join(
        f"      {i.name}: {i.takes}; runs on {i.devices}"
        f"{'; workspace: ' + i.workspace if i.workspace else ''}.\n" for i in IMPLEMENTATIONS)
    attention.__doc__ += f"    auto's order: {', '.join(AUTO_ORDER)}.\n"


def _on_device(x) -> bool:
    """Whether x is a CUDA array (DeviceArray, DLPack on a CUDA device, or CAI)."""
    if x is None:
        return False
    if isinstance(x, DeviceArray):
        return True
    dlpack_device = getattr(x, "__dlpack_device__", None)
    if dlpack_device is not None:
        device = dlpack_device()  # (device type, id); anything else is not a CUDA device, as in C
        return isinstance(device, tuple) and len(device) == 2 and device[0] in (2, 13)  # kDLCUDA(Managed)
    try:
        return hasattr(x, "__cuda_array_interface__")
    except Exception:  # a property that exists but refuses (e.g. requires_grad): a device array
        return True


def attention_flops(batch: int, heads: int, seq: int, head_dim: int, causal: bool = False) -> float:
    """FLOPs of the attention forward by the usual convention: two seq×seq×head_dim products,
    2 FLOPs per multiply-add, so 4·B·H·N²·D; halved when causal. Softmax work is not counted."""
    flops = 4.0 * batch * heads * seq * seq * head_dim
    return flops / 2 if causal else flops


def attention_bytes(batch: int, heads: int, seq: int, head_dim: int, dtype: str = "bfloat16",
                    impl: str = "auto", causal: bool = False) -> float:
    """DRAM bytes the forward must move, for roofline placement.

    Fused impls ("flash", "flash_tc", "flash_wgmma", "auto"): the compulsory traffic, Q, K, V read once and O
    written once: 4·B·H·N·D·itemsize (causal or not; re-reads of K and V hit L2 or are counted
    in neither).
    "naive": that plus the score matrix it materializes, causal or not (it computes the whole
    matrix and masks in the softmax): fp32 scores written by the first kernel and read by the
    softmax, which writes P over them, read by P·V. P is kept in the input dtype where the
    tensor-core path runs (float16/bfloat16, head_dim 64 or 128): 4 + 4 + 2 + 2 = 12·B·H·N²
    bytes; in fp32 otherwise: 16·B·H·N².
    """
    if dtype not in _ITEMSIZE:
        raise ValueError(f"dtype must be one of {tuple(_ITEMSIZE)}, got {dtype!r}")
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
    compulsory = 4.0 * batch * heads * seq * head_dim * _ITEMSIZE[dtype]
    if impl == "naive":
        p_bytes = 2 if _ITEMSIZE[dtype] == 2 and head_dim in (64, 128) else 4
        return compulsory + (8.0 + 2 * p_bytes) * batch * heads * seq * seq
    return compulsory


def to_device(array, dtype: str | None = None) -> DeviceArray:
    """A DeviceArray copy of a host array, on the current device, as `dtype` ('float32',
    'float16' or 'bfloat16'; default: the array's own, which must be float32 or float16).
    bfloat16 rounds to nearest even, as the GPU does."""
    import numpy as np

    from .reference import bfloat16_bits

    a = np.asarray(array)
    if dtype is None:
        if a.dtype not in (np.float32, np.float16):
            raise ValueError(f"to_device: dtype {a.dtype} has no device dtype; pass dtype="
                             "'float32', 'float16' or 'bfloat16'")
        dtype = a.dtype.name
    if dtype == "bfloat16":
        return _device_array_from_host(bfloat16_bits(a), dtype)
    if dtype not in ("float32", "float16"):
        raise ValueError(f"to_device: dtype must be 'float32', 'float16' or 'bfloat16', got {dtype!r}")
    return _device_array_from_host(np.ascontiguousarray(a, dtype=dtype), dtype)


def empty(shape, dtype: str) -> DeviceArray:
    """An uninitialized C-contiguous DeviceArray on the current device."""
    return _device_array_empty(tuple(shape), dtype)


def release_workspace() -> None:
    """Hands the unused memory of the attention pools (the naive score matrix, host staging,
    freed results) back to the driver. The pools otherwise keep it, so that repeated calls do not
    allocate inside a timed region."""
    _attention_release_workspace()


__all__ = ["AUTO_ORDER", "IMPLEMENTATIONS", "WGMMA_SCHEDULES", "DeviceArray", "DeviceBuffer", "Implementation",
           "WgmmaConfig", "WgmmaSchedule", "attention", "attention_bytes", "attention_flops", "empty",
           "read", "release_workspace", "spin", "to_device"]
