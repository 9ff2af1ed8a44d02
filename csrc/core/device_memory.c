/* cudaMemGetInfo and raw allocations. */
#include "device_memory.h"
#include "device.h"
#include "errors.h"
#include "streams.h"
#include "testing.h"
#include "util.h"

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#include "events.h" /* GP_MAX_DEVICES */

/* ---- the pool per device (GIL held) ---------------------------------------------------------- */

static cudaMemPool_t pools[GP_MAX_DEVICES];
static cudaStream_t free_streams[GP_MAX_DEVICES];

static int
check_index(int device)
{
    if (device >= 0 && device < GP_MAX_DEVICES)
        return 0;
    PyErr_Format(gp_GpuProfileError, "device %d: at most %d devices are supported", device,
                 GP_MAX_DEVICES);
    return -1;
}

int
gp_device_pool(int device, cudaMemPool_t *out)
{
    if (check_index(device) < 0)
        return -1;
    if (pools[device] == NULL) {
        struct cudaMemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = device;
        cudaMemPool_t pool;
        GP_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
        /* keep freed memory for the next call: a release at every synchronization would make
         * each allocation a driver mapping again */
        uint64_t keep_all = UINT64_MAX;
        cudaError_t err = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all);
        if (err != cudaSuccess) {
            (void)cudaMemPoolDestroy(pool);
            GP_CUDA_CHECK(err);
        }
        pools[device] = pool;
    }
    *out = pools[device];
    return 0;
error:
    return -1;
}

int
gp_device_free_stream(int device, cudaStream_t *out)
{
    if (check_index(device) < 0)
        return -1;
    if (free_streams[device] == NULL)
        GP_CUDA_CHECK(cudaStreamCreateWithFlags(&free_streams[device], cudaStreamNonBlocking));
    *out = free_streams[device];
    return 0;
error:
    return -1;
}

int
gp_device_pools_trim(void)
{
    for (int d = 0; d < GP_MAX_DEVICES; d++)
        if (pools[d] != NULL)
            GP_CUDA_CHECK(cudaMemPoolTrimTo(pools[d], 0));
    return 0;
error:
    return -1;
}

/* Runs cudaMemGetInfo on `device`, restoring the calling thread's current device. Asking about a
 * device creates its context if it had none (the driver needs one to answer). */
static PyObject *
mem_info(PyObject *module, PyObject *arg)
{
    int device, previous = 0;
    if (gp_as_int(arg, "device", &device) < 0 || gp_require_device() < 0)
        return NULL;
    if (device < 0 || device >= gp_device_count())
        return PyErr_Format(PyExc_IndexError, "device index %d out of range: %d device(s)", device,
                            gp_device_count());
    size_t free_bytes = 0, total = 0;
    cudaError_t err;
    GP_CUDA_CHECK(cudaGetDevice(&previous));
    GP_CUDA_CHECK(cudaSetDevice(device));
    err = cudaMemGetInfo(&free_bytes, &total);
    (void)cudaSetDevice(previous);
    GP_CUDA_CHECK(err);
    return Py_BuildValue("(nn)", (Py_ssize_t)free_bytes, (Py_ssize_t)total);
error:
    return NULL;
}

/* _device_malloc(nbytes, stream=False) -> int: cudaMalloc, or cudaMallocAsync on `stream`
 * when a stream (None = legacy default) is given instead of False. */
static PyObject *
device_malloc(PyObject *module, PyObject *args)
{
    Py_ssize_t nbytes;
    PyObject *stream_obj = Py_False;
    if (!PyArg_ParseTuple(args, "n|O:_device_malloc", &nbytes, &stream_obj))
        return NULL;
    if (nbytes <= 0)
        return PyErr_Format(PyExc_ValueError, "nbytes must be > 0, got %zd", nbytes);
    if (gp_require_device() < 0)
        return NULL;
    void *ptr = NULL;
    if (stream_obj == Py_False) {
        GP_CUDA_CHECK(cudaMalloc(&ptr, (size_t)nbytes));
    } else {
        cudaStream_t stream;
        if (gp_stream_from_object(stream_obj, &stream) < 0)
            return NULL;
        GP_CUDA_CHECK(cudaMallocAsync(&ptr, (size_t)nbytes, stream));
    }
    return PyLong_FromVoidPtr(ptr);
error:
    return NULL;
}

/* _device_free(ptr, stream=False): cudaFree, or cudaFreeAsync on `stream`. */
static PyObject *
device_free(PyObject *module, PyObject *args)
{
    PyObject *ptr_obj, *stream_obj = Py_False;
    if (!PyArg_ParseTuple(args, "O|O:_device_free", &ptr_obj, &stream_obj))
        return NULL;
    void *ptr = PyLong_AsVoidPtr(ptr_obj);
    if (ptr == NULL && PyErr_Occurred())
        return NULL;
    if (gp_require_device() < 0)
        return NULL;
    if (stream_obj == Py_False) {
        GP_CUDA_CHECK(cudaFree(ptr));
    } else {
        cudaStream_t stream;
        if (gp_stream_from_object(stream_obj, &stream) < 0)
            return NULL;
        GP_CUDA_CHECK(cudaFreeAsync(ptr, stream));
    }
    Py_RETURN_NONE;
error:
    return NULL;
}

/* _device_copy_from_host(ptr, data): cudaMemcpy host to device of a bytes-like object. */
static PyObject *
device_copy_from_host(PyObject *module, PyObject *args)
{
    PyObject *ptr_obj;
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "Oy*:device_copy_from_host", &ptr_obj, &data))
        return NULL;
    void *ptr = PyLong_AsVoidPtr(ptr_obj);
    cudaError_t err = cudaSuccess;
    if ((ptr != NULL || !PyErr_Occurred()) && gp_require_device() == 0) {
        Py_BEGIN_ALLOW_THREADS
        err = cudaMemcpy(ptr, data.buf, (size_t)data.len, cudaMemcpyHostToDevice);
        Py_END_ALLOW_THREADS
        if (err != cudaSuccess)
            gp_set_cuda_error(err, "cudaMemcpy(HostToDevice)", __FILE__, __LINE__);
    }
    PyBuffer_Release(&data);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* _device_memset(ptr, value, nbytes): cudaMemset. */
static PyObject *
device_memset(PyObject *module, PyObject *args)
{
    PyObject *ptr_obj;
    int value;
    Py_ssize_t nbytes;
    if (!PyArg_ParseTuple(args, "Oin:_device_memset", &ptr_obj, &value, &nbytes))
        return NULL;
    void *ptr = PyLong_AsVoidPtr(ptr_obj);
    if ((ptr == NULL && PyErr_Occurred()) || gp_require_device() < 0)
        return NULL;
    if (nbytes < 0)
        return PyErr_Format(PyExc_ValueError, "nbytes must be >= 0, got %zd", nbytes);
    GP_CUDA_CHECK(cudaMemset(ptr, value, (size_t)nbytes));
    Py_RETURN_NONE;
error:
    return NULL;
}

/* The tests': _C._testing. */
static PyMethodDef testing_methods[] = {
    {"device_copy_from_host", device_copy_from_host, METH_VARARGS,
     "device_copy_from_host(ptr, data): cudaMemcpy of a bytes-like object to the device."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef memory_methods[] = {
    {"_mem_info", mem_info, METH_O, "_mem_info(device) -> (free, total) bytes (cudaMemGetInfo)."},
    {"_device_malloc", device_malloc, METH_VARARGS,
     "_device_malloc(nbytes, stream=False) -> pointer (cudaMalloc / cudaMallocAsync)."},
    {"_device_free", device_free, METH_VARARGS,
     "_device_free(ptr, stream=False) (cudaFree / cudaFreeAsync)."},
    {"_device_memset", device_memset, METH_VARARGS,
     "_device_memset(ptr, value, nbytes): cudaMemset."},
    {NULL, NULL, 0, NULL},
};

int
gp_device_memory_init(PyObject *module)
{
    if (gp_testing_add_functions(module, testing_methods) < 0)
        return -1;
    return PyModule_AddFunctions(module, memory_methods);
}
