/* gpuprofile.kernels.DeviceArray: a C-contiguous array in CUDA device memory that gpuprofile
 * allocated (cudaMalloc, or its stream-ordered pool for attention results) and frees with the
 * object. Other frameworks take it without a copy
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

/* A new uninitialized array from gpuprofile's pool, allocated in `stream`'s order (its first
 * writer must run on `stream` and call gp_device_array_set_ready), freed stream-ordered. */
PyObject *gp_device_array_new_pooled(int ndim, const int64_t *shape, gp_dtype dtype, int device,
                                     cudaStream_t stream);

/* After our kernel that reads the array was launched on `stream`: the free waits for it. */
int gp_device_array_note_read(PyObject *obj, cudaStream_t stream);

/* The array was handed to another framework: its free waits for the whole device. */
void gp_device_array_note_export(PyObject *obj);

/* Fills `out` with a borrowed view of the array (no reference taken). */
void gp_device_array_describe(PyObject *obj, gp_array *out);

/* Records the ready event on `stream`, after the work that writes the array. 0 or -1. */
int gp_device_array_set_ready(PyObject *obj, cudaStream_t stream);

/* Makes `stream` wait for the ready event, if one was recorded. 0 or -1. */
int gp_device_array_wait_ready(PyObject *obj, cudaStream_t stream);

#endif
