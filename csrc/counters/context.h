/* The CUDA driver context and device handle that CUPTI's profiling APIs take, obtained through
 * the runtime (cudaGetDriverEntryPointByVersion) so the extension never links libcuda and import
 * works without a driver. */
#ifndef GP_CONTEXT_H
#define GP_CONTEXT_H

#include <Python.h>
#include <cuda.h>

/* The current device's primary context, made current and initialized (what torch and CuPy use):
 * 0 with *ctx, *device (runtime ordinal) and *cu_device set; -1 with NoDeviceError/CudaError. */
int gp_current_context(CUcontext *ctx, int *device, CUdevice *cu_device);

/* cudaDeviceSynchronize with the GIL released; -1 with CudaError naming `what`. */
int gp_sync_device(const char *what);

int gp_context_init(PyObject *module);

#endif
