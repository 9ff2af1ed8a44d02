/* NVTX ranges and marks from Python (header-only nvtx3: no library, ~2 ns per call without a tool).
 */
#ifndef GP_NVTX_H
#define GP_NVTX_H

#include <Python.h>

int gp_nvtx_init(PyObject *module);

#endif
