/* _floor_event_pair(n) and _floor_nvtx_pair(n): ns per pair of raw calls, timed in C. */
#include "overhead.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/testing.h"
#include "core/util.h"

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

/* Two cudaEventRecord calls on the legacy default stream with timing events: the least a
 * CUDA-event timer of a region can cost on the host. */
static PyObject *
floor_event_pair(PyObject *module, PyObject *arg)
{
    int n;
    if (gp_as_int(arg, "n", &n) < 0)
        return NULL;
    if (n <= 0)
        return PyErr_Format(PyExc_ValueError, "n must be positive, got %d", n);
    if (gp_require_device() < 0)
        return NULL;
    cudaEvent_t a = NULL, b = NULL;
    int64_t t0 = 0, t1 = 0;
    GP_CUDA_CHECK(cudaEventCreate(&a));
    GP_CUDA_CHECK(cudaEventCreate(&b));
    GP_CUDA_CHECK(cudaEventRecord(a, 0)); /* first use outside the timed loop */
    t0 = gp_now_ns();
    for (int i = 0; i < n; i++) {
        GP_CUDA_CHECK(cudaEventRecord(a, 0));
        GP_CUDA_CHECK(cudaEventRecord(b, 0));
    }
    t1 = gp_now_ns();
    GP_CUDA_CHECK(cudaEventSynchronize(b));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return PyFloat_FromDouble((double)(t1 - t0) / n);
error:
    if (a)
        cudaEventDestroy(a);
    if (b)
        cudaEventDestroy(b);
    return NULL;
}

/* nvtxRangePushA + nvtxRangePop. */
static PyObject *
floor_nvtx_pair(PyObject *module, PyObject *arg)
{
    int n;
    if (gp_as_int(arg, "n", &n) < 0)
        return NULL;
    if (n <= 0)
        return PyErr_Format(PyExc_ValueError, "n must be positive, got %d", n);
    int64_t t0 = gp_now_ns();
    for (int i = 0; i < n; i++) {
        nvtxRangePushA("floor");
        nvtxRangePop();
    }
    return PyFloat_FromDouble((double)(gp_now_ns() - t0) / n);
}

static PyMethodDef overhead_methods[] = {
    {"floor_event_pair", floor_event_pair, METH_O, "ns per pair of cudaEventRecord calls."},
    {"floor_nvtx_pair", floor_nvtx_pair, METH_O, "ns per NVTX push+pop pair."},
    {NULL, NULL, 0, NULL},
};

/* The overhead benchmark's only: _C._testing. */
int
gp_overhead_init(PyObject *module)
{
    return gp_testing_add_functions(module, overhead_methods);
}
