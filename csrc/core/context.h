/* The CUDA driver context and device handle that CUPTI's profiling APIs take, obtained through
 * the runtime (cudaGetDriverEntryPointByVersion) so the extension never links libcuda and import
 * works without a driver. */
#ifndef GP_CORE_CONTEXT_H
#define GP_CORE_CONTEXT_H

#include <Python.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

/* The current device's primary context, made current and initialized (what torch and CuPy use):
 * 0 with *ctx, *device (runtime ordinal) and *cu_device set; -1 with NoDeviceError/CudaError. */
int gp_current_context(CUcontext *ctx, int *device, CUdevice *cu_device);

/* The context of `stream` (any handle, the default-stream ones included): 0, or -1 with
 * CudaError. */
int gp_stream_context(cudaStream_t stream, CUcontext *ctx);

int gp_context_init(PyObject *module);

#endif
