/* Workloads with known hardware counts: ground truth for the counter tests and the measured
 * ceilings (copy bandwidth, FP32 FFMA peak, tensor-core peak) of gpuprofile.ceilings().
 * A plain C ABI: launchers take a params struct and a stream and return the launch's
 * cudaError_t; they know nothing of Python. */
#ifndef GP_KERNELS_WORKLOADS_H
#define GP_KERNELS_WORKLOADS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Independent FFMA chains per thread in the FFMA kernel. */
#define GP_FFMA_CHAINS 8
/* Independent accumulators per warp in the mma kernel. */
#define GP_MMA_CHAINS 4
/* FLOPs of one mma.sync.m16n8k16 (per warp): 2 * 16 * 8 * 16. */
#define GP_MMA_FLOPS 4096

/* dst[i] = src[i] for n float4 elements, grid-stride: reads and writes exactly 16 * n bytes. */
typedef struct {
    const void *src;
    void *dst;
    size_t n;
    int blocks, threads;
} gp_copy_params;

/* Each thread runs GP_FFMA_CHAINS independent chains acc = acc * a + b for `iterations` steps:
 * exactly blocks * threads * GP_FFMA_CHAINS * iterations FFMA thread-instructions. */
typedef struct {
    float *out; /* blocks * threads floats */
    float a, b;
    int iterations;
    int blocks, threads;
} gp_ffma_params;

/* Each warp runs GP_MMA_CHAINS independent fp16 -> fp32 mma.sync.m16n8k16 chains for
 * `iterations` steps: exactly blocks * (threads / 32) * GP_MMA_CHAINS * iterations mma
 * instructions of GP_MMA_FLOPS each. Needs sm_80 or newer. */
typedef struct {
    float *out; /* blocks * threads floats */
    int iterations;
    int blocks, threads;
} gp_mma_params;

/* Each thread follows `hops` dependent loads idx = next[idx] through a full-period LCG
 * permutation of n (a power of two) indices: latency-bound when n * 4 bytes exceeds the L2. */
typedef struct {
    const uint32_t *next;
    uint32_t *out; /* blocks * threads */
    size_t n;
    int hops;
    int blocks, threads;
} gp_chase_params;

cudaError_t gp_launch_copy(gp_copy_params p, cudaStream_t stream);
cudaError_t gp_launch_ffma(gp_ffma_params p, cudaStream_t stream);
cudaError_t gp_launch_mma(gp_mma_params p, cudaStream_t stream);
cudaError_t gp_launch_chase(gp_chase_params p, cudaStream_t stream);
/* Fills next[0..n) with the permutation the chase kernel follows (n a power of two). */
cudaError_t gp_launch_chase_init(uint32_t *next, size_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
