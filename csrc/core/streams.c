/* Conversion of Python stream objects to cudaStream_t; the streams gpuprofile.Stream owns. */
#include "streams.h"
#include "device.h"
#include "errors.h"
#include "gpu_wait.h"
#include "util.h"

static int
handle_from_int(PyObject *value, const char *source, cudaStream_t *out)
{
    if (!PyLong_Check(value) || PyBool_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s must give an int stream handle, got %.100s", source,
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    unsigned long long h = PyLong_AsUnsignedLongLong(value);
    if (h == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Format(PyExc_ValueError, "%s: stream handle must be a non-negative integer", source);
        return -1;
    }
    *out = (cudaStream_t)(uintptr_t)h;
    return 0;
}

int
gp_stream_from_object(PyObject *obj, cudaStream_t *out)
{
    if (obj == NULL || obj == Py_None) {
        *out = (cudaStream_t)0; /* the legacy default stream: torch's default stream too */
        return 0;
    }
    if (PyLong_Check(obj) && !PyBool_Check(obj))
        return handle_from_int(obj, "stream", out);

    PyObject *proto;
    if (gp_optional_attr(obj, "__cuda_stream__", &proto) < 0)
        return -1;
    if (proto != NULL) {
        PyObject *pair = PyObject_CallNoArgs(proto);
        Py_DECREF(proto);
        if (pair == NULL)
            return -1;
        int rc = -1;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2)
            PyErr_Format(PyExc_TypeError, "%.100s.__cuda_stream__() must return (version, handle)",
                         Py_TYPE(obj)->tp_name);
        else
            rc = handle_from_int(PyTuple_GET_ITEM(pair, 1), "__cuda_stream__()", out);
        Py_DECREF(pair);
        return rc;
    }
    PyObject *handle;
    if (gp_optional_attr(obj, "cuda_stream", &handle) < 0)
        return -1;
    if (handle != NULL) {
        int rc = handle_from_int(handle, "stream.cuda_stream", out);
        Py_DECREF(handle);
        return rc;
    }
    PyErr_Format(PyExc_TypeError,
                 "stream must be None, an int handle, or an object with __cuda_stream__ or "
                 ".cuda_stream; got %.100s",
                 Py_TYPE(obj)->tp_name);
    return -1;
}

/* _stream_create() -> int: a non-blocking stream on the current device. */
static PyObject *
stream_create(PyObject *module, PyObject *unused)
{
    if (gp_require_device() < 0)
        return NULL;
    cudaStream_t s;
    GP_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)s);
error:
    return NULL;
}

static PyObject *
stream_destroy(PyObject *module, PyObject *arg)
{
    cudaStream_t s;
    if (gp_stream_from_object(arg, &s) < 0)
        return NULL;
    if (s == 0)
        return PyErr_Format(PyExc_ValueError, "cannot destroy the default stream");
    GP_CUDA_CHECK(cudaStreamDestroy(s));
    Py_RETURN_NONE;
error:
    return NULL;
}

static PyObject *
stream_synchronize(PyObject *module, PyObject *arg)
{
    cudaStream_t s;
    if (gp_stream_from_object(arg, &s) < 0 || gp_require_device() < 0 ||
        gp_wait_stream(s, "cudaStreamSynchronize") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef stream_methods[] = {
    {"_stream_create", stream_create, METH_NOARGS, "A new non-blocking stream (int)."},
    {"_stream_destroy", stream_destroy, METH_O, "Destroy a stream from _stream_create."},
    {"_stream_synchronize", stream_synchronize, METH_O,
     "Wait for the work enqueued on a stream (GIL released; Ctrl-C interrupts the wait)."},
    {NULL, NULL, 0, NULL},
};

int
gp_streams_init(PyObject *module)
{
    return PyModule_AddFunctions(module, stream_methods);
}
