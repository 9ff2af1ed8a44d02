"""The NumPy references, the derived tolerance and the FLOP/byte counts: exact expectations,
no GPU needed."""

import math

import numpy as np
import pytest

from gpuprofile.kernels import attention_bytes, attention_flops
from gpuprofile.kernels import reference as ref


def loop_attention(q, k, v, causal, scale):
    """The definition, one query at a time, in Python floats."""
    n, d = q.shape
    out = np.zeros((n, v.shape[1]))
    for i in range(n):
        keys = range(i + 1) if causal else range(n)
        s = [scale * sum(q[i, t] * k[j, t] for t in range(d)) for j in keys]
        m = max(s)
        w = [math.exp(x - m) for x in s]
        for j, wj in zip(keys, w, strict=True):
            out[i] += wj / sum(w) * v[j]
    return out


@pytest.mark.parametrize("causal", [False, True])
def test_reference_matches_the_definition(causal):
    rng = np.random.default_rng()
    q, k, v = rng.standard_normal((3, 2, 2, 7, 5))
    got = ref.reference(q, k, v, causal=causal, scale=0.3)
    for b in range(2):
        for h in range(2):
            want = loop_attention(q[b, h], k[b, h], v[b, h], causal, 0.3)
            np.testing.assert_allclose(got[b, h], want, rtol=1e-12, atol=1e-12)


def test_reference_default_scale_and_seq_one():
    rng = np.random.default_rng()
    q, k, v = rng.standard_normal((3, 1, 1, 4, 16))
    np.testing.assert_allclose(ref.reference(q, k, v), ref.reference(q, k, v, scale=0.25))
    # one key: the output is that key's value, whatever the scores
    q1, k1, v1 = q[..., :1, :], k[..., :1, :], v[..., :1, :]
    np.testing.assert_allclose(ref.reference(q1, k1, v1, causal=True), v1)


def test_causal_first_row_is_first_value():
    rng = np.random.default_rng()
    q, k, v = rng.standard_normal((3, 1, 1, 9, 8))
    np.testing.assert_allclose(ref.reference(q, k, v, causal=True)[..., 0, :], v[..., 0, :])


def test_bfloat16_rounding_exact_values():
    one = 1.0
    ulp = 2.0**-7  # spacing of bfloat16 at 1.0
    x = np.array([one, one + ulp / 2, one + 3 * ulp / 2, one + ulp / 2 + 2**-20, -2.5, 0.0, -0.0,
                  np.inf, -np.inf, 3.0e38], dtype=np.float32)
    bits = ref.bfloat16_bits(x)
    assert [hex(b) for b in bits] == ["0x3f80", "0x3f80", "0x3f82", "0x3f81", "0xc020", "0x0",
                                      "0x8000", "0x7f80", "0xff80", "0x7f62"]
    nan = ref.round_bfloat16(np.array([np.nan], dtype=np.float32))
    assert np.isnan(nan).all()
    np.testing.assert_array_equal(ref.round_bfloat16(x[:3]), [1.0, 1.0, 1.0 + 2 * ulp])


def test_round_to_float16_and_errors():
    assert ref.round_to(np.float32(1 + 2**-11), "float16") == 1.0
    assert ref.round_to(np.float32(1 + 2**-11), "float32") == np.float32(1 + 2**-11)
    with pytest.raises(ValueError, match="dtype must be one of"):
        ref.round_to(1.0, "float64")


@pytest.mark.parametrize("dtype, lo, hi", [("float32", 0.0, 1e-5), ("float16", 1e-5, 5e-3),
                                           ("bfloat16", 1e-4, 4e-2)])
def test_same_precision_naive_errs_by_its_precision(dtype, lo, hi):
    rng = np.random.default_rng()
    q, k, v = (ref.round_to(x, dtype) for x in rng.standard_normal((3, 2, 2, 64, 64)))
    err = ref.max_error(ref.same_precision_naive(q, k, v, dtype), ref.reference(q, k, v))
    assert lo <= err < hi
    tol = ref.tolerance(q, k, v, dtype)
    assert tol == pytest.approx(2 * err + ref.FLOORS[dtype])


def test_max_error_ignores_non_finite_reference():
    assert ref.max_error([1.0, np.nan, 5.0], [1.5, np.nan, np.inf]) == 0.5
    assert ref.max_error([np.nan], [np.nan]) == 0.0


def test_flops_convention():
    assert attention_flops(1, 1, 4096, 64) == 4 * 4096**2 * 64
    assert attention_flops(2, 3, 128, 128) == 4 * 2 * 3 * 128**2 * 128
    assert attention_flops(2, 3, 128, 128, causal=True) == 2 * 2 * 3 * 128**2 * 128


def test_bytes_compulsory_and_naive():
    assert attention_bytes(1, 1, 4096, 64, "bfloat16") == 4 * 4096 * 64 * 2
    assert attention_bytes(1, 1, 4096, 64, "float32", impl="flash_tc") == 4 * 4096 * 64 * 4
    # 16-bit P on the tensor-core path (head_dim 64/128): S write 4 + read 4, P write 2 + read 2
    assert attention_bytes(2, 8, 4096, 128, "float16", impl="naive") == \
        2 * 8 * (4 * 4096 * 128 * 2 + 12 * 4096**2)
    assert attention_bytes(1, 1, 4096, 80, "float16", impl="naive") == \
        4 * 4096 * 80 * 2 + 16 * 4096**2
    assert attention_bytes(1, 1, 4096, 64, "float32", impl="naive") == \
        4 * 4096 * 64 * 4 + 16 * 4096**2
    assert attention_bytes(1, 1, 100, 64, impl="naive", causal=True) == \
        attention_bytes(1, 1, 100, 64, impl="naive")
    with pytest.raises(ValueError, match="dtype must be one of"):
        attention_bytes(1, 1, 8, 64, "float64")
    with pytest.raises(ValueError, match="impl must be one of"):
        attention_bytes(1, 1, 8, 64, impl="fast")
