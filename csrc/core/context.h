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

/* Running code of another device's producer (torch exports a tensor only while its device is
 * current): gp_context_enter_device makes device `device`'s primary context current unless the
 * current context is already that device's, and saves the caller's exact context, which
 * gp_context_leave_device makes current again (a driver-level swap: no runtime's idea of "the
 * current device" is consulted, so none can leave another device current). 0, or -1 with
 * CudaError. */
typedef struct {
    CUcontext ctx;   /* the caller's context (NULL if none was current) */
    CUdevice device; /* the device entered */
    int switched;
} gp_saved_context;

int gp_context_enter_device(int device, gp_saved_context *saved);
int gp_context_leave_device(const gp_saved_context *saved);

int gp_context_init(PyObject *module);

#endif
