/* _C.Workload.
 *
 *     w = Workload("copy", bytes=1 << 30)     # allocates on the current device
 *     w.info        # {"kind", "blocks", "threads", "bytes_read", "bytes_written", "ffma", ...}
 *     w.launch(stream=None)                   # one asynchronous launch
 *     w.time(repeats=10)                      # [ms per launch], CUDA events, waits for the GPU
 *     w.close()                               # frees (also on dealloc)
 *
 * Defaults fill the GPU: blocks = 8 per SM (copy, ffma, mma) or 1 per SM (chase). */
#include "workload.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/streams.h"
#include "harness/workloads.h"

#include <string.h>
#include <structmember.h>

enum { W_COPY, W_FFMA, W_MMA, W_CHASE };
static const char *const kind_names[] = {"copy", "ffma", "mma", "chase"};

typedef struct {
    PyObject_HEAD
    int kind;
    int device;
    void *a, *b; /* device buffers */
    gp_copy_params copy;
    gp_ffma_params ffma;
    gp_mma_params mma;
    gp_chase_params chase;
    PyObject *info;
} gp_workload;

static PyTypeObject *WorkloadType;

static int
parse_kind(const char *s)
{
    for (int k = 0; k < 4; k++)
        if (strcmp(s, kind_names[k]) == 0)
            return k;
    PyErr_Format(PyExc_ValueError, "unknown workload %s: use copy, ffma, mma or chase", s);
    return -1;
}

static int
alloc(void **p, size_t bytes)
{
    GP_CUDA_CHECK(cudaMalloc(p, bytes));
    return 0;
error:
    return -1;
}

/* a * b * c into *out, or -1 with ValueError: the counts in info (and the flops computed from
 * them) must be exact, and huge blocks times iterations can pass 64 bits. */
static int
count_of(unsigned long long a, unsigned long long b, unsigned long long c, const char *what,
         unsigned long long *out)
{
    if (__builtin_mul_overflow(a, b, out) || __builtin_mul_overflow(*out, c, out)) {
        PyErr_Format(PyExc_ValueError,
                     "%s: blocks * threads * iterations is too large to count in 64 bits", what);
        return -1;
    }
    return 0;
}

/* Sets up buffers and params; fills self->info. */
static int
setup(gp_workload *self, long long bytes, int blocks, int threads, int iterations, int hops)
{
    unsigned long long nthreads = (unsigned long long)blocks * (unsigned long long)threads;
    switch (self->kind) {
    case W_COPY:
        if (bytes <= 0 || bytes % 16 != 0) {
            PyErr_Format(PyExc_ValueError,
                         "copy: bytes must be a positive multiple of 16, got %lld", bytes);
            return -1;
        }
        if (alloc(&self->a, (size_t)bytes) < 0 || alloc(&self->b, (size_t)bytes) < 0)
            return -1;
        GP_CUDA_CHECK(cudaMemset(self->a, 0, (size_t)bytes));
        GP_CUDA_CHECK(cudaMemset(self->b, 0, (size_t)bytes));
        self->copy = (gp_copy_params){self->a, self->b, (size_t)bytes / 16, blocks, threads};
        self->info =
            Py_BuildValue("{s:s,s:i,s:i,s:L,s:L,s:L}", "kind", "copy", "blocks", blocks, "threads",
                          threads, "bytes", bytes, "bytes_read", bytes, "bytes_written", bytes);
        break;
    case W_FFMA: {
        /* The chains are summed at the end: CHAINS - 1 FADDs per thread. */
        unsigned long long ffma, fadd, flops;
        if (count_of(nthreads, GP_FFMA_CHAINS, (unsigned long long)iterations, "ffma", &ffma) < 0 ||
            count_of(nthreads, GP_FFMA_CHAINS - 1, 1, "ffma", &fadd) < 0 ||
            count_of(ffma, 2, 1, "ffma", &flops) < 0)
            return -1;
        if (__builtin_add_overflow(flops, fadd, &flops)) {
            PyErr_SetString(PyExc_ValueError, "ffma: the flop count does not fit 64 bits");
            return -1;
        }
        if (alloc(&self->a, nthreads * sizeof(float)) < 0)
            return -1;
        self->ffma = (gp_ffma_params){self->a, 0.999f, 0.001f, iterations, blocks, threads};
        self->info = Py_BuildValue("{s:s,s:i,s:i,s:i,s:K,s:K,s:K}", "kind", "ffma", "blocks",
                                   blocks, "threads", threads, "iterations", iterations, "ffma",
                                   ffma, "fadd", fadd, "flops", flops);
        break;
    }
    case W_MMA: {
        if (threads % 32 != 0) {
            PyErr_SetString(PyExc_ValueError, "mma: threads must be a multiple of 32");
            return -1;
        }
        const unsigned long long warps = nthreads / 32, its = (unsigned long long)iterations;
        unsigned long long mma, flops;
        if (count_of(warps, GP_MMA_CHAINS, its, "mma", &mma) < 0 ||
            count_of(mma, GP_MMA_FLOPS, 1, "mma", &flops) < 0)
            return -1;
        if (alloc(&self->a, nthreads * sizeof(float)) < 0)
            return -1;
        self->mma = (gp_mma_params){self->a, iterations, blocks, threads};
        self->info =
            Py_BuildValue("{s:s,s:i,s:i,s:i,s:K,s:K}", "kind", "mma", "blocks", blocks, "threads",
                          threads, "iterations", iterations, "mma", mma, "flops", flops);
        break;
    }
    default: { /* W_CHASE */
        unsigned long long n = (unsigned long long)bytes / 4;
        if (bytes <= 0 || (n & (n - 1)) != 0 || n > (1ULL << 32)) {
            PyErr_Format(PyExc_ValueError,
                         "chase: bytes must be 4 * a power of two (at most 16 "
                         "GiB), got %lld",
                         bytes);
            return -1;
        }
        unsigned long long loads;
        if (count_of(nthreads, (unsigned long long)hops, 1, "chase", &loads) < 0)
            return -1;
        if (alloc(&self->a, (size_t)bytes) < 0 || alloc(&self->b, nthreads * sizeof(uint32_t)) < 0)
            return -1;
        GP_CUDA_CHECK(gp_launch_chase_init(self->a, (size_t)n, 0));
        GP_CUDA_CHECK(cudaDeviceSynchronize());
        self->chase = (gp_chase_params){self->a, self->b, (size_t)n, hops, blocks, threads};
        self->info =
            Py_BuildValue("{s:s,s:i,s:i,s:L,s:i,s:K}", "kind", "chase", "blocks", blocks, "threads",
                          threads, "bytes", bytes, "hops", hops, "loads", loads);
    }
    }
    return self->info == NULL ? -1 : 0;
error:
    return -1;
}

static cudaError_t
launch_once(gp_workload *self, cudaStream_t stream)
{
    switch (self->kind) {
    case W_COPY:
        return gp_launch_copy(self->copy, stream);
    case W_FFMA:
        return gp_launch_ffma(self->ffma, stream);
    case W_MMA:
        return gp_launch_mma(self->mma, stream);
    default:
        return gp_launch_chase(self->chase, stream);
    }
}

static void
free_buffers(gp_workload *self)
{
    if (self->a != NULL)
        (void)cudaFree(self->a);
    if (self->b != NULL)
        (void)cudaFree(self->b);
    self->a = self->b = NULL;
    (void)cudaGetLastError();
}

static PyObject *
workload_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"kind", "bytes", "blocks", "threads", "iterations", "hops", NULL};
    const char *kind_s;
    long long bytes = -1;
    int blocks = 0, threads = 0, iterations = 0, hops = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|$Liiii:Workload", kwlist, &kind_s, &bytes,
                                     &blocks, &threads, &iterations, &hops))
        return NULL;
    int kind = parse_kind(kind_s);
    if (kind < 0 || gp_require_device() < 0)
        return NULL;
    if (blocks < 0 || threads < 0 || threads > 1024 || iterations < 0 || hops < 0)
        return PyErr_Format(PyExc_ValueError, "blocks, iterations and hops must be >= 0 and "
                                              "threads in [0, 1024] (0: default)");
    int device, sms;
    GP_CUDA_CHECK(cudaGetDevice(&device));
    GP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    static const int default_threads[] = {256, 256, 128, 128};
    blocks = blocks ? blocks : (kind == W_CHASE ? sms : 8 * sms);
    threads = threads ? threads : default_threads[kind];
    iterations = iterations ? iterations : (kind == W_MMA ? 4096 : 8192);
    hops = hops ? hops : 2048;
    if (bytes < 0)
        bytes = kind == W_CHASE ? (256LL << 20) : (1LL << 30);
    gp_workload *self = PyObject_New(gp_workload, type);
    if (self == NULL)
        return NULL;
    memset((char *)self + sizeof(PyObject), 0, sizeof *self - sizeof(PyObject));
    self->kind = kind;
    self->device = device;
    PyObject *dev = NULL;
    if (setup(self, bytes, blocks, threads, iterations, hops) < 0 ||
        (dev = PyLong_FromLong(device)) == NULL ||
        PyDict_SetItemString(self->info, "device", dev) < 0) {
        Py_XDECREF(dev);
        Py_DECREF(self);
        return NULL;
    }
    Py_DECREF(dev);
    return (PyObject *)self;
error:
    return NULL;
}

/* Makes the Workload's device current for one call; gp_device_guard_exit puts the caller's back. */
static int
open_on_device(gp_workload *self, gp_device_guard *guard)
{
    guard->switched = 0;
    if (self->a == NULL) {
        PyErr_SetString(PyExc_ValueError, "the Workload is closed");
        return -1;
    }
    return gp_device_guard_enter(guard, self->device);
}

static PyObject *
workload_launch(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"stream", NULL};
    PyObject *stream_obj = Py_None;
    cudaStream_t stream;
    gp_workload *self = (gp_workload *)op;
    gp_device_guard guard;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:launch", kwlist, &stream_obj) ||
        gp_stream_from_object(stream_obj, &stream) < 0 || open_on_device(self, &guard) < 0)
        return NULL;
    GP_CUDA_CHECK(launch_once(self, stream));
    gp_device_guard_exit(&guard);
    Py_RETURN_NONE;
error:
    gp_device_guard_exit(&guard);
    return NULL;
}

/* time(repeats=10) -> [ms]: each launch between two events on the default stream. */
static PyObject *
workload_time(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"repeats", NULL};
    int repeats = 10;
    gp_workload *self = (gp_workload *)op;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|i:time", kwlist, &repeats))
        return NULL;
    if (repeats < 1 || repeats > 100000)
        return PyErr_Format(PyExc_ValueError, "repeats must be in [1, 100000], got %d", repeats);
    gp_device_guard guard;
    if (open_on_device(self, &guard) < 0)
        return NULL;
    PyObject *out = PyList_New(repeats);
    cudaEvent_t ev[2] = {NULL, NULL};
    if (out == NULL) {
        gp_device_guard_exit(&guard);
        return NULL;
    }
    GP_CUDA_CHECK(cudaEventCreate(&ev[0]));
    GP_CUDA_CHECK(cudaEventCreate(&ev[1]));
    for (int r = 0; r < repeats; r++) {
        cudaError_t err;
        float ms = 0.0f;
        GP_CUDA_CHECK(cudaEventRecord(ev[0], 0));
        GP_CUDA_CHECK(launch_once(self, 0));
        GP_CUDA_CHECK(cudaEventRecord(ev[1], 0));
        Py_BEGIN_ALLOW_THREADS
        err = cudaEventSynchronize(ev[1]);
        Py_END_ALLOW_THREADS
        GP_CUDA_CHECK(err);
        GP_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
        PyList_SET_ITEM(out, r, PyFloat_FromDouble(ms));
    }
    (void)cudaEventDestroy(ev[0]);
    (void)cudaEventDestroy(ev[1]);
    gp_device_guard_exit(&guard);
    return out;
error:
    if (ev[0] != NULL)
        (void)cudaEventDestroy(ev[0]);
    if (ev[1] != NULL)
        (void)cudaEventDestroy(ev[1]);
    gp_device_guard_exit(&guard);
    Py_DECREF(out);
    return NULL;
}

static PyObject *
workload_close(PyObject *op, PyObject *unused)
{
    free_buffers((gp_workload *)op);
    Py_RETURN_NONE;
}

static void
workload_dealloc(PyObject *op)
{
    gp_workload *self = (gp_workload *)op;
    PyTypeObject *tp = Py_TYPE(op);
    free_buffers(self);
    Py_XDECREF(self->info);
    PyObject_Free(op);
    Py_DECREF(tp);
}

static PyObject *
workload_repr(PyObject *op)
{
    gp_workload *self = (gp_workload *)op;
    return PyUnicode_FromFormat("Workload(%R)", self->info ? self->info : Py_None);
}

static PyMethodDef workload_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))workload_launch, METH_VARARGS | METH_KEYWORDS,
     "launch(stream=None): one asynchronous launch."},
    {"time", (PyCFunction)(void (*)(void))workload_time, METH_VARARGS | METH_KEYWORDS,
     "time(repeats=10) -> [ms per launch] (CUDA events; waits for the GPU)."},
    {"close", workload_close, METH_NOARGS, "Free the device buffers."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef workload_members[] = {
    {"info", T_OBJECT, offsetof(gp_workload, info), READONLY, "Geometry and exact counts."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot workload_slots[] = {
    {Py_tp_new, workload_new},
    {Py_tp_dealloc, workload_dealloc},
    {Py_tp_repr, workload_repr},
    {Py_tp_methods, workload_methods},
    {Py_tp_members, workload_members},
    {Py_tp_doc, (void *)"Workload(kind, *, bytes, blocks, threads, iterations, hops)\n--\n\n"
                        "A calibration workload with known counts (copy, ffma, mma, chase)."},
    {0, NULL},
};

static PyType_Spec workload_spec = {
    .name = "gpuprofile.Workload",
    .basicsize = sizeof(gp_workload),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = workload_slots,
};

int
gp_workload_init(PyObject *module)
{
    WorkloadType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &workload_spec, NULL);
    if (WorkloadType == NULL)
        return -1;
    return PyModule_AddType(module, WorkloadType);
}
