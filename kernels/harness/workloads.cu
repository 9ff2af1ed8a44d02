// Workloads with known hardware counts: ground truth for the counter tests and the ceilings.
//
// Versions:
//   copy  v1: grid-stride float4 copy; every element is read once and written once, so DRAM
//             traffic is 16 bytes per element each way when the buffers exceed the L2.
//   ffma  v1: GP_FFMA_CHAINS independent FFMA chains per thread; the chains hide the FMA latency,
//             so with enough warps the FMA pipe stays full. The result is summed with FADDs (not
//             FFMAs) and stored, so the FFMA count stays exactly the analytic one.
//   mma   v1: GP_MMA_CHAINS independent mma.sync.m16n8k16 fp16 -> fp32 accumulator chains per
//             warp, operands held in registers: tensor-pipe bound, no memory traffic in the loop.
//             (Hopper's wgmma reaches a higher peak than mma.sync; this measures the mma.sync one.)
//   chase v1: dependent loads through a full-period LCG permutation (next[i] = a*i + c mod n):
//             each load waits for the previous one, so the kernel is latency-bound.
#include "workloads.h"

#include <cuda_fp16.h>

__global__ void
gp_copy_kernel(const float4 *__restrict__ src, float4 *__restrict__ dst, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = src[i];
}

__global__ void
gp_ffma_kernel(float *out, float a, float b, int iterations)
{
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    float acc[GP_FFMA_CHAINS];
#pragma unroll
    for (int c = 0; c < GP_FFMA_CHAINS; c++)
        acc[c] = (float)(threadIdx.x + c); // a conversion, not an FFMA
    for (int i = 0; i < iterations; i++) {
#pragma unroll
        for (int c = 0; c < GP_FFMA_CHAINS; c++)
            acc[c] = fmaf(acc[c], a, b);
    }
    float sum = acc[0];
#pragma unroll
    for (int c = 1; c < GP_FFMA_CHAINS; c++)
        sum += acc[c];
    out[tid] = sum;
}

__device__ __forceinline__ void
mma_16816(float d[4], const uint32_t a[4], const uint32_t b[2])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__global__ void
gp_mma_kernel(float *out, int iterations)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    // Small operands keep the accumulators finite for any iteration count we use.
    const __half2 h = __floats2half2_rn(1e-3f * (threadIdx.x % 7), 1e-3f);
    const uint32_t bits = *reinterpret_cast<const uint32_t *>(&h);
    const uint32_t a[4] = {bits, bits, bits, bits};
    const uint32_t b[2] = {bits, bits};
    float acc[GP_MMA_CHAINS][4] = {};
    for (int i = 0; i < iterations; i++) {
#pragma unroll
        for (int c = 0; c < GP_MMA_CHAINS; c++)
            mma_16816(acc[c], a, b);
    }
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < GP_MMA_CHAINS; c++)
        sum += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
    out[tid] = sum;
#endif
}

#define GP_LCG_A 1664525u
#define GP_LCG_C 1013904223u

__global__ void
gp_chase_init_kernel(uint32_t *next, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        next[i] = (uint32_t)((GP_LCG_A * (uint32_t)i + GP_LCG_C) & (uint32_t)(n - 1));
}

__global__ void
gp_chase_kernel(const uint32_t *next, uint32_t *out, size_t n, int hops)
{
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t threads = (size_t)gridDim.x * blockDim.x;
    uint32_t idx = (uint32_t)(tid * (n / threads));
    for (int h = 0; h < hops; h++)
        idx = next[idx];
    out[tid] = idx;
}

static bool
valid_grid(int blocks, int threads)
{
    return blocks > 0 && threads > 0 && threads <= 1024;
}

extern "C" cudaError_t
gp_launch_copy(gp_copy_params p, cudaStream_t stream)
{
    if (!valid_grid(p.blocks, p.threads))
        return cudaErrorInvalidConfiguration;
    gp_copy_kernel<<<p.blocks, p.threads, 0, stream>>>((const float4 *)p.src, (float4 *)p.dst, p.n);
    return cudaGetLastError();
}

extern "C" cudaError_t
gp_launch_ffma(gp_ffma_params p, cudaStream_t stream)
{
    if (!valid_grid(p.blocks, p.threads))
        return cudaErrorInvalidConfiguration;
    gp_ffma_kernel<<<p.blocks, p.threads, 0, stream>>>(p.out, p.a, p.b, p.iterations);
    return cudaGetLastError();
}

extern "C" cudaError_t
gp_launch_mma(gp_mma_params p, cudaStream_t stream)
{
    if (!valid_grid(p.blocks, p.threads) || p.threads % 32 != 0)
        return cudaErrorInvalidConfiguration;
    gp_mma_kernel<<<p.blocks, p.threads, 0, stream>>>(p.out, p.iterations);
    return cudaGetLastError();
}

extern "C" cudaError_t
gp_launch_chase(gp_chase_params p, cudaStream_t stream)
{
    if (!valid_grid(p.blocks, p.threads))
        return cudaErrorInvalidConfiguration;
    gp_chase_kernel<<<p.blocks, p.threads, 0, stream>>>(p.next, p.out, p.n, p.hops);
    return cudaGetLastError();
}

extern "C" cudaError_t
gp_launch_chase_init(uint32_t *next, size_t n, cudaStream_t stream)
{
    gp_chase_init_kernel<<<1024, 256, 0, stream>>>(next, n);
    return cudaGetLastError();
}
