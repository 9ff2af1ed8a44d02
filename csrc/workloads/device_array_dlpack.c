/* DeviceArray's DLPack export (__dlpack__, __dlpack_device__): a capsule that keeps the array
 * alive while a consumer holds the tensor; the consumer's stream waits for the last write. Once
 * exported, a pooled array's free waits for the whole device (device_array.c). */
#include "core/device.h"
#include "core/errors.h"
#include "core/streams.h"
#include "core/util.h"
#include "device_array_impl.h"
#include "dlpack.h"

#include <string.h>

/* ---- DLPack export -------------------------------------------------------------------------- */

typedef struct {
    gp_dl_managed plain;
    gp_dl_managed_versioned versioned;
    int64_t shape[GP_ARRAY_MAX_DIM];
    int64_t strides[GP_ARRAY_MAX_DIM];
    PyObject *array; /* keeps the memory alive while a consumer holds the tensor */
} export_ctx;

static void
export_free(export_ctx *ctx)
{
    /* Consumers may call the deleter from any thread, with or without the GIL. */
    if (!Py_IsInitialized())
        return;
    PyGILState_STATE st = PyGILState_Ensure();
    Py_DECREF(ctx->array);
    PyMem_RawFree(ctx);
    PyGILState_Release(st);
}

static void
delete_plain(gp_dl_managed *m)
{
    export_free((export_ctx *)m->manager_ctx);
}

static void
delete_versioned(gp_dl_managed_versioned *m)
{
    export_free((export_ctx *)m->manager_ctx);
}

/* An unconsumed capsule owns its tensor; a consumed one was renamed and is left alone. */
static void
capsule_destructor(PyObject *cap)
{
    gp_exc_state saved;
    gp_exc_save(&saved);
    if (PyCapsule_IsValid(cap, "dltensor")) {
        gp_dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
        m->deleter(m);
    } else if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        gp_dl_managed_versioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
        m->deleter(m);
    }
    gp_exc_restore(&saved);
}

static export_ctx *
export_new(DeviceArray *a)
{
    export_ctx *ctx = PyMem_RawCalloc(1, sizeof *ctx);
    if (ctx == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(ctx->shape, a->shape, sizeof(int64_t) * a->ndim);
    gp_device_array_strides(a, ctx->strides);
    static const gp_dl_dtype dtypes[] = {
        {GP_DL_FLOAT, 32, 1}, {GP_DL_FLOAT, 16, 1}, {GP_DL_BFLOAT, 16, 1}};
    const gp_dl_tensor t = {
        a->data, {GP_DL_CUDA, a->device}, a->ndim, dtypes[a->dtype], ctx->shape, ctx->strides, 0};
    ctx->plain.dl_tensor = t;
    ctx->plain.manager_ctx = ctx;
    ctx->plain.deleter = delete_plain;
    ctx->versioned.version.major = GP_DL_MAJOR_VERSION;
    ctx->versioned.version.minor = GP_DL_MINOR_VERSION;
    ctx->versioned.manager_ctx = ctx;
    ctx->versioned.deleter = delete_versioned;
    ctx->versioned.dl_tensor = t;
    ctx->array = Py_NewRef((PyObject *)a);
    return ctx;
}

/* The consumer's stream per the DLPack protocol for CUDA: None and 1 are the legacy default
 * stream, 2 the per-thread default stream, -1 "do not synchronize", other values handles. */
static int
consumer_stream(PyObject *obj, cudaStream_t *out, int *sync)
{
    *sync = 1;
    *out = (cudaStream_t)0;
    if (obj == Py_None)
        return 0;
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v == -1)
        *sync = 0;
    else if (v < -1) {
        PyErr_Format(PyExc_ValueError, "__dlpack__: invalid stream %lld", v);
        return -1;
    } else if (v > 1)
        *out = v == 2 ? cudaStreamPerThread : (cudaStream_t)(uintptr_t)v;
    return 0;
}

static int
check_export_args(DeviceArray *a, PyObject *dl_device, PyObject *copy)
{
    if (copy != Py_None && PyObject_IsTrue(copy)) {
        PyErr_SetString(PyExc_BufferError, "DeviceArray.__dlpack__: copy=True is not supported");
        return -1;
    }
    if (dl_device != Py_None) {
        int type = -1, id = -1;
        if (!PyArg_ParseTuple(dl_device, "ii", &type, &id))
            return -1;
        if (type != GP_DL_CUDA || id != a->device) {
            PyErr_Format(PyExc_BufferError,
                         "DeviceArray on CUDA device %d cannot be exported to "
                         "DLPack device (%d, %d)",
                         a->device, type, id);
            return -1;
        }
    }
    return 0;
}

PyObject *
gp_device_array_dlpack(DeviceArray *a, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream_obj = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO:__dlpack__", kwlist, &stream_obj,
                                     &max_version, &dl_device, &copy))
        return NULL;
    cudaStream_t stream;
    int sync, major = 0;
    if (consumer_stream(stream_obj, &stream, &sync) < 0 ||
        check_export_args(a, dl_device, copy) < 0)
        return NULL;
    if (max_version != Py_None) {
        int minor;
        if (!PyArg_ParseTuple(max_version, "ii", &major, &minor))
            return NULL;
    }
    if (sync && a->ready != NULL) {
        gp_device_guard g;
        if (gp_device_guard_enter(&g, a->device) < 0)
            return NULL;
        cudaError_t err = cudaStreamWaitEvent(stream, a->ready, 0);
        gp_device_guard_exit(&g);
        if (err != cudaSuccess)
            return gp_set_cuda_error(err, "cudaStreamWaitEvent", __FILE__, __LINE__);
    }
    export_ctx *ctx = export_new(a);
    if (ctx == NULL)
        return NULL;
    a->sync_free = 1;
    PyObject *cap = major >= 1
                        ? PyCapsule_New(&ctx->versioned, "dltensor_versioned", capsule_destructor)
                        : PyCapsule_New(&ctx->plain, "dltensor", capsule_destructor);
    if (cap == NULL)
        export_free(ctx);
    return cap;
}

PyObject *
gp_device_array_dlpack_device(DeviceArray *a, PyObject *unused)
{
    return Py_BuildValue("(ii)", GP_DL_CUDA, a->device);
}
