/* The DeviceArray object's layout, shared by device_array.c (the type, allocation, host copies)
 * and device_array_dlpack.c (the DLPack export). Private to these two files. */
#ifndef GP_DEVICE_ARRAY_IMPL_H
#define GP_DEVICE_ARRAY_IMPL_H

#include <Python.h>
#include <cuda_runtime_api.h>

#include "array.h"

typedef struct {
    PyObject_HEAD
    void *data;
    int ndim;
    int64_t shape[GP_ARRAY_MAX_DIM];
    gp_dtype dtype;
    int device;
    size_t nbytes;
    cudaEvent_t ready;    /* recorded after the last write; NULL until then */
    cudaStream_t written; /* the stream of that write, reported by __cuda_array_interface__ */
    cudaEvent_t read;     /* recorded after the last read by our kernels; NULL until then */
    cudaStream_t read_on; /* the stream of that read */
    cudaStream_t free_on; /* pooled: gpuprofile's free stream of the device */
    char pooled;          /* data comes from gp_device_pool: freed stream-ordered */
    char sync_free;       /* exported, or read on overlapping streams: free after the device */
} DeviceArray;

/* C-contiguous strides, in elements. */
void gp_device_array_strides(const DeviceArray *a, int64_t *strides);

/* __dlpack__(*, stream, max_version, dl_device, copy) and __dlpack_device__(). */
PyObject *gp_device_array_dlpack(DeviceArray *a, PyObject *args, PyObject *kwargs);
PyObject *gp_device_array_dlpack_device(DeviceArray *a, PyObject *unused);

#endif
