/* The Python entry of the attention kernels (kernels/attention/attention.h): argument checks, array
 * plumbing (host copies, device arrays, streams), workspace and launch. */
#ifndef GP_ATTENTION_PY_H
#define GP_ATTENTION_PY_H

#include <Python.h>

int gp_attention_init(PyObject *module);
/* gp.kernels.attention: the arrays (q, k, v, out or None), the implementation by name, causal,
 * scale and stream objects, and flash_wgmma's forced schedule and O store (0 and 0 but for
 * _C._testing.attention_wgmma; gp_attn_wgmma_forced). The result (new reference), or NULL with
 * an exception. */
PyObject *gp_attention_run(PyObject *const objs[4], const char *impl_name, int causal,
                           PyObject *scale_obj, PyObject *stream_obj, int schedule, int out_store);

#endif
