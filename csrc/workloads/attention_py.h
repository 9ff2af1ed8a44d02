/* The Python entry of the attention kernels (kernels/attention/attention.h): argument checks, array
 * plumbing (host copies, device arrays, streams), workspace and launch. */
#ifndef GP_ATTENTION_PY_H
#define GP_ATTENTION_PY_H

#include <Python.h>

int gp_attention_init(PyObject *module);

#endif
