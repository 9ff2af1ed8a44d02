/* _bench_read and the L2 flush buffer: the read workload over device memory that
 * gpuprofile/kernels/__init__.py wraps in an owning Python object (DeviceBuffer) and the
 * benchmark flushes L2 with. */
#include "devbuf.h"
#include "harness/bench_kernels.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/events.h"
#include "core/streams.h"

#include <stdint.h>

/* Enough resident threads to saturate DRAM: 8 blocks of 256 threads per SM (2048 per SM). */
#define GP_READ_BLOCKS_PER_SM 8

int
gp_read_blocks(int device)
{
    int sms = 0;
    GP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms * GP_READ_BLOCKS_PER_SM;
error:
    return -1;
}

static int
parse_pointer(PyObject *obj, const char *what, void **out)
{
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int device pointer, got %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = (void *)(uintptr_t)v;
    return 0;
}

/* _bench_read(pointer, nbytes, sink, stream): one read pass over a buffer (see
 * kernels/harness/bench_kernels.cu). `sink` is a device word the kernel could write (never does for
 * zeroed data). */
static PyObject *
bench_read(PyObject *module, PyObject *args)
{
    PyObject *ptr_obj, *sink_obj, *stream_obj;
    Py_ssize_t nbytes;
    if (!PyArg_ParseTuple(args, "OnOO:_bench_read", &ptr_obj, &nbytes, &sink_obj, &stream_obj))
        return NULL;
    gp_read_params p = {0};
    void *sink;
    cudaStream_t stream;
    if (parse_pointer(ptr_obj, "pointer", (void **)&p.buffer) < 0 ||
        parse_pointer(sink_obj, "sink", &sink) < 0 ||
        gp_stream_from_object(stream_obj, &stream) < 0)
        return NULL;
    if (nbytes < 0)
        return PyErr_Format(PyExc_ValueError, "nbytes must be >= 0, got %zd", nbytes);
    if (((uintptr_t)p.buffer & 15) != 0)
        return PyErr_Format(PyExc_ValueError, "buffer must be 16-byte aligned");
    if (gp_require_device() < 0)
        return NULL;
    int device;
    GP_CUDA_CHECK(cudaGetDevice(&device));
    p.bytes = (size_t)nbytes;
    p.sink = sink;
    p.blocks = gp_read_blocks(device);
    if (p.blocks < 0)
        return NULL;
    GP_CUDA_CHECK(gp_launch_read(p, stream));
    Py_RETURN_NONE;
error:
    return NULL;
}

static PyMethodDef devbuf_methods[] = {
    {"_bench_read", bench_read, METH_VARARGS,
     "_bench_read(pointer, nbytes, sink, stream): read pass."},
    {NULL, NULL, 0, NULL},
};

/* The L2 flush buffer of each device: 2x the L2, allocated on first use and kept for the life of
 * the process (allocating it per benchmark cost nvbench up to 1.2 s per run, nvbench#100). The
 * sink word after it is where the read kernel would write (it never does: the buffer is zero). */
static struct {
    char *ptr;
    size_t bytes;
} flush_buf[GP_MAX_DEVICES];

int
gp_l2_flush_buffer(int device, gp_read_params *out)
{
    if (flush_buf[device].ptr == NULL) {
        int l2 = 0;
        GP_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
        const size_t mib = (size_t)1 << 20;
        size_t bytes = 2 * (size_t)(l2 > 0 ? l2 : 1);
        bytes = (bytes + mib - 1) / mib * mib;
        char *ptr = NULL;
        cudaError_t err;
        GP_CUDA_CHECK(cudaMalloc((void **)&ptr, bytes + 256));
        Py_BEGIN_ALLOW_THREADS
        err = cudaMemset(ptr, 0, bytes + 256);
        Py_END_ALLOW_THREADS
        if (err != cudaSuccess) {
            (void)cudaFree(ptr);
            gp_set_cuda_error(err, "cudaMemset(L2 flush buffer)", __FILE__, __LINE__);
            return -1;
        }
        flush_buf[device].ptr = ptr;
        flush_buf[device].bytes = bytes;
    }
    out->buffer = flush_buf[device].ptr;
    out->bytes = flush_buf[device].bytes;
    out->sink = (uint32_t *)(flush_buf[device].ptr + flush_buf[device].bytes);
    out->blocks = gp_read_blocks(device);
    return out->blocks < 0 ? -1 : 0;
error:
    return -1;
}

int
gp_devbuf_init(PyObject *module)
{
    return PyModule_AddFunctions(module, devbuf_methods);
}
