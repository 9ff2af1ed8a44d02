/* BenchRunner: times one callable on one stream, a batch of iterations per call.
 *
 * Python equivalent of one cold batch (minus the speed and the fault handling):
 *
 *     gate(stream)                      # holds the stream while the host enqueues
 *     for i in range(n):
 *         flush_l2(stream)              # outside the timed interval
 *         start[i].record(stream); fn(*args, **kwargs); stop[i].record(stream)
 *     release_gate(); stop[n - 1].synchronize()
 *     return [start[i].elapsed(stop[i]) for i in range(n)]
 *
 * hot: no flush; one event between iterations, samples are consecutive differences.
 * graph: fn captured once into a CUDA graph (capture()); iterations replay the graph.
 *
 * Why a gate: without it the GPU runs each iteration as soon as it is enqueued, so a start event
 * can fire while the host is still inside fn and the host's launch latency lands in the sample.
 * Behind the gate the whole batch is queued before the GPU starts, and runs back to back. The gate
 * times out (kernels/harness/bench_kernels.cu), so a host that blocks while it holds the stream (fn
 * synchronizes, a lazy module load, a full launch queue) costs one timeout, never a hang; the
 * batch then reports GP_GATE_TIMED_OUT and Python discards it.
 *
 * Faults: when fn raises (or Ctrl-C arrives) mid-batch, the gate is released and the stream
 * drained before the exception propagates, so nothing stays half-enqueued behind a closed gate;
 * `failed_call` says which call raised. */
#include "bench.h"
#include "harness/bench_kernels.h"
#include "devbuf.h"
#include "host_loop.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/events.h"
#include "core/streams.h"
#include "core/util.h"

#include <stdlib.h>
#include <structmember.h>

enum { MODE_COLD, MODE_HOT, MODE_GRAPH };

typedef struct {
    PyObject_HEAD
    PyObject *fn, *args, *kwargs, *setup, *stream_obj;
    cudaStream_t stream;
    int device, mode, flush, closed;
    int busy; /* inside batch, first_call or capture: fn may call back into the runner */
    gp_read_params flush_params;
    volatile uint32_t *gate; /* host-mapped: gate[0] release flag, gate[1] the gate's exit state */
    uint32_t *gate_dev;
    cudaEvent_t *events;
    int n_events;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    long long calls;       /* fn calls made, the capture call included */
    long long failed_call; /* index of the call that raised, -1 if none */
} gp_bench;

static int
ensure_events(gp_bench *self, int need)
{
    if (need <= self->n_events)
        return 0;
    cudaEvent_t *ev = realloc(self->events, (size_t)need * sizeof *ev);
    if (ev == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->events = ev;
    while (self->n_events < need) {
        GP_CUDA_CHECK(cudaEventCreateWithFlags(&self->events[self->n_events], cudaEventDefault));
        self->n_events++;
    }
    return 0;
error:
    return -1;
}

/* Waits for the stream, GIL released; the exception in flight (if any) is kept. */
static void
drain(gp_bench *self)
{
    gp_exc_state saved;
    gp_exc_save(&saved);
    Py_BEGIN_ALLOW_THREADS(void)
    cudaStreamSynchronize(self->stream);
    Py_END_ALLOW_THREADS(void)
    cudaGetLastError();
    gp_exc_restore(&saved);
}

static int
open_gate(gp_bench *self, uint64_t timeout_ns)
{
    self->gate[0] = 0;
    self->gate[1] = GP_GATE_WAITING;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    gp_gate_params p = {
        .release = self->gate_dev, .state = self->gate_dev + 1, .timeout_ns = timeout_ns};
    GP_CUDA_CHECK(gp_launch_gate(p, self->stream));
    return 0;
error:
    return -1;
}

static void
release_gate(gp_bench *self)
{
    __atomic_store_n((uint32_t *)&self->gate[0], 1u, __ATOMIC_SEQ_CST);
}

/* Calls fn (or replays the graph) once with the given arguments. */
static int
call_fn(gp_bench *self, PyObject *args, PyObject *kwargs)
{
    if (self->mode == MODE_GRAPH) {
        GP_CUDA_CHECK(cudaGraphLaunch(self->exec, self->stream));
        return 0;
    }
    PyObject *r = PyObject_Call(self->fn, args, kwargs);
    self->calls++;
    if (r == NULL) {
        self->failed_call = self->calls - 1;
        return -1;
    }
    Py_DECREF(r);
    return 0;
error:
    return -1;
}

static int
call_setup(gp_bench *self, PyObject **args, PyObject **kwargs)
{
    return gp_bench_setup_arguments(self->setup, self->args, self->kwargs, args, kwargs);
}

/* Waits for the whole device, GIL released. */
static int
sync_device(void)
{
    cudaError_t err;
    Py_BEGIN_ALLOW_THREADS
    err = cudaDeviceSynchronize();
    Py_END_ALLOW_THREADS
    GP_CUDA_CHECK(err);
    return 0;
error:
    return -1;
}

/* One timed iteration: [flush] [setup] start event, fn, stop event. Hot mode records only the
 * stop event: the previous iteration's stop is this one's start. With `sync_each` (fn's work is
 * on streams the flush and the gate cannot order), the device is synchronized after the flush
 * and after fn, so neither overlaps fn's work. */
static int
enqueue_iteration(gp_bench *self, int i, int sync_each)
{
    PyObject *args = NULL, *kwargs = NULL;
    int rc = -1;
    if (self->flush)
        GP_CUDA_CHECK(gp_launch_l2_flush(self->flush_params, self->stream));
    if (sync_each && sync_device() < 0)
        goto error;
    if (call_setup(self, &args, &kwargs) < 0)
        goto error;
    const int hot = self->mode == MODE_HOT;
    if (!hot)
        GP_CUDA_CHECK(cudaEventRecord(self->events[2 * i], self->stream));
    if (call_fn(self, args, kwargs) < 0)
        goto error;
    GP_CUDA_CHECK(cudaEventRecord(self->events[hot ? i + 1 : 2 * i + 1], self->stream));
    if (sync_each && sync_device() < 0)
        goto error;
    rc = 0;
error:
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    return rc;
}

static PyObject *
read_samples(gp_bench *self, int n)
{
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n * (Py_ssize_t)sizeof(double));
    if (out == NULL)
        return NULL;
    double *ms = (double *)PyBytes_AS_STRING(out);
    const int hot = self->mode == MODE_HOT;
    for (int i = 0; i < n; i++) {
        float v = 0.0f;
        cudaEvent_t a = self->events[hot ? i : 2 * i], b = self->events[hot ? i + 1 : 2 * i + 1];
        GP_CUDA_CHECK(cudaEventElapsedTime(&v, a, b));
        ms[i] = v;
    }
    return out;
error:
    Py_DECREF(out);
    return NULL;
}

static int
check_usable(gp_bench *self)
{
    if (self->closed) {
        PyErr_SetString(gp_GpuProfileError, "BenchRunner is closed");
        return -1;
    }
    int device = gp_current_device();
    if (device < 0)
        return -1;
    if (device != self->device) {
        PyErr_Format(gp_GpuProfileError,
                     "the current device changed from %d to %d during the "
                     "benchmark; fn must not switch devices",
                     self->device, device);
        return -1;
    }
    return 0;
}

/* batch(n, gate_timeout_ns, sync_each=False) -> (samples: bytes of n float64 ms, host_ns,
 * gate_state). gate_timeout_ns 0 runs without the gate (gate_state 0); sync_each synchronizes
 * the device around each call of fn (and needs gate_timeout_ns 0). */
static PyObject *
bench_batch_run(PyObject *op, PyObject *args)
{
    gp_bench *self = (gp_bench *)op;
    int n, sync_each = 0;
    unsigned long long timeout_ns;
    if (!PyArg_ParseTuple(args, "iK|p:batch", &n, &timeout_ns, &sync_each))
        return NULL;
    if (sync_each && timeout_ns > 0)
        return PyErr_Format(PyExc_ValueError, "batch: sync_each runs without the gate");
    if (n < 1 || n > GP_BENCH_MAX_BATCH)
        return PyErr_Format(PyExc_ValueError, "batch size must be in [1, %d], got %d",
                            GP_BENCH_MAX_BATCH, n);
    if (check_usable(self) < 0)
        return NULL;
    if (self->mode == MODE_GRAPH && self->exec == NULL)
        return PyErr_Format(gp_GpuProfileError, "graph mode: capture() first");
    const int hot = self->mode == MODE_HOT;
    if (ensure_events(self, hot ? n + 1 : 2 * n) < 0)
        return NULL;
    const int gated = timeout_ns > 0;
    if (gated && open_gate(self, timeout_ns) < 0)
        return NULL;
    int64_t t0 = gp_now_ns();
    if (hot)
        GP_CUDA_CHECK(cudaEventRecord(self->events[0], self->stream));
    for (int i = 0; i < n; i++)
        if (PyErr_CheckSignals() < 0 || enqueue_iteration(self, i, sync_each) < 0)
            goto error;
    int64_t host_ns = gp_now_ns() - t0;
    release_gate(self);
    cudaEvent_t last = self->events[hot ? n : 2 * n - 1];
    cudaError_t err;
    Py_BEGIN_ALLOW_THREADS
    err = cudaEventSynchronize(last);
    Py_END_ALLOW_THREADS
    GP_CUDA_CHECK(err);
    PyObject *samples = read_samples(self, n);
    if (samples == NULL)
        return NULL;
    unsigned int state = gated ? self->gate[1] : 0;
    return Py_BuildValue("(NLI)", samples, (long long)host_ns, state);
error:
    release_gate(self);
    drain(self);
    return NULL;
}

/* first_call() -> host ns of one call (after setup(), if any) plus a device-wide synchronize,
 * without the gate: the first call may JIT-compile, load modules lazily or grow allocators, all of
 * which can block. */
static PyObject *
bench_first_call_run(PyObject *op, PyObject *unused)
{
    gp_bench *self = (gp_bench *)op;
    PyObject *args = NULL, *kwargs = NULL;
    if (check_usable(self) < 0 || call_setup(self, &args, &kwargs) < 0)
        goto error;
    int64_t t0 = gp_now_ns();
    PyObject *r = PyObject_Call(self->fn, args, kwargs);
    self->calls++;
    Py_CLEAR(args);
    Py_CLEAR(kwargs);
    if (r == NULL) {
        self->failed_call = self->calls - 1;
        drain(self);
        return NULL;
    }
    Py_DECREF(r);
    cudaError_t err;
    Py_BEGIN_ALLOW_THREADS
    err = cudaDeviceSynchronize();
    Py_END_ALLOW_THREADS
    GP_CUDA_CHECK(err);
    return PyLong_FromLongLong(gp_now_ns() - t0);
error:
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    return NULL;
}

#define GP_CAPTURE_HINT                                                                            \
    "capturing fn into a CUDA graph (mode='graph'): fn must enqueue all its GPU work on the "      \
    "benchmark's `stream` and must not synchronize, allocate with cudaMalloc or use the legacy "   \
    "default stream while it is captured"

/* capture() -> number of graph nodes: calls fn once under stream capture and instantiates. */
static PyObject *
bench_capture_run(PyObject *op, PyObject *unused)
{
    gp_bench *self = (gp_bench *)op;
    cudaGraph_t graph = NULL;
    size_t nodes = 0;
    if (check_usable(self) < 0)
        return NULL;
    if (self->mode != MODE_GRAPH || self->exec != NULL)
        return PyErr_Format(gp_GpuProfileError, "capture() is for graph mode, once");
    GP_CUDA_CHECK(cudaStreamBeginCapture(self->stream, cudaStreamCaptureModeGlobal));
    PyObject *r = PyObject_Call(self->fn, self->args, self->kwargs);
    self->calls++;
    cudaError_t end = cudaStreamEndCapture(self->stream, &graph);
    (void)cudaGetLastError();
    if (r == NULL) {
        self->failed_call = self->calls - 1;
        if (graph != NULL)
            (void)cudaGraphDestroy(graph);
        return NULL;
    }
    Py_DECREF(r);
    if (end != cudaSuccess)
        return gp_set_cuda_error(end, "cudaStreamEndCapture while " GP_CAPTURE_HINT, __FILE__,
                                 __LINE__);
    self->graph = graph;
    GP_CUDA_CHECK(cudaGraphGetNodes(graph, NULL, &nodes));
    if (nodes == 0)
        return PyErr_Format(gp_GpuProfileError,
                            "graph mode: fn enqueued no GPU work on the "
                            "benchmark's stream while it was captured; launch its work on `stream` "
                            "(torch: `with torch.cuda.stream(s):`)");
    GP_CUDA_CHECK(cudaGraphInstantiate(&self->exec, graph, 0));
    GP_CUDA_CHECK(cudaGraphUpload(self->exec, self->stream));
    return PyLong_FromSize_t(nodes);
error:
    return NULL;
}

/* fn and setup are Python and may reach the runner (gc.get_referrers finds it): a nested batch
 * would reuse the events being recorded, and close() would free them and the gate under the
 * outer call. So the entry points that call them, and close(), refuse to run inside one. */
static int
refuse_busy(gp_bench *self, const char *what)
{
    if (!self->busy)
        return 0;
    PyErr_Format(gp_GpuProfileError,
                 "BenchRunner.%s() called from inside fn or setup of the same runner", what);
    return -1;
}

#define GP_BENCH_GUARDED(name, what)                                                               \
    static PyObject *name(PyObject *op, PyObject *args)                                            \
    {                                                                                              \
        gp_bench *self = (gp_bench *)op;                                                           \
        if (refuse_busy(self, what) < 0)                                                           \
            return NULL;                                                                           \
        self->busy = 1;                                                                            \
        PyObject *r = name##_run(op, args);                                                        \
        self->busy = 0;                                                                            \
        return r;                                                                                  \
    }
GP_BENCH_GUARDED(bench_batch, "batch")
GP_BENCH_GUARDED(bench_first_call, "first_call")
GP_BENCH_GUARDED(bench_capture, "capture")

static void
release_resources(gp_bench *self)
{
    if (self->closed)
        return;
    self->closed = 1;
    if (self->exec != NULL)
        (void)cudaGraphExecDestroy(self->exec);
    if (self->graph != NULL)
        (void)cudaGraphDestroy(self->graph);
    for (int i = 0; i < self->n_events; i++)
        (void)cudaEventDestroy(self->events[i]);
    free(self->events);
    if (self->gate != NULL)
        (void)cudaFreeHost((void *)self->gate);
    self->exec = NULL;
    self->graph = NULL;
    self->events = NULL;
    self->n_events = 0;
    self->gate = NULL;
    (void)cudaGetLastError();
}

static PyObject *
bench_close(PyObject *op, PyObject *unused)
{
    if (refuse_busy((gp_bench *)op, "close") < 0)
        return NULL;
    release_resources((gp_bench *)op);
    Py_RETURN_NONE;
}

/* The gate's mapped flag, then a launch of each kernel a batch uses, so lazy module loading (which
 * waits for the device) never happens behind a closed gate (nvbench#136, #240). */
static int
prepare_device_state(gp_bench *self)
{
    cudaError_t err;
    GP_CUDA_CHECK(cudaHostAlloc((void **)&self->gate, 64, cudaHostAllocMapped));
    GP_CUDA_CHECK(cudaHostGetDevicePointer((void **)&self->gate_dev, (void *)self->gate, 0));
    if (self->flush && gp_l2_flush_buffer(self->device, &self->flush_params) < 0)
        return -1;
    self->gate[0] = 1;
    gp_gate_params p = {.release = self->gate_dev, .state = self->gate_dev + 1, .timeout_ns = 1000};
    GP_CUDA_CHECK(gp_launch_gate(p, self->stream));
    if (self->flush) {
        gp_read_params small = self->flush_params;
        small.bytes = 16;
        GP_CUDA_CHECK(gp_launch_l2_flush(small, self->stream));
    }
    Py_BEGIN_ALLOW_THREADS
    err = cudaStreamSynchronize(self->stream);
    Py_END_ALLOW_THREADS
    GP_CUDA_CHECK(err);
    return 0;
error:
    return -1;
}

static int
parse_mode(const char *mode)
{
    if (strcmp(mode, "cold") == 0)
        return MODE_COLD;
    if (strcmp(mode, "hot") == 0)
        return MODE_HOT;
    if (strcmp(mode, "graph") == 0)
        return MODE_GRAPH;
    PyErr_Format(PyExc_ValueError, "mode must be 'cold', 'hot' or 'graph', got %.50s", mode);
    return -1;
}

/* The stream's device must be current: our kernels and events go to the current device. */
static int
stream_device(cudaStream_t stream, int *out)
{
    int current = gp_current_device();
    if (current < 0)
        return -1;
    if (stream != 0) {
        int device = -1;
        GP_CUDA_CHECK(cudaStreamGetDevice(stream, &device));
        if (device != current) {
            PyErr_Format(PyExc_ValueError,
                         "stream belongs to device %d but the current device "
                         "is %d; make the stream's device current first",
                         device, current);
            return -1;
        }
    }
    *out = current;
    return 0;
error:
    return -1;
}

static PyObject *
bench_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"fn", "args", "kwargs", "mode", "stream", "flush", "setup", NULL};
    PyObject *fn, *fargs, *fkwargs = Py_None, *stream_obj = Py_None, *setup = Py_None;
    const char *mode_s = "cold";
    int flush = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!|OsOpO:BenchRunner", kwlist, &fn,
                                     &PyTuple_Type, &fargs, &fkwargs, &mode_s, &stream_obj, &flush,
                                     &setup))
        return NULL;
    if (!PyCallable_Check(fn))
        return PyErr_Format(PyExc_TypeError, "fn must be callable, got %.100s",
                            Py_TYPE(fn)->tp_name);
    if (fkwargs != Py_None && !PyDict_Check(fkwargs))
        return PyErr_Format(PyExc_TypeError, "kwargs must be a dict or None");
    if (setup != Py_None && !PyCallable_Check(setup))
        return PyErr_Format(PyExc_TypeError, "setup must be callable or None");
    int mode = parse_mode(mode_s);
    cudaStream_t stream;
    int device;
    if (mode < 0 || gp_stream_from_object(stream_obj, &stream) < 0 || gp_require_device() < 0 ||
        stream_device(stream, &device) < 0)
        return NULL;
    if (mode == MODE_GRAPH && stream == 0)
        return PyErr_Format(PyExc_ValueError, "graph mode needs a non-default stream: CUDA cannot "
                                              "capture the legacy default stream");
    if (mode == MODE_HOT && (flush || setup != Py_None))
        return PyErr_Format(PyExc_ValueError, "hot mode runs iterations back to back: no L2 flush "
                                              "and no setup between them");
    gp_bench *self = (gp_bench *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->fn = Py_NewRef(fn);
    self->args = Py_NewRef(fargs);
    self->kwargs = fkwargs == Py_None ? NULL : Py_NewRef(fkwargs);
    self->setup = setup == Py_None ? NULL : Py_NewRef(setup);
    self->stream_obj = Py_NewRef(stream_obj);
    self->stream = stream;
    self->device = device;
    self->mode = mode;
    self->flush = flush;
    self->failed_call = -1;
    if (prepare_device_state(self) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int
bench_traverse(PyObject *op, visitproc visit, void *arg)
{
    gp_bench *self = (gp_bench *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(self->fn);
    Py_VISIT(self->args);
    Py_VISIT(self->kwargs);
    Py_VISIT(self->setup);
    Py_VISIT(self->stream_obj);
    return 0;
}

static int
bench_clear(PyObject *op)
{
    gp_bench *self = (gp_bench *)op;
    Py_CLEAR(self->fn);
    Py_CLEAR(self->args);
    Py_CLEAR(self->kwargs);
    Py_CLEAR(self->setup);
    Py_CLEAR(self->stream_obj);
    return 0;
}

static void
bench_dealloc(PyObject *op)
{
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    gp_exc_state saved;
    gp_exc_save(&saved);
    release_resources((gp_bench *)op);
    gp_exc_restore(&saved);
    bench_clear(op);
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyObject *
bench_flush_bytes(PyObject *op, void *closure)
{
    gp_bench *self = (gp_bench *)op;
    return PyLong_FromSize_t(self->flush ? self->flush_params.bytes : 0);
}

/* ---- type and module functions -------------------------------------------------------------- */

static PyMethodDef bench_methods[] = {
    {"batch", bench_batch, METH_VARARGS,
     "batch(n, gate_timeout_ns) -> (samples, host_ns, gate_state)\n--\n\nTimes n iterations; "
     "samples are n float64 ms as bytes. gate_timeout_ns 0: no gate."},
    {"first_call", bench_first_call, METH_NOARGS,
     "first_call() -> ns\n--\n\nOne ungated call plus cudaDeviceSynchronize; host ns."},
    {"capture", bench_capture, METH_NOARGS,
     "capture() -> nodes\n--\n\nGraph mode: capture fn once on the stream and instantiate."},
    {"close", bench_close, METH_NOARGS, "close()\n--\n\nFree the events, graph and gate memory."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef bench_members[] = {
    {"calls", T_LONGLONG, offsetof(gp_bench, calls), READONLY, "fn calls made so far."},
    {"failed_call", T_LONGLONG, offsetof(gp_bench, failed_call), READONLY,
     "Index of the fn call that raised, or -1."},
    {"device", T_INT, offsetof(gp_bench, device), READONLY, "The device timed."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef bench_getset[] = {
    {"flush_bytes", bench_flush_bytes, NULL, "Bytes read to flush L2 (0: no flush).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(bench_doc,
             "BenchRunner(fn, args, kwargs=None, mode='cold', stream=None, flush=True, "
             "setup=None)\n--\n\nThe timing loop behind gpuprofile.benchmark (private).");

static PyType_Slot bench_slots[] = {
    {Py_tp_new, bench_new},       {Py_tp_dealloc, bench_dealloc}, {Py_tp_traverse, bench_traverse},
    {Py_tp_clear, bench_clear},   {Py_tp_methods, bench_methods}, {Py_tp_members, bench_members},
    {Py_tp_getset, bench_getset}, {Py_tp_doc, (void *)bench_doc}, {0, NULL},
};

static PyType_Spec bench_spec = {
    .name = "gpuprofile._C.BenchRunner",
    .basicsize = sizeof(gp_bench),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = bench_slots,
};

int
gp_bench_init(PyObject *module)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &bench_spec, NULL);
    if (type == NULL)
        return -1;
    int rc = PyModule_AddType(module, (PyTypeObject *)type);
    Py_DECREF(type);
    return rc;
}
