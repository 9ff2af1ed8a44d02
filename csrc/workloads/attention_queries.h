/* The attention kernels' questions that need no device work (attention_queries.c): auto's choice
 * in _C, flash_wgmma's rule and forced runs in _C._testing. */
#ifndef GP_ATTENTION_QUERIES_H
#define GP_ATTENTION_QUERIES_H

#include <Python.h>

int gp_attention_queries_init(PyObject *module);

#endif
