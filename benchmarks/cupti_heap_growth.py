"""C-heap growth (glibc mallinfo2) per step with a bare ctypes CUPTI client and none of
gpuprofile's CUPTI code: no CUPTI, kernels with the kernel kind on, allocations with MEMORY2 on,
and kernels after the kind was turned off. Each in a fresh process; run from the repository root:

    python benchmarks/cupti_heap_growth.py

This is what the GPU leak tests allow CUPTI (tests/leaks.py, CUPTI_BYTES_PER_RECORD)."""
import subprocess
import sys

CHILD = r'''
import ctypes, sys
sys.path.insert(0, "tests"); sys.path.insert(0, "benchmarks")
from leaks import usage
from gpuprofile import _C, kernels
mode = sys.argv[1]
flush = lambda: None
kinds = {"kernel": (10,), "memory": (49,), "kernel-then-off": (10,)}.get(mode, ())
if kinds:
    import bench_tracing
    flush, keep = bench_tracing._bare_cupti(kinds)
if mode == "kernel-then-off":
    for _ in range(200): kernels.spin(100)
    _C._synchronize(); flush()
    lib = ctypes.CDLL(_C._cupti_info()["path"])
    assert lib.cuptiActivityDisable(10) == 0
    flush()
def step():
    if mode == "memory":
        kernels.DeviceBuffer(1 << 16).close()
    else:
        kernels.spin(100)
    _C._synchronize(); flush()
for _ in range(500): step()
u0 = usage(0)
n = 3000
for _ in range(n): step()
u1 = usage(0)
print(f"{mode:16s} heap/step {(u1.heap - u0.heap) / n:7.1f} blocks {u1.blocks - u0.blocks}", flush=True)
'''
if __name__ == "__main__":
    for mode in ("none", "kernel", "memory", "kernel-then-off"):
        subprocess.run([sys.executable, "-c", CHILD, mode], timeout=60, check=True)
