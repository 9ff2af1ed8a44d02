/* _C._testing: what only the tests and the benchmarks call, as CPython's _testcapi is: hooks into
 * the kernels' host rules, fault injection, probes of the tracing path and launches that exist to
 * be measured. The package itself never calls it; nothing in it is a promise. Each concern adds
 * its functions (and constants) from its own init, beside the public ones it adds to _C. */
#ifndef GP_TESTING_H
#define GP_TESTING_H

#include <Python.h>

/* _C._testing, created on first use (a borrowed reference), or NULL with an exception. */
PyObject *gp_testing_module(PyObject *module);
/* Adds `methods` to _C._testing. 0, or -1 with an exception. */
int gp_testing_add_functions(PyObject *module, PyMethodDef *methods);

#endif
