/* Conversion of Python stream objects to cudaStream_t. */
#include "streams.h"
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
