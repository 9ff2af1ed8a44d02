/* Floors for the overhead benchmark: the cost of the raw CUDA and NVTX calls a region makes,
 * measured from C with nothing around them. */
#ifndef GP_OVERHEAD_H
#define GP_OVERHEAD_H

#include <Python.h>

int gp_overhead_init(PyObject *module);

#endif
