/* The host-clock benchmark loop (host_loop.h). */
#include "host_loop.h"
#include "core/util.h"

int
gp_bench_setup_arguments(PyObject *setup, PyObject *dargs, PyObject *dkwargs, PyObject **args,
                         PyObject **kwargs)
{
    *args = Py_NewRef(dargs);
    *kwargs = Py_XNewRef(dkwargs);
    if (setup == NULL || setup == Py_None)
        return 0;
    PyObject *r = PyObject_CallNoArgs(setup);
    if (r == NULL)
        return -1;
    if (r == Py_None) {
        Py_DECREF(r);
        return 0;
    }
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2 || !PyTuple_Check(PyTuple_GET_ITEM(r, 0)) ||
        !(PyDict_Check(PyTuple_GET_ITEM(r, 1)) || PyTuple_GET_ITEM(r, 1) == Py_None)) {
        PyErr_Format(PyExc_TypeError,
                     "setup() must return None or (args: tuple, kwargs: dict), got %.100s",
                     Py_TYPE(r)->tp_name);
        Py_DECREF(r);
        return -1;
    }
    Py_SETREF(*args, Py_NewRef(PyTuple_GET_ITEM(r, 0)));
    PyObject *kw = PyTuple_GET_ITEM(r, 1);
    Py_XSETREF(*kwargs, kw == Py_None ? NULL : Py_NewRef(kw));
    Py_DECREF(r);
    return 0;
}

/* Marks the exception in flight with the index of the call that raised, within the batch
 * (Python turns it into a note); an exception that takes no attributes is left as it is. */
static void
tag_call_index(long long index)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
    PyObject *v = PyLong_FromLongLong(index);
    if (v != NULL)
        (void)PyObject_SetAttrString(exc, "_gpuprofile_call_in_batch", v);
    PyErr_Clear(); /* a failure to tag (or to allocate the int) is not worth reporting */
    PyErr_SetRaisedException(exc);
#else
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    PyObject *v = PyLong_FromLongLong(index);
    if (v != NULL && exc != NULL)
        (void)PyObject_SetAttrString(exc, "_gpuprofile_call_in_batch", v);
    PyErr_Clear(); /* a failure to tag (or to allocate the int) is not worth reporting */
    PyErr_Restore(type, exc, tb);
#endif
    Py_XDECREF(v);
}

/* _bench_host_batch(fn, args, kwargs, n, inner=1, setup=None) -> (bytes of n float64 ms, total ns).
 * Each sample is the mean of `inner` back-to-back calls on CLOCK_MONOTONIC; setup() runs untimed
 * before each sample. */
static PyObject *
host_batch(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"fn", "args", "kwargs", "n", "inner", "setup", NULL};
    PyObject *fn, *fargs, *fkwargs = Py_None, *setup = Py_None;
    int n, inner = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!Oi|iO:_bench_host_batch", kwlist, &fn,
                                     &PyTuple_Type, &fargs, &fkwargs, &n, &inner, &setup))
        return NULL;
    if (n < 1 || n > GP_BENCH_MAX_BATCH || inner < 1)
        return PyErr_Format(PyExc_ValueError, "n must be in [1, %d] and inner >= 1",
                            GP_BENCH_MAX_BATCH);
    if (fkwargs == Py_None)
        fkwargs = NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n * (Py_ssize_t)sizeof(double));
    if (out == NULL)
        return NULL;
    double *ms = (double *)PyBytes_AS_STRING(out);
    PyObject *call_args = NULL, *call_kwargs = NULL;
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (PyErr_CheckSignals() < 0 ||
            gp_bench_setup_arguments(setup, fargs, fkwargs, &call_args, &call_kwargs) < 0)
            goto error;
        int64_t t0 = gp_now_ns();
        for (int k = 0; k < inner; k++) {
            PyObject *r = PyObject_Call(fn, call_args, call_kwargs);
            if (r == NULL) {
                tag_call_index((long long)i * inner + k);
                goto error;
            }
            Py_DECREF(r);
        }
        int64_t dt = gp_now_ns() - t0;
        total += dt;
        ms[i] = (double)dt / 1e6 / inner;
        Py_CLEAR(call_args);
        Py_CLEAR(call_kwargs);
    }
    return Py_BuildValue("(NL)", out, (long long)total);
error:
    Py_XDECREF(call_args);
    Py_XDECREF(call_kwargs);
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef module_methods[] = {
    {"_bench_host_batch", (PyCFunction)(void (*)(void))host_batch, METH_VARARGS | METH_KEYWORDS,
     "_bench_host_batch(fn, args, kwargs, n, inner=1, setup=None) -> (samples, total_ns)"},
    {NULL, NULL, 0, NULL},
};

int
gp_bench_host_init(PyObject *module)
{
    return PyModule_AddFunctions(module, module_methods);
}
