/* Device memory: free/total bytes (gpuprofile.memory.info()), raw cudaMalloc/cudaFree helpers
 * that let tests allocate without torch or CuPy, and gpuprofile's stream-ordered pool per device
 * (attention scratch space and results). The allocation timeline itself comes from CUPTI
 * (activity.c). */
#ifndef GP_MEMORY_H
#define GP_MEMORY_H

#include <Python.h>

#include <cuda_runtime_api.h>

int gp_device_memory_init(PyObject *module);

/* gpuprofile's memory pool on `device` (created on first use; it keeps what is freed into it
 * until gp_device_pools_trim). 0, or -1 with an exception set. */
int gp_device_pool(int device, cudaMemPool_t *out);

/* A non-blocking stream of gpuprofile's on `device`, the current device (created on first
 * use), where pooled memory is freed after the events its users recorded. 0 or -1 with an
 * exception. */
int gp_device_free_stream(int device, cudaStream_t *out);

/* Returns the unused memory of every pool to the driver. 0 or -1 with an exception. */
int gp_device_pools_trim(void);

#endif
