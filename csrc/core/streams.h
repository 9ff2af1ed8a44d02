/* Streams: the stream argument every GPU call takes (None: the legacy default stream, an integer
 * handle, or any object with __cuda_stream__ (CUDA Python protocol) or .cuda_stream (torch,
 * CuPy)), and the streams gpuprofile owns for Python (gpuprofile.Stream: _stream_create,
 * _stream_destroy, _stream_synchronize). */
#ifndef GP_STREAMS_H
#define GP_STREAMS_H

#include <Python.h>
#include <cuda_runtime_api.h>
#include <stdint.h>

/* 0 on success; -1 with TypeError/ValueError naming what was passed. */
int gp_stream_from_object(PyObject *obj, cudaStream_t *out);

/* The DLPack/CAI integer for a stream: 1 for the legacy default stream, the handle otherwise. */
static inline long long
gp_stream_protocol_value(cudaStream_t s)
{
    return s == (cudaStream_t)0 ? 1 : (long long)(uintptr_t)s;
}

int gp_streams_init(PyObject *module);

#endif
