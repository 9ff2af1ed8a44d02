"""The naive attention kernels one by one (gpuprofile.profile), beside the device's measured copy
bandwidth (gpuprofile.ceilings()): which of the three kernels keeps naive from its traffic bound.
bf16, seq 4096, batch 4, heads = 2048 / head_dim. Needs a GPU.

    python benchmarks/naive_breakdown.py
"""

import numpy as np

import gpuprofile as gp


def main():
    c = gp.ceilings()
    print(f"measured copy bandwidth {c.dram_bytes_per_s / 1e12:.3f} TB/s ({c.method})")
    rng = np.random.default_rng()
    for head_dim, heads in ((64, 32), (128, 16)):
        q, k, v = (gp.kernels.to_device(rng.standard_normal((4, heads, 4096, head_dim))
                                        .astype(np.float32), "bfloat16") for _ in range(3))
        for _ in range(3):
            gp.kernels.attention(q, k, v, impl="naive")
        with gp.profile(memcpy=False, memset=False, memory=False) as p:
            for _ in range(3):
                gp.kernels.attention(q, k, v, impl="naive")
        total = 0.0
        for name in dict.fromkeys(p.kernels["name"]):
            ms = float(np.median(p.kernels["duration_ns"][p.kernels["name"] == name])) / 1e6
            total += ms
            print(f"head_dim {head_dim:3d}  {ms:7.3f} ms  {name[:80]}")
        nbytes = gp.kernels.attention_bytes(4, heads, 4096, head_dim, impl="naive", dtype="bfloat16")
        bound = nbytes / c.dram_bytes_per_s * 1e3
        print(f"head_dim {head_dim:3d}  {total:7.3f} ms in all; traffic bound {bound:.3f} ms "
              f"({nbytes / 1e9:.1f} GB): {100 * bound / total:.1f} %")


if __name__ == "__main__":
    main()
