/* Regions: the Region type, per-thread region stacks, the record store and lazy resolution.
 *
 * Python equivalent (minus the speed):
 *
 *     class region:
 *         def __init__(self, name, stream=None, nvtx=True): ...
 *         def __enter__(self):  # start event on stream, NVTX push, push frame
 *         def __exit__(self, *exc):  # stop event, NVTX pop, pop frame; never syncs
 *         def __call__(self, fn):  # decorator
 *
 * Concurrency: every entry point holds the GIL, which serializes the store. Code that waits for
 * the GPU releases the GIL and therefore keeps no pointer into the store across the wait (the
 * store may grow or be reset meanwhile); `generation` tells it whether a reset happened. */
#include "regions.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/events.h"
#include "core/streams.h"
#include "core/util.h"

#include <math.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdlib.h>
#include <structmember.h>

/* Events per device the pool may hold before regions wait for the oldest pending one. */
#define GP_EVENT_SOFT_LIMIT 65536
#define GP_EVENT_GROW 128

enum { REC_OPEN, REC_PENDING, REC_DONE, REC_HOST };
enum { REC_RAISED = 1, REC_FAILED = 2, REC_MEMORY = 4 };

typedef struct {
    PyObject *name; /* strong reference */
    int64_t host_start_ns, host_end_ns;
    double gpu_ms; /* NaN until resolved */
    int64_t parent;
    uint64_t thread;
    cudaEvent_t ev[2];
    int32_t depth;
    int16_t device; /* -1: host clock */
    uint8_t state;
    uint8_t flags;
} gp_record;

/* The layout records() hands to Python; gpuprofile/_records.py mirrors it. */
typedef struct {
    int64_t host_start_ns, host_end_ns;
    double gpu_ms;
    int64_t parent;
    uint64_t thread;
    int32_t depth;
    int32_t device;
    int32_t name_index;
    uint8_t raised, failed, open, memory;
} gp_record_out;

static struct {
    gp_record *recs;
    size_t n, cap;
    size_t open;         /* records in REC_OPEN */
    uint64_t generation; /* bumped by reset() */
} store;

/* Pending records per device, oldest first: indices into the store. */
typedef struct {
    int64_t *idx;
    size_t head, tail, cap;
} pending_t;
static pending_t pending[GP_MAX_DEVICES];

static int enabled = 1;
#define GP_MAX_OBSERVERS 4
static int (*metrics_hook)(void); /* see gp_regions_set_metrics_hook */
static const gp_region_observer *observers[GP_MAX_OBSERVERS];
static int n_observers;

int
gp_regions_add_observer(const gp_region_observer *obs)
{
    if (n_observers == GP_MAX_OBSERVERS) {
        PyErr_SetString(gp_GpuProfileError, "too many region observers");
        return -1;
    }
    observers[n_observers++] = obs;
    return 0;
}

void
gp_regions_remove_observer(const gp_region_observer *obs)
{
    for (int k = 0; k < n_observers; k++)
        if (observers[k] == obs) {
            memmove(&observers[k], &observers[k + 1], (size_t)(n_observers - k - 1) * sizeof obs);
            n_observers--;
            return;
        }
}

void
gp_regions_set_metrics_hook(int (*hook)(void))
{
    metrics_hook = hook;
}

/* Tells the observers about a new record; on failure, exits the ones already told. */
static int
notify_enter(int64_t i)
{
    for (int k = 0; k < n_observers; k++)
        if (observers[k]->enter(i, observers[k]->userdata) < 0) {
            while (--k >= 0)
                observers[k]->exit(i, observers[k]->userdata);
            return -1;
        }
    return 0;
}

static void
notify_exit(int64_t i)
{
    for (int k = n_observers - 1; k >= 0; k--)
        observers[k]->exit(i, observers[k]->userdata);
}

typedef struct {
    PyObject_HEAD
    PyObject *name;
    PyObject *stream_obj; /* kept alive while the region object is */
    const char *name_utf8;
    cudaStream_t stream;
    int device; /* the stream's device; -1: the current device at enter */
    int nvtx;
    PyObject *metrics; /* region(..., metrics=...), NULL for None: see region_metrics.c */
    int memory;         /* region(memory=True): track device memory while open (attribution.c) */
    PyObject *weakreflist;
} gp_region;

typedef struct {
    gp_region *region; /* strong reference */
    int64_t rec;       /* -1: entered while disabled */
} frame_t;

typedef struct {
    frame_t *frames;
    int n, cap;
    int depth; /* frames with a record */
    uint64_t id;
} thread_t;

static _Thread_local thread_t *tls;
static pthread_key_t tls_key;
static PyTypeObject *RegionType;
static PyTypeObject *RegionCallType;

static void
thread_free(void *p)
{
    thread_t *t = p;
    free(t->frames);
    free(t);
}

static thread_t *
thread_state(void)
{
    if (tls != NULL)
        return tls;
    thread_t *t = calloc(1, sizeof *t);
    if (t == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    t->id = PyThread_get_thread_native_id();
    pthread_setspecific(tls_key, t);
    tls = t;
    return t;
}

static int
push_frame(thread_t *t, gp_region *region, int64_t rec)
{
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        frame_t *f = realloc(t->frames, (size_t)cap * sizeof *f);
        if (f == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->frames = f;
        t->cap = cap;
    }
    t->frames[t->n].region = (gp_region *)Py_NewRef(region);
    t->frames[t->n].rec = rec;
    t->n++;
    if (rec >= 0)
        t->depth++;
    return 0;
}

static int64_t
store_append(void)
{
    if (store.n == store.cap) {
        size_t cap = store.cap ? 2 * store.cap : 1024;
        gp_record *r = realloc(store.recs, cap * sizeof *r);
        if (r == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        store.recs = r;
        store.cap = cap;
    }
    return (int64_t)store.n++;
}

static int
pending_push(int device, int64_t rec)
{
    pending_t *q = &pending[device];
    if (q->tail == q->cap) {
        if (q->head > 0) { /* compact before growing */
            memmove(q->idx, q->idx + q->head, (q->tail - q->head) * sizeof *q->idx);
            q->tail -= q->head;
            q->head = 0;
        }
        if (q->tail == q->cap) {
            size_t cap = q->cap ? 2 * q->cap : 1024;
            int64_t *idx = realloc(q->idx, cap * sizeof *idx);
            if (idx == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            q->idx = idx;
            q->cap = cap;
        }
    }
    q->idx[q->tail++] = rec;
    return 0;
}

/* ---- resolution ---------------------------------------------------------------------------- */

/* Reads the elapsed time of pending record `i` if its events completed: 1 resolved, 0 not yet,
 * -1 with CudaError set. A sticky error keeps the record pending, so every later read reports it
 * too; any other error marks the record failed (no time) and is reported once. */
static int
try_resolve(int64_t i)
{
    gp_record *r = &store.recs[i];
    if (r->state != REC_PENDING)
        return 1;
    float ms = 0.0f;
    cudaError_t err = cudaEventElapsedTime(&ms, r->ev[0], r->ev[1]);
    if (err == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return 0;
    }
    if (err == cudaSuccess) {
        r->gpu_ms = ms;
        r->state = REC_DONE;
        gp_event_pool_give(r->device, 2, r->ev);
        return 1;
    }
    char call[320];
    snprintf(call, sizeof call, "timing region '%.200s' (cudaEventElapsedTime)",
             PyUnicode_AsUTF8(r->name));
    if (!gp_cuda_error_is_sticky(err)) {
        r->gpu_ms = NAN;
        r->flags |= REC_FAILED;
        r->state = REC_DONE;
        gp_event_pool_give(r->device, 2, r->ev);
    }
    gp_set_cuda_error(err, call, __FILE__, __LINE__);
    return -1;
}

/* Pool empty: resolve finished records if the oldest one finished. Cheap when the GPU is behind
 * (one query), so regions do not pay a query each while work is queued. */
static int
reclaim(int device)
{
    pending_t *q = &pending[device];
    while (q->head < q->tail) {
        int r = try_resolve(q->idx[q->head]);
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
        q->head++;
    }
    q->head = q->tail = 0;
    return 0;
}

/* Waits (GIL released) until the stop event of pending record `i` completed. */
static int
wait_record(int64_t i)
{
    cudaEvent_t stop = store.recs[i].ev[1];
    cudaError_t err;
    Py_BEGIN_ALLOW_THREADS
    err = cudaEventSynchronize(stop);
    Py_END_ALLOW_THREADS
    if (err != cudaSuccess && gp_cuda_error_is_sticky(err)) {
        gp_set_cuda_error(err, "cudaEventSynchronize(region stop event)", __FILE__, __LINE__);
        return -1;
    }
    (void)cudaGetLastError(); /* a non-sticky failure is reported by try_resolve */
    return 0;
}

/* Resolves every pending record of `device`, waiting for the GPU where needed. With `oldest_only`,
 * stops once the oldest record is resolved (used when the pool is at its soft limit). */
static int
resolve_device(int device, int oldest_only)
{
    pending_t *q = &pending[device];
    while (q->head < q->tail) {
        int64_t i = q->idx[q->head];
        int r = try_resolve(i);
        if (r < 0)
            return -1;
        if (r == 1) {
            q->head++;
            if (oldest_only)
                return reclaim(device);
            continue;
        }
        uint64_t generation = store.generation;
        if (wait_record(i) < 0)
            return -1;
        if (generation != store.generation)
            return 0; /* reset() ran while we waited: nothing left to resolve */
        r = try_resolve(i);
        if (r < 0)
            return -1;
        if (r == 0) {
            PyErr_Format(gp_GpuProfileError, "region '%U': stop event completed but its elapsed "
                         "time is not ready", store.recs[i].name);
            return -1;
        }
    }
    q->head = q->tail = 0;
    return 0;
}

static int
resolve_all(void)
{
    for (int d = 0; d < GP_MAX_DEVICES; d++)
        if (pending[d].head < pending[d].tail && resolve_device(d, 0) < 0)
            return -1;
    return 0;
}

static int
acquire_events(int device, cudaEvent_t ev[2])
{
    for (;;) {
        if (gp_event_pool_take(device, 2, ev) == 0)
            return 0;
        if (reclaim(device) < 0)
            return -1;
        if (gp_event_pool_take(device, 2, ev) == 0)
            return 0;
        pending_t *q = &pending[device];
        if (gp_event_pool_created(device) < GP_EVENT_SOFT_LIMIT || q->head == q->tail) {
            if (gp_event_pool_grow(device, GP_EVENT_GROW) < 0)
                return -1;
        } else if (resolve_device(device, 1) < 0) {
            return -1;
        }
    }
}

/* ---- the Region type ------------------------------------------------------------------------ */

static int
region_device(gp_region *self)
{
    if (self->device >= 0)
        return self->device;
    if (self->stream == 0)
        return gp_current_device();
    int device = 0;
    GP_CUDA_CHECK(cudaStreamGetDevice(self->stream, &device));
    if (device >= GP_MAX_DEVICES)
        return gp_current_device(); /* reports the limit */
    self->device = device;
    return device;
error:
    return -1;
}

static int64_t
innermost_record(thread_t *t)
{
    for (int k = t->n - 1; k >= 0; k--)
        if (t->frames[k].rec >= 0)
            return t->frames[k].rec;
    return -1;
}

/* Undoes an enter whose observers or start event failed (observers already told to exit). */
static void
abandon_enter(thread_t *t, gp_region *self, int64_t i, int device, cudaEvent_t ev[2])
{
    t->n--;
    t->depth--;
    Py_DECREF(self);
    store.open--;
    if (device >= 0)
        gp_event_pool_give(device, 2, ev);
    /* Observers may run Python, which may have entered regions after this one: drop the
     * record only if it is still the last, otherwise keep it as a failed record. */
    if ((size_t)i == store.n - 1) {
        store.n--;
        Py_DECREF(store.recs[i].name);
    } else {
        store.recs[i].state = REC_DONE;
        store.recs[i].flags |= REC_FAILED;
    }
}

/* Observers hear of the record before its start event is recorded (and of its end after the
 * stop event): while tracing, both cudaEventRecord calls then carry the region's external
 * correlation id, which is how a trace finds the region's interval on the GPU clock. */
static int
enter_impl(gp_region *self)
{
    thread_t *t = thread_state();
    if (t == NULL)
        return -1;
    if (!enabled)
        return push_frame(t, self, -1);

    int device = -1;
    cudaEvent_t ev[2] = {0, 0};
    if (gp_device_count() > 0) {
        if (gp_require_device() < 0)
            return -1;
        device = region_device(self);
        if (device < 0 || acquire_events(device, ev) < 0)
            return -1;
    }
    int64_t parent = innermost_record(t);
    int64_t i = store_append();
    if (i < 0 || push_frame(t, self, i) < 0) {
        if (i >= 0)
            store.n--;
        if (device >= 0)
            gp_event_pool_give(device, 2, ev);
        return -1;
    }
    gp_record *r = &store.recs[i];
    r->name = Py_NewRef(self->name);
    r->parent = parent;
    r->thread = t->id;
    r->depth = t->depth - 1;
    r->device = (int16_t)device;
    r->ev[0] = ev[0];
    r->ev[1] = ev[1];
    r->gpu_ms = NAN;
    r->host_end_ns = 0;
    r->state = REC_OPEN;
    r->flags = self->memory ? REC_MEMORY : 0;
    store.open++;
    if (n_observers > 0 && notify_enter(i) < 0) {
        abandon_enter(t, self, i, device, ev);
        return -1;
    }
    if (device >= 0) {
        cudaError_t err = cudaEventRecord(ev[0], self->stream);
        if (err != cudaSuccess) {
            if (n_observers > 0)
                notify_exit(i);
            abandon_enter(t, self, i, device, ev);
            char call[320];
            snprintf(call, sizeof call, "entering region '%.200s': cudaEventRecord(start, stream)",
                     self->name_utf8);
            gp_set_cuda_error(err, call, __FILE__, __LINE__);
            return -1;
        }
    }
    if (self->nvtx)
        nvtxRangePushA(self->name_utf8);
    store.recs[i].host_start_ns = gp_now_ns();
    return 0;
}

static int
not_open_error(gp_region *self, thread_t *t)
{
    for (int k = t ? t->n - 2 : -1; k >= 0; k--)
        if (t->frames[k].region == self) {
            PyErr_Format(gp_GpuProfileError,
                         "region '%U' exited while region '%U', entered after it, is still open: "
                         "regions must close in the reverse order they were opened",
                         self->name, t->frames[t->n - 1].region->name);
            return -1;
        }
    PyErr_Format(gp_GpuProfileError,
                 "region '%U' exited but is not open in this thread (exited twice, or entered "
                 "in another thread)",
                 self->name);
    return -1;
}

static int
exit_impl(gp_region *self, int raised)
{
    thread_t *t = tls;
    if (t == NULL || t->n == 0 || t->frames[t->n - 1].region != self)
        return not_open_error(self, t);
    int64_t i = t->frames[--t->n].rec;
    Py_DECREF(self); /* the frame's reference; the caller still holds one */
    if (i < 0)
        return 0;
    int64_t host_end = gp_now_ns();
    t->depth--;
    store.open--;
    gp_record *r = &store.recs[i];
    r->host_end_ns = host_end;
    if (raised)
        r->flags |= REC_RAISED;
    int rc = 0;
    if (r->device < 0) {
        r->state = REC_HOST;
    } else {
        cudaError_t err = cudaEventRecord(r->ev[1], self->stream);
        if (err == cudaSuccess && pending_push(r->device, i) == 0) {
            r->state = REC_PENDING;
        } else {
            r->state = REC_DONE;
            r->flags |= REC_FAILED;
            gp_event_pool_give(r->device, 2, r->ev);
            if (err != cudaSuccess) {
                char call[320];
                snprintf(call, sizeof call, "exiting region '%.200s': cudaEventRecord(stop, stream)",
                         self->name_utf8);
                gp_set_cuda_error(err, call, __FILE__, __LINE__);
            }
            rc = -1;
        }
    }
    if (n_observers > 0)
        notify_exit(i);
    if (self->nvtx)
        nvtxRangePop();
    return rc;
}

static PyObject *
region_enter(PyObject *op, PyObject *unused)
{
    if (enter_impl((gp_region *)op) < 0)
        return NULL;
    return Py_NewRef(op);
}

static PyObject *
region_exit(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    int raised = nargs > 0 && args[0] != Py_None;
    if (exit_impl((gp_region *)op, raised) < 0) {
        if (!raised)
            return NULL;
        /* Never replace the body's exception; the record is already marked failed. */
        PyErr_Clear();
    }
    Py_RETURN_FALSE;
}

static const char *const region_kwlist[] = {"name", "stream", "nvtx", "memory", "metrics", NULL};
#define REGION_NARGS 5
#define REGION_NPOSITIONAL 3 /* memory and metrics are keyword-only */

/* Shared region objects for the default stream, by name, one dict per nvtx flag. */
#define GP_REGION_CACHE_MAX 4096
static PyObject *region_cache[2];

static PyObject *
region_make(PyTypeObject *type, PyObject *const *vals)
{
    PyObject *name = vals[0];
    if (name == NULL) {
        PyErr_SetString(PyExc_TypeError, "region() missing required argument 'name'");
        return NULL;
    }
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "region name must be a str, got %.100s",
                     Py_TYPE(name)->tp_name);
        return NULL;
    }
    const char *utf8 = PyUnicode_AsUTF8(name);
    if (utf8 == NULL)
        return NULL;
    cudaStream_t stream;
    if (gp_stream_from_object(vals[1], &stream) < 0)
        return NULL;
    int nvtx = vals[2] == NULL ? 1 : PyObject_IsTrue(vals[2]);
    if (nvtx < 0)
        return NULL;
    int memory = vals[3] == NULL ? 0 : PyObject_IsTrue(vals[3]);
    if (memory < 0)
        return NULL;
    PyObject *metrics = vals[4] == Py_None ? NULL : vals[4];
    if (metrics != NULL && metrics_hook != NULL && metrics_hook() < 0)
        return NULL;
    gp_region *self = PyObject_New(gp_region, type);
    if (self == NULL)
        return NULL;
    self->name = Py_NewRef(name);
    self->name_utf8 = utf8;
    self->stream_obj = Py_NewRef(vals[1] ? vals[1] : Py_None);
    self->stream = stream;
    self->device = -1;
    self->nvtx = nvtx;
    self->metrics = Py_XNewRef(metrics);
    self->memory = memory;
    self->weakreflist = NULL;
    return (PyObject *)self;
}

/* region(name, stream=None, nvtx=True, *, metrics=None) through vectorcall: the construction cost is part of
 * every `with gpuprofile.region(...)`, so arguments are matched by hand. */
static PyObject *
region_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *vals[REGION_NARGS] = {NULL, NULL, NULL, NULL, NULL};
    if (nargs > REGION_NPOSITIONAL) {
        PyErr_Format(PyExc_TypeError, "region() takes at most %d positional arguments (%zd given)",
                     REGION_NPOSITIONAL, nargs);
        return NULL;
    }
    for (Py_ssize_t k = 0; k < nargs; k++)
        vals[k] = args[k];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int slot = -1;
        for (int j = 0; j < REGION_NARGS && slot < 0; j++)
            if (PyUnicode_CompareWithASCIIString(key, region_kwlist[j]) == 0)
                slot = j;
        if (slot < 0) {
            PyErr_Format(PyExc_TypeError, "region() got an unexpected keyword argument '%U'", key);
            return NULL;
        }
        if (vals[slot] != NULL) {
            PyErr_Format(PyExc_TypeError, "region() got multiple values for argument '%s'",
                         region_kwlist[slot]);
            return NULL;
        }
        vals[slot] = args[nargs + k];
    }
    /* Regions are immutable and keep no per-activation state (that lives in the thread's frames),
     * so `region("x")` on the default stream can hand out one shared object per name: a dict
     * lookup instead of an allocation on every `with gpuprofile.region("x"):`. */
    if ((vals[1] == NULL || vals[1] == Py_None) && vals[3] == NULL &&
        (vals[4] == NULL || vals[4] == Py_None) &&
        vals[0] != NULL && PyUnicode_CheckExact(vals[0])) {
        int nvtx = vals[2] == NULL ? 1 : PyObject_IsTrue(vals[2]);
        if (nvtx < 0)
            return NULL;
        PyObject *cache = region_cache[nvtx];
        PyObject *hit = PyDict_GetItemWithError(cache, vals[0]);
        if (hit != NULL)
            return Py_NewRef(hit);
        if (PyErr_Occurred())
            return NULL;
        PyObject *made = region_make((PyTypeObject *)type, vals);
        if (made != NULL && PyDict_GET_SIZE(cache) < GP_REGION_CACHE_MAX &&
            PyDict_SetItem(cache, vals[0], made) < 0)
            Py_CLEAR(made);
        return made;
    }
    return region_make((PyTypeObject *)type, vals);
}

static PyObject *
region_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *vals[REGION_NARGS] = {NULL, NULL, NULL, NULL, NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOO$OO:region", (char **)region_kwlist,
                                     &vals[0], &vals[1], &vals[2], &vals[3], &vals[4]))
        return NULL;
    return region_make(type, vals);
}

static void
region_dealloc(PyObject *op)
{
    gp_region *self = (gp_region *)op;
    PyTypeObject *tp = Py_TYPE(op);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs(op);
    Py_DECREF(self->name);
    Py_DECREF(self->stream_obj);
    Py_XDECREF(self->metrics);
    PyObject_Free(op);
    Py_DECREF(tp);
}

static PyObject *
region_repr(PyObject *op)
{
    gp_region *self = (gp_region *)op;
    if (self->metrics != NULL)
        return PyUnicode_FromFormat("region(%R, stream=%R, nvtx=%s%s, metrics=%R)", self->name,
                                    self->stream_obj, self->nvtx ? "True" : "False",
                                    self->memory ? ", memory=True" : "", self->metrics);
    return PyUnicode_FromFormat("region(%R, stream=%R, nvtx=%s%s)", self->name, self->stream_obj,
                                self->nvtx ? "True" : "False", self->memory ? ", memory=True" : "");
}

/* ---- the decorator: region(...)(fn) -------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    gp_region *region;
    PyObject *fn;
    PyObject *dict;
    vectorcallfunc vectorcall;
} gp_regioncall;

static PyObject *
regioncall_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    gp_regioncall *self = (gp_regioncall *)op;
    if (enter_impl(self->region) < 0)
        return NULL;
    PyObject *result = PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    if (result == NULL) {
        gp_exc_state saved;
        gp_exc_save(&saved);
        if (exit_impl(self->region, 1) < 0)
            PyErr_Clear();
        gp_exc_restore(&saved);
        return NULL;
    }
    if (exit_impl(self->region, 0) < 0) {
        Py_DECREF(result);
        return NULL;
    }
    return result;
}

static PyObject *
region_call(PyObject *op, PyObject *args, PyObject *kwargs)
{
    PyObject *fn;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) > 0) {
        PyErr_SetString(PyExc_TypeError, "region(...) as a decorator takes one function");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O:region decorator", &fn))
        return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "region(...) decorates a callable, got %.100s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    gp_regioncall *w = PyObject_GC_New(gp_regioncall, RegionCallType);
    if (w == NULL)
        return NULL;
    w->region = (gp_region *)Py_NewRef(op);
    w->fn = Py_NewRef(fn);
    w->dict = NULL;
    w->vectorcall = regioncall_vectorcall;
    PyObject_GC_Track(w);
    PyObject *functools = PyImport_ImportModule("functools");
    PyObject *done = functools ? PyObject_CallMethod(functools, "update_wrapper", "OO", w, fn) : NULL;
    Py_XDECREF(functools);
    if (done == NULL) {
        Py_DECREF(w);
        return NULL;
    }
    Py_DECREF(done);
    return (PyObject *)w;
}

static int
regioncall_traverse(PyObject *op, visitproc visit, void *arg)
{
    gp_regioncall *self = (gp_regioncall *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(self->region);
    Py_VISIT(self->fn);
    Py_VISIT(self->dict);
    return 0;
}

static int
regioncall_clear(PyObject *op)
{
    gp_regioncall *self = (gp_regioncall *)op;
    Py_CLEAR(self->region);
    Py_CLEAR(self->fn);
    Py_CLEAR(self->dict);
    return 0;
}

static void
regioncall_dealloc(PyObject *op)
{
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    regioncall_clear(op);
    PyObject_GC_Del(op);
    Py_DECREF(tp);
}

static PyObject *
regioncall_get(PyObject *op, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(op);
    return PyMethod_New(op, obj);
}

static PyObject *
regioncall_repr(PyObject *op)
{
    gp_regioncall *self = (gp_regioncall *)op;
    return PyUnicode_FromFormat("<%R decorating %R>", self->region, self->fn);
}

/* ---- results -------------------------------------------------------------------------------- */

int64_t
gp_region_innermost(void)
{
    return tls ? innermost_record(tls) : -1;
}

int
gp_region_record_memory(int64_t index)
{
    return index >= 0 && (size_t)index < store.n && (store.recs[index].flags & REC_MEMORY);
}

PyObject *
gp_region_innermost_metrics(void)
{
    if (tls == NULL || tls->n == 0)
        return NULL;
    return tls->frames[tls->n - 1].region->metrics;
}

PyObject *
gp_region_record_name(int64_t index)
{
    if (index < 0 || (size_t)index >= store.n)
        return NULL;
    return store.recs[index].name;
}

/* _records() -> (names, packed): every record, resolved, as gp_record_out structs. */
static PyObject *
records_raw(PyObject *module, PyObject *unused)
{
    if (resolve_all() < 0)
        return NULL;
    PyObject *names = PyList_New(0), *index = PyDict_New(), *packed = NULL;
    if (names == NULL || index == NULL)
        goto error;
    packed = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(store.n * sizeof(gp_record_out)));
    if (packed == NULL)
        goto error;
    gp_record_out *out = (gp_record_out *)PyBytes_AS_STRING(packed);
    PyObject *last_name = NULL, *last_pos = NULL; /* borrowed: consecutive records share names */
    for (size_t k = 0; k < store.n; k++) {
        const gp_record *r = &store.recs[k];
        PyObject *pos = r->name == last_name ? last_pos : PyDict_GetItemWithError(index, r->name);
        if (pos == NULL) {
            if (PyErr_Occurred())
                goto error;
            pos = PyLong_FromSsize_t(PyList_GET_SIZE(names));
            if (pos == NULL || PyDict_SetItem(index, r->name, pos) < 0 ||
                PyList_Append(names, r->name) < 0) {
                Py_XDECREF(pos);
                goto error;
            }
            Py_DECREF(pos);
            pos = PyDict_GetItem(index, r->name);
        }
        last_name = r->name;
        last_pos = pos;
        memset(&out[k], 0, sizeof out[k]);
        out[k].host_start_ns = r->host_start_ns;
        out[k].host_end_ns = r->host_end_ns;
        out[k].gpu_ms = r->gpu_ms;
        out[k].parent = r->parent;
        out[k].thread = r->thread;
        out[k].depth = r->depth;
        out[k].device = r->device;
        out[k].name_index = (int32_t)PyLong_AsLong(pos);
        out[k].raised = (r->flags & REC_RAISED) != 0;
        out[k].failed = (r->flags & REC_FAILED) != 0;
        out[k].open = r->state == REC_OPEN;
        out[k].memory = (r->flags & REC_MEMORY) != 0;
    }
    Py_DECREF(index);
    return Py_BuildValue("(NN)", names, packed);
error:
    Py_XDECREF(names);
    Py_XDECREF(index);
    Py_XDECREF(packed);
    return NULL;
}

static PyObject *
regions_reset(PyObject *module, PyObject *unused)
{
    if (store.open > 0)
        return PyErr_Format(gp_GpuProfileError,
                            "reset() while %zu region(s) are open; call it outside all regions",
                            store.open);
    for (size_t k = 0; k < store.n; k++) {
        gp_record *r = &store.recs[k];
        /* Events still in flight can go back: re-recording an event replaces its old record. */
        if (r->state == REC_PENDING)
            gp_event_pool_give(r->device, 2, r->ev);
        Py_DECREF(r->name);
    }
    store.n = 0;
    store.generation++;
    for (int d = 0; d < GP_MAX_DEVICES; d++)
        pending[d].head = pending[d].tail = 0;
    Py_RETURN_NONE;
}

static PyObject *
regions_enable(PyObject *module, PyObject *unused)
{
    enabled = 1;
    Py_RETURN_NONE;
}

static PyObject *
regions_disable(PyObject *module, PyObject *unused)
{
    enabled = 0;
    Py_RETURN_NONE;
}

static PyObject *
regions_is_enabled(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(enabled);
}

/* Pool and store counters, for tests and `info`: {device: (created, free, pending)}. */
static PyObject *
pool_stats(PyObject *module, PyObject *unused)
{
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    for (int dev = 0; dev < GP_MAX_DEVICES; dev++) {
        if (gp_event_pool_created(dev) == 0)
            continue;
        PyObject *key = PyLong_FromLong(dev);
        PyObject *v = Py_BuildValue("(nnn)", (Py_ssize_t)gp_event_pool_created(dev),
                                    (Py_ssize_t)gp_event_pool_free(dev),
                                    (Py_ssize_t)(pending[dev].tail - pending[dev].head));
        if (key == NULL || v == NULL || PyDict_SetItem(d, key, v) < 0) {
            Py_XDECREF(key);
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(key);
        Py_DECREF(v);
    }
    return d;
}

static PyMethodDef region_methods[] = {
    {"__enter__", region_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))region_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef region_members[] = {
    {"name", T_OBJECT_EX, offsetof(gp_region, name), READONLY, "The region's name."},
    {"stream", T_OBJECT_EX, offsetof(gp_region, stream_obj), READONLY, "The stream as given."},
    {"metrics", T_OBJECT, offsetof(gp_region, metrics), READONLY, "Counters collected, or None."},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(gp_region, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(region_doc,
             "region(name, stream=None, nvtx=True, *, memory=False, metrics=None)\n--\n\n"
             "Time a block of code on the GPU: `with region(name):` or `@region(name)`.\n\n"
             "Records CUDA events on `stream` around the body and pushes an NVTX range; exit\n"
             "never waits for the GPU (times are resolved when results are read). `stream` is\n"
             "None (the legacy default stream), an int handle, or an object with\n"
             "__cuda_stream__ or .cuda_stream. Without a device the host clock is used.\n"
             "metrics: hardware counters for the block (a set name such as 'sol', or metric\n"
             "names); read them with gpuprofile.region_metrics(name). See docs/metrics.md.\n"
             "memory=True tracks device allocations while the region is open, for its peak\n"
             "(gpuprofile.memory.region_peaks()).");

static PyType_Slot region_slots[] = {
    {Py_tp_new, region_new},
    {Py_tp_dealloc, region_dealloc},
    {Py_tp_repr, region_repr},
    {Py_tp_call, region_call},
    {Py_tp_methods, region_methods},
    {Py_tp_members, region_members},
    {Py_tp_doc, (void *)region_doc},
    {0, NULL},
};

static PyType_Spec region_spec = {
    .name = "gpuprofile.region",
    .basicsize = sizeof(gp_region),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = region_slots,
};

static PyMemberDef regioncall_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(gp_regioncall, dict), READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(gp_regioncall, vectorcall), READONLY, NULL},
    {"region", T_OBJECT_EX, offsetof(gp_regioncall, region), READONLY, "The region it times."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef regioncall_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot regioncall_slots[] = {
    {Py_tp_getset, regioncall_getset},
    {Py_tp_dealloc, regioncall_dealloc},
    {Py_tp_traverse, regioncall_traverse},
    {Py_tp_clear, regioncall_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, regioncall_get},
    {Py_tp_repr, regioncall_repr},
    {Py_tp_members, regioncall_members},
    {0, NULL},
};

static PyType_Spec regioncall_spec = {
    .name = "gpuprofile.RegionFunction",
    .basicsize = sizeof(gp_regioncall),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
             Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = regioncall_slots,
};

static PyMethodDef module_methods[] = {
    {"_records", records_raw, METH_NOARGS, "Resolve and return (names, packed records)."},
    {"reset", regions_reset, METH_NOARGS, "reset()\n--\n\nForget every region record."},
    {"enable", regions_enable, METH_NOARGS, "enable()\n--\n\nTime regions (the default)."},
    {"disable", regions_disable, METH_NOARGS,
     "disable()\n--\n\nMake regions no-ops that cost almost nothing, until enable()."},
    {"is_enabled", regions_is_enabled, METH_NOARGS, "is_enabled()\n--\n\nWhether regions time."},
    {"_pool_stats", pool_stats, METH_NOARGS, "{device: (events created, free, pending records)}"},
    {NULL, NULL, 0, NULL},
};

int
gp_regions_init(PyObject *module)
{
    static int key_created;
    if (!key_created) {
        if (pthread_key_create(&tls_key, thread_free) != 0) {
            PyErr_SetString(PyExc_OSError, "pthread_key_create failed");
            return -1;
        }
        key_created = 1;
    }
    RegionType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &region_spec, NULL);
    if (RegionType == NULL)
        return -1;
    RegionType->tp_vectorcall = region_vectorcall;
    for (int k = 0; k < 2; k++)
        if (region_cache[k] == NULL && (region_cache[k] = PyDict_New()) == NULL)
            return -1;
    RegionCallType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &regioncall_spec, NULL);
    if (RegionCallType == NULL)
        return -1;
    if (PyModule_AddType(module, RegionType) < 0 || PyModule_AddType(module, RegionCallType) < 0)
        return -1;
    return PyModule_AddFunctions(module, module_methods);
}
