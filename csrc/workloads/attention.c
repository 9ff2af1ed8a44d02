/* gpuprofile.kernels.attention from C: every argument is checked before the first CUDA call (so
 * argument errors show on machines without a GPU), then the arrays are either used in place
 * (device arrays, any framework) or staged through device memory (host arrays).
 *
 * Scratch memory (the naive family's score matrix, host staging) comes from a memory pool per
 * device that this file owns; stream-ordered allocation keeps host time out of the timed stream
 * and the pool keeps its memory between calls (release_workspace() hands it back). */
#include "attention_py.h"
#include "array_args.h"
#include "attention/attention.h"
#include "attention_impls.h"
#include "attention_queries.h"
#include "core/device.h"
#include "core/device_memory.h"
#include "device_array.h"
#include "core/errors.h"
#include "core/events.h"
#include "core/streams.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

static const char *const arg_names[] = {"q", "k", "v", "out"};

_Static_assert((int)GP_DTYPE_F32 == (int)GP_ATTN_F32 && (int)GP_DTYPE_F16 == (int)GP_ATTN_F16 &&
                   (int)GP_DTYPE_BF16 == (int)GP_ATTN_BF16,
               "array.h and kernels/attention/attention.h number dtypes alike");

typedef struct {
    gp_array a[4]; /* q, k, v, out */
    int count;     /* arrays parsed: 3, or 4 with out */
    PyObject *out; /* the result object (new reference) */
    cudaStream_t stream;
    gp_attn_params p;
    int requested; /* impl asked for */
    int impl;      /* impl that runs */
} attn_call;

/* Sets `type` with a formatted message; returns -1 for the caller to return. */
static int
fail(PyObject *type, const char *fmt, ...)
{
    va_list va;
    va_start(va, fmt);
    PyErr_FormatV(type, fmt, va);
    va_end(va);
    return -1;
}

static void
format_shape(const gp_array *a, char *buf, size_t size)
{
    int used = snprintf(buf, size, "(");
    for (int i = 0; i < a->ndim && used < (int)size; i++)
        used += snprintf(buf + used, size - used, i ? ", %lld" : "%lld", (long long)a->shape[i]);
    if (used < (int)size)
        snprintf(buf + used, size - used, a->ndim == 1 ? ",)" : ")");
}

static int
same_shape(const gp_array *x, const gp_array *y)
{
    return x->ndim == y->ndim && memcmp(x->shape, y->shape, sizeof(int64_t) * x->ndim) == 0;
}

/* ---- checks that need no GPU ---------------------------------------------------------------- */

static int
check_each(const attn_call *c)
{
    char shape[96];
    for (int i = 0; i < c->count; i++) {
        const gp_array *a = &c->a[i];
        format_shape(a, shape, sizeof shape);
        if (a->ndim != 4)
            return fail(PyExc_ValueError,
                        "attention: %s must have 4 dimensions [batch, "
                        "heads, seq, head_dim], got shape %s",
                        arg_names[i], shape);
        if (a->dtype == GP_DTYPE_OTHER)
            return fail(PyExc_ValueError,
                        "attention: %s has dtype %s; supported: "
                        "float32, float16, bfloat16",
                        arg_names[i], a->dtype_desc);
        for (int d = 0; d < 4; d++) {
            if (a->shape[d] <= 0)
                return fail(PyExc_ValueError,
                            "attention: %s is empty (shape %s); "
                            "every dimension must be at least 1",
                            arg_names[i], shape);
            if (a->shape[d] > INT32_MAX)
                return fail(PyExc_ValueError,
                            "attention: %s has a dimension over "
                            "2**31 - 1 (shape %s)",
                            arg_names[i], shape);
        }
        if (a->shape[3] > 1 && a->strides[3] != 1)
            return fail(PyExc_ValueError,
                        "attention: %s must be contiguous in head_dim "
                        "(last stride 1 element), got stride %lld",
                        arg_names[i], (long long)a->strides[3]);
    }
    return 0;
}

static int
check_together(const attn_call *c)
{
    const gp_array *q = &c->a[0];
    char qs[96], xs[96];
    format_shape(q, qs, sizeof qs);
    for (int i = 1; i < c->count; i++) {
        const gp_array *x = &c->a[i];
        format_shape(x, xs, sizeof xs);
        if (x->on_device != q->on_device)
            return fail(PyExc_ValueError,
                        "attention: cannot mix host and device arrays: "
                        "q is a %s array (%s), %s is a %s array (%s)",
                        q->on_device ? "device" : "host", q->via, arg_names[i],
                        x->on_device ? "device" : "host", x->via);
        if (!same_shape(q, x))
            return fail(PyExc_ValueError,
                        "attention: %s has shape %s but q has shape %s "
                        "(q, k, v and out share one shape)",
                        arg_names[i], xs, qs);
        if (x->dtype != q->dtype)
            return fail(PyExc_ValueError,
                        "attention: %s is %s but q is %s (q, k, v and "
                        "out share one dtype)",
                        arg_names[i], x->dtype_desc, q->dtype_desc);
    }
    if (q->shape[0] > GP_ATTN_MAX_BATCH || q->shape[1] > GP_ATTN_MAX_HEADS)
        return fail(PyExc_ValueError,
                    "attention: batch and heads must each be at most "
                    "%d, got shape %s",
                    GP_ATTN_MAX_BATCH, qs);
    if (!q->on_device && c->count < 4)
        return fail(PyExc_ValueError, "attention: host inputs need a host `out`");
    return 0;
}

static int
parse_scale(PyObject *obj, int head_dim, float *out)
{
    if (obj == Py_None) {
        *out = (float)(1.0 / sqrt((double)head_dim));
        return 0;
    }
    double s = PyFloat_AsDouble(obj);
    if (s == -1.0 && PyErr_Occurred())
        return -1;
    /* s > FLT_MAX first: converting a double outside float's range is undefined behaviour. */
    if (!isfinite(s) || s <= 0.0 || s > FLT_MAX || (float)s == 0.0f) {
        PyErr_Format(PyExc_ValueError, "attention: scale must be a positive finite number, got %R",
                     obj);
        return -1;
    }
    *out = (float)s;
    return 0;
}

/* Pointers and strides for the kernels. Memory that gpuprofile will allocate (host staging, a new
 * output) is only known later; a 256-byte-aligned placeholder stands for it meanwhile. */
static void
fill_params(attn_call *c, int causal, float scale)
{
    gp_attn_params *p = &c->p;
    const gp_array *q = &c->a[0];
    memset(p, 0, sizeof *p);
    p->batch = (int)q->shape[0];
    p->heads = (int)q->shape[1];
    p->seq = (int)q->shape[2];
    p->head_dim = (int)q->shape[3];
    p->scale = scale;
    p->causal = causal;
    p->dtype = (gp_attn_dtype)q->dtype;
    const void **ptrs[4] = {&p->q, &p->k, &p->v, (const void **)&p->o};
    int64_t *strides[4] = {p->q_stride, p->k_stride, p->v_stride, p->o_stride};
    const int64_t dense[3] = {(int64_t)p->heads * p->seq * p->head_dim,
                              (int64_t)p->seq * p->head_dim, p->head_dim};
    for (int i = 0; i < 4; i++) {
        const int ours = !q->on_device || i >= c->count;
        *ptrs[i] = ours ? (const void *)(uintptr_t)256 : c->a[i].data;
        memcpy(strides[i], ours ? dense : c->a[i].strides, sizeof dense);
    }
}

/* ---- GPU work ------------------------------------------------------------------------------- */

static cudaError_t
launch(int impl, const gp_attn_params *p, void *workspace, cudaStream_t stream)
{
    return gp_attn_impls[impl].launch(p, workspace, stream);
}

static size_t
workspace_bytes(int impl, const gp_attn_params *p)
{
    return gp_attn_impls[impl].workspace_bytes ? gp_attn_impls[impl].workspace_bytes(p) : 0;
}

/* A launch error as the exception to raise. flash_wgmma's launcher says cudaErrorNotSupported
 * when the device, the build or the driver's tensor-map encoder cannot run it; that gets a
 * sentence of its own. */
static void
raise_launch_error(int impl, cudaError_t err, const char *call, int line)
{
    if (impl == IMPL_FLASH_WGMMA && err == cudaErrorNotSupported &&
        strncmp(call, "launch(", 7) == 0)
        PyErr_SetString(gp_GpuProfileError,
                        "attention: impl='flash_wgmma' needs a compute capability 9.0 (Hopper) "
                        "device, a build with sm_90a code (GPUPROFILE_CUDA_ARCHS listing 90) and "
                        "strides that the driver's TMA tensor maps accept; impl='flash_tc' runs "
                        "elsewhere");
    else
        gp_set_cuda_error(err, call, __FILE__, line);
}

static size_t
round256(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

static int
raise_alloc_error(cudaError_t err, size_t bytes, const char *what)
{
    char call[160];
    snprintf(call, sizeof call, "cudaMallocFromPoolAsync(%.3f GiB for %s)",
             (double)bytes / (1 << 30), what);
    gp_set_cuda_error(err, call, __FILE__, __LINE__);
    return -1;
}

/* Host arrays: one pool allocation holds Q, K, V, O (and the naive workspace); copies in,
 * launch, copy out and free are ordered on the stream, which is then synchronized. */
static int
run_host(attn_call *c)
{
    gp_attn_params *p = &c->p;
    const size_t bytes = (size_t)c->a[0].view.len;
    const size_t slot = round256(bytes);
    int device = gp_current_device();
    cudaMemPool_t pool;
    if (device < 0 || gp_device_pool(device, &pool) < 0)
        return -1;
    gp_attn_prefer_runnable(c->requested, p, &c->impl);
    const size_t ws = workspace_bytes(c->impl, p);
    char *base = NULL;
    cudaError_t err = cudaSuccess;
    const char *what = NULL;
#define STEP(call)                                                                                 \
    if (err == cudaSuccess && (err = (call)) != cudaSuccess)                                       \
        what = #call;
    Py_BEGIN_ALLOW_THREADS
    err = cudaMallocFromPoolAsync((void **)&base, 4 * slot + ws, pool, c->stream);
    if (err == cudaSuccess) {
        p->q = base;
        p->k = base + slot;
        p->v = base + 2 * slot;
        p->o = base + 3 * slot;
        for (int i = 0; i < 3; i++)
            STEP(cudaMemcpyAsync(base + i * slot, c->a[i].data, bytes, cudaMemcpyHostToDevice,
                                 c->stream));
        STEP(launch(c->impl, p, ws ? base + 4 * slot : NULL, c->stream));
        STEP(cudaMemcpyAsync(c->a[3].data, base + 3 * slot, bytes, cudaMemcpyDeviceToHost,
                             c->stream));
        (void)cudaFreeAsync(base, c->stream);
        STEP(cudaStreamSynchronize(c->stream));
    }
    Py_END_ALLOW_THREADS
#undef STEP
    if (base == NULL && err != cudaSuccess)
        return raise_alloc_error(err, 4 * slot + ws, "staging host arrays");
    if (err != cudaSuccess) {
        raise_launch_error(c->impl, err, what, __LINE__);
        return -1;
    }
    c->out = Py_NewRef(c->a[3].owner);
    return 0;
}

static int
check_devices(attn_call *c, int *device)
{
    for (int i = 0; i < c->count; i++)
        if (gp_array_locate(&c->a[i], arg_names[i]) < 0)
            return -1;
    *device = c->a[0].device;
    for (int i = 1; i < c->count; i++)
        if (c->a[i].device != *device)
            return fail(PyExc_ValueError,
                        "attention: q is on device %d but %s is on "
                        "device %d",
                        *device, arg_names[i], c->a[i].device);
    int stream_device;
    if (c->stream != (cudaStream_t)0 && c->stream != cudaStreamLegacy &&
        c->stream != cudaStreamPerThread &&
        cudaStreamGetDevice(c->stream, &stream_device) == cudaSuccess && stream_device != *device)
        return fail(PyExc_ValueError,
                    "attention: the stream belongs to device %d but the "
                    "arrays are on device %d",
                    stream_device, *device);
    (void)cudaGetLastError();
    return 0;
}

static int
check_out_overlap(const attn_call *c)
{
    uintptr_t olo, ohi;
    gp_array_extent(&c->a[3], &olo, &ohi);
    for (int i = 0; i < 3; i++) {
        uintptr_t lo, hi;
        gp_array_extent(&c->a[i], &lo, &hi);
        if (lo < ohi && olo < hi)
            return fail(PyExc_ValueError, "attention: out overlaps %s", arg_names[i]);
    }
    return 0;
}

/* Device arrays, on their own device: wait for their producers, run on the stream, and mark
 * a gpuprofile-owned output ready. */
static int
run_device(attn_call *c)
{
    gp_attn_params *p = &c->p;
    int device;
    gp_device_guard guard = {0, 0};
    void *ws = NULL;
    if (check_devices(c, &device) < 0 || gp_device_guard_enter(&guard, device) < 0)
        return -1;
    gp_attn_prefer_runnable(c->requested, p, &c->impl);
    if (c->count == 3) {
        const int64_t *shape = c->a[0].shape;
        c->out = gp_device_array_new_pooled(4, shape, c->a[0].dtype, device, c->stream);
        if (c->out == NULL)
            goto error;
        gp_device_array_describe(c->out, &c->a[3]);
        p->o = c->a[3].data;
    } else {
        c->out = Py_NewRef(c->a[3].owner);
    }
    if (check_out_overlap(c) < 0)
        goto error;
    for (int i = 0; i < c->count; i++)
        if (gp_array_wait_producer(&c->a[i], c->stream) < 0)
            goto error;
    const size_t ws_bytes = workspace_bytes(c->impl, p);
    if (ws_bytes > 0) {
        cudaMemPool_t pool;
        if (gp_device_pool(device, &pool) < 0)
            goto error;
        cudaError_t err = cudaMallocFromPoolAsync(&ws, ws_bytes, pool, c->stream);
        if (err != cudaSuccess) {
            raise_alloc_error(err, ws_bytes, gp_attn_impls[c->impl].workspace);
            goto error;
        }
    }
    cudaError_t err;
    Py_BEGIN_ALLOW_THREADS
    err = launch(c->impl, p, ws, c->stream);
    Py_END_ALLOW_THREADS
    if (ws != NULL)
        (void)cudaFreeAsync(ws, c->stream);
    ws = NULL;
    if (err != cudaSuccess) {
        raise_launch_error(c->impl, err, "launch(c->impl, p, ws, c->stream)", __LINE__);
        goto error;
    }
    if (gp_device_array_check(c->out) && gp_device_array_set_ready(c->out, c->stream) < 0)
        goto error;
    for (int i = 0; i < 3; i++)
        if (gp_device_array_check(c->a[i].owner) &&
            gp_device_array_note_read(c->a[i].owner, c->stream) < 0)
            goto error;
    gp_device_guard_exit(&guard);
    return 0;
error:
    if (ws != NULL)
        (void)cudaFreeAsync(ws, c->stream);
    gp_device_guard_exit(&guard);
    Py_CLEAR(c->out);
    return -1;
}

/* ---- the Python functions ------------------------------------------------------------------- */

static int
parse_arrays(attn_call *c, PyObject *const objs[4])
{
    for (int i = 0; i < 4; i++) {
        if (objs[i] == Py_None)
            break;
        if (gp_array_parse(objs[i], arg_names[i], i == 3, c->stream, &c->a[i]) < 0)
            return -1;
        c->count = i + 1;
    }
    return 0;
}

PyObject *
gp_attention_run(PyObject *const objs[4], const char *impl_name, int causal, PyObject *scale_obj,
                 PyObject *stream_obj, int schedule, int out_store)
{
    attn_call c;
    memset(&c, 0, sizeof c);
    float scale;
    int variant;
    if (gp_attn_parse_impl(impl_name, &c.requested) < 0 ||
        gp_stream_from_object(stream_obj, &c.stream) < 0 || parse_arrays(&c, objs) < 0 ||
        check_each(&c) < 0 || check_together(&c) < 0 ||
        parse_scale(scale_obj, (int)c.a[0].shape[3], &scale) < 0)
        goto done;
    fill_params(&c, causal, scale);
    if (gp_attn_choose_impl(c.requested, &c.p, &c.impl) < 0 ||
        (variant = gp_attn_wgmma_forced(schedule, out_store, &c.p)) < 0 || gp_require_device() < 0)
        goto done;
    c.p.variant = variant;
    if (c.a[0].on_device)
        (void)run_device(&c);
    else
        (void)run_host(&c);
done:
    for (int i = 0; i < 4; i++)
        gp_array_release(&c.a[i]);
    return c.out;
}

static PyObject *
attention(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"q", "k", "v", "out", "impl", "causal", "scale", "stream", NULL};
    PyObject *objs[4] = {NULL, NULL, NULL, Py_None}, *scale_obj = Py_None, *stream_obj = Py_None;
    const char *impl_name = "auto";
    int causal = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|O$spOO:attention", kwlist, &objs[0],
                                     &objs[1], &objs[2], &objs[3], &impl_name, &causal, &scale_obj,
                                     &stream_obj))
        return NULL;
    return gp_attention_run(objs, impl_name, causal, scale_obj, stream_obj, 0, 0);
}

static PyObject *
attention_release_workspace(PyObject *module, PyObject *unused)
{
    if (gp_device_pools_trim() < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef attention_methods[] = {
    {"_attention", (PyCFunction)(void (*)(void))attention, METH_VARARGS | METH_KEYWORDS,
     "_attention(q, k, v, out=None, *, impl='auto', causal=False, scale=None, stream=None)\n--\n\n"
     "See gpuprofile.kernels.attention; ATTENTION_IMPLS lists the implementations."},
    {"_attention_release_workspace", attention_release_workspace, METH_NOARGS,
     "Returns the unused memory of the attention scratch pools to the driver."},
    {NULL, NULL, 0, NULL},
};

int
gp_attention_init(PyObject *module)
{
    PyObject *impls = gp_attn_impls_as_python();
    if (impls == NULL || PyModule_AddObject(module, "ATTENTION_IMPLS", impls) < 0) {
        Py_XDECREF(impls);
        return -1;
    }
    PyObject *schedules = gp_attn_wgmma_schedules_as_python();
    if (schedules == NULL ||
        PyModule_AddObject(module, "ATTENTION_WGMMA_SCHEDULES", schedules) < 0) {
        Py_XDECREF(schedules);
        return -1;
    }
    if (gp_attention_queries_init(module) < 0)
        return -1;
    return PyModule_AddFunctions(module, attention_methods);
}
