/* gp_array: one array's memory, shape, strides and element type, as parsed from an argument
 * (array_args.h) or described by a DeviceArray (device_array.h), with what keeps the memory
 * alive. A plain struct: the parsers fill it, the launchers read it. */
#ifndef GP_ARRAY_H
#define GP_ARRAY_H

#include <Python.h>
#include <cuda_runtime_api.h>
#include <stdint.h>

#define GP_ARRAY_MAX_DIM 8

/* Element types gpuprofile computes on; the numbering matches kernels/attention/attention.h. */
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
/* A dtype argument given as a str; -1 with ValueError naming the choices. */
int gp_dtype_from_object(PyObject *name_obj, gp_dtype *out);

/* NumPy has no bfloat16: widens `count` values exactly to float32. */
void gp_bf16_to_f32(const uint16_t *src, float *dst, size_t count);

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

/* Lowest and one-past-highest byte the array can touch. */
void gp_array_extent(const gp_array *a, uintptr_t *lo, uintptr_t *hi);

/* Releases what parsing acquired (buffer views, DLPack deleters). Never raises. */
void gp_array_release(gp_array *a);

#endif
