/* Record layouts as NumPy dtype dicts (layout.h). */
#include "layout.h"

PyObject *
gp_layout_dtype(const gp_layout_field *fields, size_t n, size_t itemsize)
{
    PyObject *names = PyList_New((Py_ssize_t)n), *formats = PyList_New((Py_ssize_t)n);
    PyObject *offsets = PyList_New((Py_ssize_t)n);
    if (names == NULL || formats == NULL || offsets == NULL)
        goto error;
    for (size_t k = 0; k < n; k++) {
        PyObject *name = PyUnicode_FromString(fields[k].name);
        PyObject *format = PyUnicode_FromString(fields[k].format);
        PyObject *offset = PyLong_FromSize_t(fields[k].offset);
        if (name == NULL || format == NULL || offset == NULL) {
            Py_XDECREF(name);
            Py_XDECREF(format);
            Py_XDECREF(offset);
            goto error;
        }
        PyList_SET_ITEM(names, (Py_ssize_t)k, name);
        PyList_SET_ITEM(formats, (Py_ssize_t)k, format);
        PyList_SET_ITEM(offsets, (Py_ssize_t)k, offset);
    }
    return Py_BuildValue("{sNsNsNsn}", "names", names, "formats", formats, "offsets", offsets,
                         "itemsize", (Py_ssize_t)itemsize);
error:
    Py_XDECREF(names);
    Py_XDECREF(formats);
    Py_XDECREF(offsets);
    return NULL;
}
