// Probe kernels: ground truth for CUPTI tracing and the occupancy calculator.
//
// Versions:
//   probe v1: every thread writes its index into a static shared tile of GP_PROBE_STATIC_SMEM
//             bytes and into the dynamic shared memory it was given, then reads a neighbour's
//             slot. The result is stored only when a flag that is always 0 at run time is set,
//             so the kernel does nothing visible, yet the compiler must keep the static tile (its
//             size is what tests check) and cannot fold the kernel away. Registers per thread
//             are whatever ptxas chose: tests read them with cudaFuncGetAttributes.
//   empty v1: an empty kernel; the cheapest launch, for measuring the host cost of tracing.
#include "probe.h"

__global__ void
gp_probe_kernel(float *out, int store)
{
    __shared__ float tile[GP_PROBE_STATIC_SMEM / sizeof(float)];
    extern __shared__ float dyn[];
    const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned nthreads = blockDim.x * blockDim.y * blockDim.z;
    const unsigned slots = GP_PROBE_STATIC_SMEM / sizeof(float);
    tile[tid % slots] = (float)tid;
    if (store > 1)
        dyn[tid] = (float)tid;
    __syncthreads();
    const float v = tile[(tid + 1) % slots] + (store > 1 ? dyn[(tid + 1) % nthreads] : 0.0f);
    if (store)
        out[blockIdx.x * nthreads + tid] = v;
}

__global__ void
gp_empty_kernel()
{
}

extern "C" cudaError_t
gp_launch_probe(const gp_probe_params *p, cudaStream_t stream)
{
    const dim3 grid(p->grid[0], p->grid[1], p->grid[2]);
    const dim3 block(p->block[0], p->block[1], p->block[2]);
    gp_probe_kernel<<<grid, block, p->dynamic_smem, stream>>>(nullptr, 0);
    return cudaGetLastError();
}

extern "C" cudaError_t
gp_launch_empty(long long n, cudaStream_t stream)
{
    for (long long i = 0; i < n; i++) {
        gp_empty_kernel<<<1, 32, 0, stream>>>();
        const cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess)
            return err;
    }
    return cudaSuccess;
}

extern "C" cudaError_t
gp_probe_attributes(struct cudaFuncAttributes *attr)
{
    return cudaFuncGetAttributes(attr, gp_probe_kernel);
}

extern "C" cudaError_t
gp_probe_occupancy(int *blocks, int block_size, size_t dynamic_smem)
{
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, gp_probe_kernel, block_size,
                                                         dynamic_smem);
}
