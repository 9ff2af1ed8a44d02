/* gpuprofile.kernels.DeviceArray: a C-contiguous array in CUDA device memory that gpuprofile
 * allocated (cudaMalloc) and frees with the object. Other frameworks take it without a copy
 * through __cuda_array_interface__ (v3) and __dlpack__ / __dlpack_device__. A "ready" event,
 * recorded after the last GPU write, lets consumers on other streams wait for the data. */
#ifndef GP_DEVICE_ARRAY_H
#define GP_DEVICE_ARRAY_H

#include <Python.h>

#include "array.h"

int gp_device_array_init(PyObject *module);

int gp_device_array_check(PyObject *obj);

/* A new uninitialized array on the current device (which must be `device`). */
PyObject *gp_device_array_new(int ndim, const int64_t *shape, gp_dtype dtype, int device);

/* Fills `out` with a borrowed view of the array (no reference taken). */
void gp_device_array_describe(PyObject *obj, gp_array *out);

/* Records the ready event on `stream`, after the work that writes the array. 0 or -1. */
int gp_device_array_set_ready(PyObject *obj, cudaStream_t stream);

/* Makes `stream` wait for the ready event, if one was recorded. 0 or -1. */
int gp_device_array_wait_ready(PyObject *obj, cudaStream_t stream);

#endif
