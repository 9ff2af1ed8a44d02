/* _bench_read: the read workload over device memory that gpuprofile/kernels/__init__.py wraps in
 * an owning Python object (DeviceBuffer). The L2 flush buffer it shares with the benchmark and
 * the counters is in the core (core/l2_flush.c). */
#include "devbuf.h"
#include "harness/bench_kernels.h"
#include "core/device.h"
#include "core/l2_flush.h"
#include "core/errors.h"
#include "core/events.h"
#include "core/streams.h"

#include <stdint.h>

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

int
gp_l2_flush_buffer(int device, gp_read_params *out)
{
    char *ptr;
    size_t bytes;
    if (gp_l2_flush_area(device, &ptr, &bytes) < 0)
        return -1;
    out->buffer = ptr;
    out->bytes = bytes;
    out->sink = (uint32_t *)(ptr + bytes);
    out->blocks = gp_read_blocks(device);
    return out->blocks < 0 ? -1 : 0;
}

int
gp_devbuf_init(PyObject *module)
{
    return PyModule_AddFunctions(module, devbuf_methods);
}
