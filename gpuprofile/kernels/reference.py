"""NumPy references for the attention kernels, and the tolerance derived from them.

- `reference` is the ground truth: float64 throughout.
- `same_precision_naive` is what a straightforward implementation at the kernels' precision
  computes: inputs in their dtype, scores and softmax in float32, P rounded to the input dtype
  before P·V (as tensor cores need), float32 accumulation, the output rounded to the dtype.
- `tolerance` is the house rule: a kernel may err by at most twice what that naive
  implementation errs against float64, plus a small floor.

NumPy has no bfloat16; bfloat16 values are float32 values whose low 16 bits are zero, and
`round_bfloat16` rounds float32 to them (to nearest, ties to even, as the GPU converts).
"""

from __future__ import annotations

import numpy as np

DTYPES = ("float32", "float16", "bfloat16")
# Absolute floors of the tolerance, per dtype: a few units in the last place of outputs near 1.
FLOORS = {"float32": 1e-5, "float16": 2e-4, "bfloat16": 2e-3}


def bfloat16_bits(x) -> np.ndarray:
    """uint16 bit patterns of x rounded to bfloat16 (nearest, ties to even; NaN stays NaN)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    nan = np.isnan(u.view(np.float32))
    rounded[nan] = ((u[nan] >> 16) | np.uint32(0x40)).astype(np.uint16)  # a quiet NaN
    return rounded


def round_bfloat16(x) -> np.ndarray:
    """x rounded to bfloat16, as float32."""
    return (bfloat16_bits(x).astype(np.uint32) << 16).view(np.float32)


def round_to(x, dtype: str) -> np.ndarray:
    """x rounded to `dtype` and returned as float32 (exact for all three dtypes)."""
    if dtype == "bfloat16":
        return round_bfloat16(x)
    if dtype == "float16":
        return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)
    if dtype == "float32":
        return np.asarray(x, dtype=np.float32)
    raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")


def _masked_scores(q, k, causal, scale, dtype, first_row=0):
    s = np.matmul(q, np.swapaxes(k, -1, -2)).astype(dtype) * dtype(scale)
    if causal:  # query row i (position first_row + i) sees keys 0 .. first_row + i
        rows, keys = s.shape[-2:]
        visible = np.arange(keys)[None, :] <= first_row + np.arange(rows)[:, None]
        s = np.where(visible, s, dtype(-np.inf))
    return s


def _softmax(s):
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True)


def reference(q, k, v, causal: bool = False, scale: float | None = None,
              first_row: int = 0) -> np.ndarray:
    """softmax(scale·QKᵀ [causal mask]) V in float64, for arrays [..., seq, head_dim].
    q may hold a block of the query rows, those at positions first_row, first_row + 1, ... (the
    causal mask needs them): the result is exactly those rows of the whole output."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    out = np.empty(np.broadcast_shapes(q.shape[:-1] + v.shape[-1:]), dtype=np.float64)
    for idx in np.ndindex(*q.shape[:-2]):  # one (batch, head) at a time bounds the memory
        p = _softmax(_masked_scores(q[idx], k[idx], causal, scale, np.float64, first_row))
        out[idx] = p @ v[idx]
    return out


def same_precision_naive(q, k, v, dtype: str, causal: bool = False, scale=None,
                         first_row: int = 0) -> np.ndarray:
    """The output a naive implementation at `dtype` precision gives (see the module doc); q may
    be a block of query rows, as in reference()."""
    q, k, v = (round_to(x, dtype) for x in (q, k, v))
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    out = np.empty(q.shape[:-1] + v.shape[-1:], dtype=np.float32)
    for idx in np.ndindex(*q.shape[:-2]):
        p = _softmax(_masked_scores(q[idx], k[idx], causal, scale, np.float32, first_row))
        out[idx] = round_to(round_to(p, dtype) @ v[idx], dtype)
    return out


def max_error(x, ref) -> float:
    """Largest |x - ref| over the elements where ref is finite (0.0 if there are none)."""
    x, ref = np.asarray(x, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    finite = np.isfinite(ref)
    return float(np.max(np.abs(x[finite] - ref[finite]), initial=0.0))


def tolerance(q, k, v, dtype: str, causal: bool = False, scale=None, ref=None,
              first_row: int = 0) -> float:
    """2 × (error of the same-precision naive implementation against float64) + a floor."""
    ref = reference(q, k, v, causal, scale, first_row) if ref is None else ref
    naive = same_precision_naive(q, k, v, dtype, causal, scale, first_row)
    return 2.0 * max_error(naive, ref) + FLOORS[dtype]
