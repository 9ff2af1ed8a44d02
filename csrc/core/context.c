/* Driver context lookup through the runtime's driver entry points. */
#include "context.h"
#include "device.h"
#include "errors.h"
#include "gpu_wait.h"

#include <cuda_runtime_api.h>

typedef CUresult (*ctx_get_current_fn)(CUcontext *);
typedef CUresult (*device_get_fn)(CUdevice *, int);
typedef CUresult (*stream_get_ctx_fn)(CUstream, CUcontext *);

static ctx_get_current_fn ctx_get_current;
static device_get_fn device_get;
static stream_get_ctx_fn stream_get_ctx;

static int
bind(const char *symbol, void **fn)
{
    enum cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSuccess;
    GP_CUDA_CHECK(cudaGetDriverEntryPointByVersion(symbol, fn, 12000, cudaEnableDefault, &status));
    if (status != cudaDriverEntryPointSuccess || *fn == NULL) {
        PyErr_Format(gp_CudaError, "the CUDA driver does not provide %s (entry point status %d)",
                     symbol, (int)status);
        return -1;
    }
    return 0;
error:
    return -1;
}

int
gp_current_context(CUcontext *ctx, int *device, CUdevice *cu_device)
{
    if (gp_require_device() < 0)
        return -1;
    GP_CUDA_CHECK(cudaGetDevice(device));
    GP_CUDA_CHECK(cudaFree(0)); /* creates the primary context and makes it current */
    if ((ctx_get_current == NULL && bind("cuCtxGetCurrent", (void **)&ctx_get_current) < 0) ||
        (device_get == NULL && bind("cuDeviceGet", (void **)&device_get) < 0))
        return -1;
    CUresult res = ctx_get_current(ctx);
    if (res != CUDA_SUCCESS || *ctx == NULL) {
        PyErr_Format(gp_CudaError, "cuCtxGetCurrent failed (CUresult %d)", (int)res);
        return -1;
    }
    res = device_get(cu_device, *device);
    if (res != CUDA_SUCCESS) {
        PyErr_Format(gp_CudaError, "cuDeviceGet(%d) failed (CUresult %d)", *device, (int)res);
        return -1;
    }
    return 0;
error:
    return -1;
}

int
gp_stream_context(cudaStream_t stream, CUcontext *ctx)
{
    if (stream_get_ctx == NULL && bind("cuStreamGetCtx", (void **)&stream_get_ctx) < 0)
        return -1;
    CUresult res = stream_get_ctx((CUstream)stream, ctx);
    if (res != CUDA_SUCCESS || *ctx == NULL) {
        PyErr_Format(gp_CudaError, "cuStreamGetCtx failed (CUresult %d)", (int)res);
        return -1;
    }
    return 0;
}

/* _current_device() -> int: the calling thread's current device (NoDeviceError without one). */
static PyObject *
current_device(PyObject *module, PyObject *unused)
{
    int device = 0;
    if (gp_require_device() < 0)
        return NULL;
    GP_CUDA_CHECK(cudaGetDevice(&device));
    return PyLong_FromLong(device);
error:
    return NULL;
}

/* _synchronize(): waits for the current device, GIL released, Ctrl-C answered (gpu_wait.h). */
static PyObject *
synchronize(PyObject *module, PyObject *unused)
{
    if (gp_require_device() < 0 || gp_wait_device("cudaDeviceSynchronize") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef context_methods[] = {
    {"_current_device", current_device, METH_NOARGS, "The calling thread's current device."},
    {"_synchronize", synchronize, METH_NOARGS,
     "Wait for all work on the current device (GIL released; Ctrl-C interrupts the wait)."},
    {NULL, NULL, 0, NULL},
};

int
gp_context_init(PyObject *module)
{
    return PyModule_AddFunctions(module, context_methods);
}
