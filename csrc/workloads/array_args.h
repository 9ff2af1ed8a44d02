/* Array arguments from any framework: device arrays through the CUDA Array Interface (v2, v3 with
 * its stream) or DLPack (versioned and unversioned capsules), gpuprofile's own DeviceArray, and
 * host arrays (NumPy and anything else with the buffer protocol). An object offering both
 * protocols is read through DLPack. Parsing makes no CUDA call, so
 * argument errors surface on machines without a GPU; gp_array_locate then asks the driver where
 * a device pointer lives. */
#ifndef GP_ARRAY_ARGS_H
#define GP_ARRAY_ARGS_H

#include <Python.h>
#include <cuda_runtime_api.h>
#include "array.h"

/* Fills `out` from `obj`. `name` ("q", "out") prefixes error messages; `writable` asks for an
 * output. `consumer` is the stream the data will be used on (passed to __dlpack__). 0 on
 * success; -1 with TypeError/ValueError/BufferError set, and nothing left to release. */
int gp_array_parse(PyObject *obj, const char *name, int writable, cudaStream_t consumer,
                   gp_array *out);

/* For device arrays without a known device: asks the driver which device owns the memory, and
 * rejects host memory. 0 or -1 with an exception. Needs a usable device. */
int gp_array_locate(gp_array *a, const char *name);

/* Makes `stream` wait for the producer's stream (CAI v3), when it differs. 0 or -1. */
int gp_array_wait_producer(const gp_array *a, cudaStream_t stream);

#endif
