/* _C._testing (testing.h): a plain module object held as an attribute of _C. */
#include "testing.h"

PyObject *
gp_testing_module(PyObject *module)
{
    PyObject *testing = PyObject_GetAttrString(module, "_testing");
    if (testing != NULL) {
        Py_DECREF(testing); /* _C holds it */
        return testing;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return NULL;
    PyErr_Clear();
    testing = PyModule_New("gpuprofile._C._testing");
    if (testing == NULL)
        return NULL;
    if (PyModule_AddStringConstant(testing, "__doc__",
                                   "What only gpuprofile's tests and benchmarks call (as CPython's "
                                   "_testcapi): no promise, no stability.") < 0 ||
        PyModule_AddObjectRef(module, "_testing", testing) < 0) {
        Py_DECREF(testing);
        return NULL;
    }
    Py_DECREF(testing); /* _C holds it */
    return testing;
}

int
gp_testing_add_functions(PyObject *module, PyMethodDef *methods)
{
    PyObject *testing = gp_testing_module(module);
    return testing == NULL ? -1 : PyModule_AddFunctions(testing, methods);
}
