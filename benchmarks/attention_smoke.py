"""Every attention kernel once, on small shapes, checked against the float64 reference: the
workload that compute-sanitizer runs (memcheck, racecheck, synccheck) in check_attention.py.

Covers both naive paths (tensor cores, CUDA cores), flash in fp32 and bf16 (and its prefetching
variant), flash_tc in fp16 and bf16 with every variant, head_dim 64 and 128, causal and not, and
sequence lengths that are one row, ragged, and long enough to wrap every pipeline's ring of
shared-memory buffers; plus one naive run past 4096 columns (the two-pass softmax, 16-bit P
written over the row it reads). Exit status 1 on a mismatch.
"""

from __future__ import annotations

import itertools
import sys

import numpy as np

from gpuprofile import _C, kernels
from gpuprofile.kernels import reference as ref

CASES = [("naive", "float32", 64, 0), ("naive", "float32", 80, 0), ("naive", "float16", 64, 0),
         ("naive", "bfloat16", 128, 0), ("naive", "bfloat16", 32, 0), ("flash", "float32", 64, 0),
         ("flash", "bfloat16", 128, 0), ("flash_tc", "float16", 64, 0),
         ("flash_tc", "bfloat16", 64, 0), ("flash_tc", "float16", 128, 0),
         ("flash_tc", "bfloat16", 128, 0), ("flash", "bfloat16", 64, 1), ("flash", "float16", 128, 1)]
# every flash_tc variant at both head_dims, alternating the element type
CASES += [("flash_tc", "float16" if (variant + head_dim // 64) % 2 else "bfloat16", head_dim, variant)
          for variant in range(1, _C.ATTENTION_MAX_VARIANT + 1) for head_dim in (64, 128)]
SEQS = (1, 17, 200)


def one(impl, dtype, head_dim, variant, seq, causal, rng, heads=2):
    q, k, v = (ref.round_to(rng.standard_normal((1, heads, seq, head_dim), dtype=np.float32), dtype)
               for _ in range(3))
    out = kernels.to_device(np.full(q.shape, np.nan, dtype=np.float32), dtype)
    _C._attention(*(kernels.to_device(x, dtype) for x in (q, k, v)), out, impl=impl, causal=causal,
                  variant=variant)
    got = out.numpy()
    want = ref.reference(q, k, v, causal)
    err = ref.max_error(got, want) if np.isfinite(got).all() else float("inf")
    return err, ref.tolerance(q, k, v, dtype, causal, ref=want)


def main():
    rng = np.random.default_rng()
    failures = 0
    for (impl, dtype, head_dim, variant), seq, causal in itertools.product(CASES, SEQS,
                                                                            (False, True)):
        err, tol = one(impl, dtype, head_dim, variant, seq, causal, rng)
        if not err <= tol:
            failures += 1
            print(f"FAIL {impl} {dtype} head_dim={head_dim} variant={variant} seq={seq} causal={causal}: "
                  f"error {err:.3g} > tolerance {tol:.3g}", flush=True)
    err, tol = one("naive", "bfloat16", 64, 0, 4100, True, rng, heads=1)
    if not err <= tol:
        failures += 1
        print(f"FAIL naive bfloat16 seq=4100 (two-pass softmax): error {err:.3g} > tolerance {tol:.3g}")
    host = np.ones((1, 1, 5, 64), dtype=np.float32)  # the host path: staging copies around a launch
    if not np.allclose(kernels.attention(host, host, host, impl="naive"), 1.0):
        failures += 1
        print("FAIL host path", flush=True)
    total = len(CASES) * len(SEQS) * 2 + 2
    print(f"attention smoke: {total - failures} passed, {failures} failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
