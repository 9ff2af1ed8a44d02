/* Probe kernels: launch configurations and resources fixed in advance, so that CUPTI's kernel
 * records and the occupancy calculator can be checked against ground truth. A plain C ABI:
 * launchers take POD arguments and a stream and return the launch's cudaError_t. */
#ifndef GP_KERNELS_PROBE_H
#define GP_KERNELS_PROBE_H

#include <cuda_runtime_api.h>
#include <stddef.h>

/* Static shared memory of the probe kernel, in bytes. */
#define GP_PROBE_STATIC_SMEM 4096

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    unsigned grid[3];
    unsigned block[3];
    size_t dynamic_smem; /* bytes of dynamic shared memory per block (at most 48 KiB) */
} gp_probe_params;

/* The probe kernel with the given launch configuration. */
cudaError_t gp_launch_probe(const gp_probe_params *p, cudaStream_t stream);

/* `n` launches of an empty <<<1, 32>>> kernel back to back: the cheapest launch there is. Stops at
 * the first failing launch and returns its error. */
cudaError_t gp_launch_empty(long long n, cudaStream_t stream);

/* cudaFuncGetAttributes of the probe kernel: registers, static shared and local memory. */
cudaError_t gp_probe_attributes(struct cudaFuncAttributes *attr);

/* cudaOccupancyMaxActiveBlocksPerMultiprocessor for the probe kernel on the current device. */
cudaError_t gp_probe_occupancy(int *blocks, int block_size, size_t dynamic_smem);

#ifdef __cplusplus
}
#endif

#endif
