"""Every attention kernel once, on small shapes, checked against the float64 reference: the
workload that compute-sanitizer runs (memcheck, racecheck, synccheck) in check_attention.py.

Covers both naive paths (tensor cores, CUDA cores), flash in fp32 and bf16 (its prefetching v3
and, for fp32 at head_dim 128, v2), flash_tc in fp16 and bf16, flash_wgmma on a Hopper device,
head_dim 64 and 128, causal and not, and sequence lengths that are one row, ragged, and long
enough to wrap every pipeline's ring of shared-memory buffers; plus one naive run past 4096
columns (the two-pass softmax, 16-bit P written over the row it reads). Exit status 1 on a
mismatch.
"""

from __future__ import annotations

import itertools
import sys

import numpy as np

import gpuprofile
from gpuprofile import kernels
from gpuprofile.kernels import reference as ref

CASES = [("naive", "float32", 64), ("naive", "float32", 80), ("naive", "float16", 64),
         ("naive", "bfloat16", 128), ("naive", "bfloat16", 32), ("flash", "float32", 64),
         ("flash", "float32", 128), ("flash", "bfloat16", 128), ("flash", "float16", 64),
         ("flash_tc", "float16", 64), ("flash_tc", "bfloat16", 64), ("flash_tc", "float16", 128),
         ("flash_tc", "bfloat16", 128)]
if gpuprofile.device_info().compute_capability == (9, 0):
    CASES += [("flash_wgmma", dtype, head_dim) for dtype in ("float16", "bfloat16")
              for head_dim in (64, 128)]
SEQS = (1, 17, 200)


def one(impl, dtype, head_dim, seq, causal, rng, heads=2):
    q, k, v = (ref.round_to(rng.standard_normal((1, heads, seq, head_dim), dtype=np.float32), dtype)
               for _ in range(3))
    out = kernels.to_device(np.full(q.shape, np.nan, dtype=np.float32), dtype)
    kernels.attention(*(kernels.to_device(x, dtype) for x in (q, k, v)), impl=impl, causal=causal,
                      out=out)
    got = out.numpy()
    want = ref.reference(q, k, v, causal)
    err = ref.max_error(got, want) if np.isfinite(got).all() else float("inf")
    return err, ref.tolerance(q, k, v, dtype, causal, ref=want)


def main():
    rng = np.random.default_rng()
    failures = 0
    for (impl, dtype, head_dim), seq, causal in itertools.product(CASES, SEQS, (False, True)):
        err, tol = one(impl, dtype, head_dim, seq, causal, rng)
        if not err <= tol:
            failures += 1
            print(f"FAIL {impl} {dtype} head_dim={head_dim} seq={seq} causal={causal}: "
                  f"error {err:.3g} > tolerance {tol:.3g}", flush=True)
    err, tol = one("naive", "bfloat16", 64, 4100, True, rng, heads=1)
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
