/* Array arguments from any framework: device arrays through the CUDA Array Interface (v2, v3 with
 * its stream) or DLPack (versioned and unversioned capsules), gpuprofile's own DeviceArray, and
 * host arrays (NumPy and anything else with the buffer protocol). An object offering both
 * protocols is read through DLPack. Parsing makes no CUDA call, so
 * argument errors surface on machines without a GPU; gp_array_locate then asks the driver where
 * a device pointer lives. */
#ifndef GP_ARRAYS_H
#define GP_ARRAYS_H

#include <Python.h>
#include <cuda_runtime_api.h>
#include <stdint.h>

#define GP_ARRAY_MAX_DIM 8

/* Element types gpuprofile computes on; the numbering matches kernels/attention.h. */
typedef enum {
    GP_DTYPE_F32 = 0,
    GP_DTYPE_F16 = 1,
    GP_DTYPE_BF16 = 2,
    GP_DTYPE_OTHER = -1
} gp_dtype;

const char *gp_dtype_name(gp_dtype dtype);
int gp_dtype_size(gp_dtype dtype);
/* "float32" / "float16" / "bfloat16" -> dtype; -1 (no exception) for anything else. */
int gp_dtype_from_name(const char *name);

typedef struct {
    void *data;
    int ndim;
    int64_t shape[GP_ARRAY_MAX_DIM];
    int64_t strides[GP_ARRAY_MAX_DIM]; /* in elements; 0 for dimensions of size 1 */
    gp_dtype dtype;
    char dtype_desc[32]; /* what the producer said, for error messages ("float64", "<i4") */
    int on_device;
    int device; /* CUDA ordinal; known after parsing for DLPack, after gp_array_locate else */
    int readonly;
    const char *via; /* "__cuda_array_interface__", "DLPack", "DeviceArray", "buffer protocol" */
    int has_stream;  /* CAI v3: the producer's stream to wait on */
    cudaStream_t stream;
    /* What keeps the memory alive until gp_array_release. */
    PyObject *owner;
    Py_buffer view;
    int has_view;
    void *dl_managed;
    int dl_versioned;
} gp_array;

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

/* Lowest and one-past-highest byte the array can touch. */
void gp_array_extent(const gp_array *a, uintptr_t *lo, uintptr_t *hi);

/* Releases what parsing acquired (buffer views, DLPack deleters). Never raises. */
void gp_array_release(gp_array *a);

/* Makes `device` current for the duration of a call into CUDA, then restores the caller's device
 * (a framework's current device is shared with ours through the driver). */
typedef struct {
    int previous;
    int switched;
} gp_device_guard;

int gp_device_guard_enter(gp_device_guard *g, int device); /* 0, or -1 with CudaError */
void gp_device_guard_exit(gp_device_guard *g);             /* never raises */

/* The DLPack/CAI integer for a stream: 1 for the legacy default stream, the handle otherwise. */
static inline long long
gp_stream_protocol_value(cudaStream_t s)
{
    return s == (cudaStream_t)0 ? 1 : (long long)(uintptr_t)s;
}

#endif
