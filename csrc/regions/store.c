/* The region record store, lazy resolution and observers (store.h). */
#include "store.h"
#include "core/errors.h"
#include "core/events.h"
#include "core/layout.h"
#include "core/testing.h"
#include "core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Events per device the pool may hold before regions wait for the oldest pending one. */
#define GP_EVENT_SOFT_LIMIT 65536
#define GP_EVENT_GROW 128

/* The layout _records() hands to Python; _record_layout() gives NumPy its dtype. */
typedef struct {
    int64_t host_start_ns, host_end_ns;
    double gpu_ms;
    int64_t parent;
    uint64_t thread;
    int32_t depth;
    int32_t device;
    int32_t name_index;
    uint8_t raised, failed, open, memory;
    uint8_t cupti;       /* GPU time from the trace (REC_CUPTI), not from events */
    uint8_t no_gpu_work; /* filled: the trace attributed no GPU work to it */
} gp_record_out;

gp_record_store gp_store;

/* Pending records per device, oldest first: indices into the store. */
typedef struct {
    int64_t *idx;
    size_t head, tail, cap;
} pending_t;
static pending_t pending[GP_MAX_DEVICES];

int gp_regions_enabled = 1;

#define GP_MAX_OBSERVERS 4
static const gp_region_observer *observers[GP_MAX_OBSERVERS];
int gp_regions_n_observers;

int
gp_regions_add_observer(const gp_region_observer *obs)
{
    if (gp_regions_n_observers == GP_MAX_OBSERVERS) {
        PyErr_SetString(gp_GpuProfileError, "too many region observers");
        return -1;
    }
    observers[gp_regions_n_observers++] = obs;
    return 0;
}

void
gp_regions_remove_observer(const gp_region_observer *obs)
{
    for (int k = 0; k < gp_regions_n_observers; k++)
        if (observers[k] == obs) {
            memmove(&observers[k], &observers[k + 1],
                    (size_t)(gp_regions_n_observers - k - 1) * sizeof obs);
            gp_regions_n_observers--;
            return;
        }
}

/* Tells the observers about a new record; on failure, exits the ones already told. */
int
gp_store_notify_enter(int64_t i)
{
    for (int k = 0; k < gp_regions_n_observers; k++)
        if (observers[k]->enter(i, observers[k]->userdata) < 0) {
            while (--k >= 0)
                observers[k]->exit(i, observers[k]->userdata);
            return -1;
        }
    return 0;
}

void
gp_store_notify_exit(int64_t i)
{
    for (int k = gp_regions_n_observers - 1; k >= 0; k--)
        observers[k]->exit(i, observers[k]->userdata);
}

int64_t
gp_store_append(void)
{
    if (gp_store.n == gp_store.cap) {
        size_t cap = gp_store.cap ? 2 * gp_store.cap : 1024;
        gp_record *r = realloc(gp_store.recs, cap * sizeof *r);
        if (r == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        gp_store.recs = r;
        gp_store.cap = cap;
    }
    return (int64_t)gp_store.n++;
}

int
gp_store_pending_push(int device, int64_t rec)
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
    gp_record *r = &gp_store.recs[i];
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
    cudaEvent_t stop = gp_store.recs[i].ev[1];
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
        uint64_t generation = gp_store.generation;
        if (wait_record(i) < 0)
            return -1;
        if (generation != gp_store.generation)
            return 0; /* reset() ran while we waited: nothing left to resolve */
        r = try_resolve(i);
        if (r < 0)
            return -1;
        if (r == 0) {
            PyErr_Format(gp_GpuProfileError,
                         "region '%U': stop event completed but its elapsed "
                         "time is not ready",
                         gp_store.recs[i].name);
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

int
gp_store_acquire_events(int device, cudaEvent_t ev[2])
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

int
gp_region_record_stream(int64_t index, int *device, cudaStream_t *stream)
{
    if (index < 0 || (size_t)index >= gp_store.n || gp_store.recs[index].device < 0)
        return -1;
    *device = gp_store.recs[index].device;
    *stream = gp_store.recs[index].stream;
    return 0;
}

static void (*dead_threads_hook)(void);

void
gp_store_set_dead_threads_hook(void (*hook)(void))
{
    dead_threads_hook = hook;
}

static void
close_dead_threads(void)
{
    if (dead_threads_hook != NULL)
        dead_threads_hook();
}

void
gp_store_close_failed(int64_t rec)
{
    if (rec < 0 || (size_t)rec >= gp_store.n || gp_store.recs[rec].state != REC_OPEN)
        return;
    gp_record *r = &gp_store.recs[rec];
    r->state = REC_DONE;
    r->flags |= REC_FAILED;
    if (r->device >= 0 && !(r->flags & REC_CUPTI))
        gp_event_pool_give(r->device, 2, r->ev);
    gp_store.open--;
}

int
gp_region_record_memory(int64_t index)
{
    return index >= 0 && (size_t)index < gp_store.n && (gp_store.recs[index].flags & REC_MEMORY);
}

int
gp_region_record_cupti(int64_t index)
{
    return index >= 0 && (size_t)index < gp_store.n && (gp_store.recs[index].flags & REC_CUPTI);
}

PyObject *
gp_region_record_name(int64_t index)
{
    if (index < 0 || (size_t)index >= gp_store.n)
        return NULL;
    return gp_store.recs[index].name;
}

/* _records() -> (names, packed): every record, resolved, as gp_record_out structs.
 *
 * Two phases, because a name can run Python: a str subclass's __hash__ or __eq__ (and any
 * allocation, through the gc and finalizers) may enter regions, which grows or moves the store,
 * or call reset(), which frees it. Phase one copies the records and takes a reference to each
 * name without calling Python; phase two builds the name table from those copies alone. */
static PyObject *
records_raw(PyObject *module, PyObject *unused)
{
    close_dead_threads();
    if (resolve_all() < 0)
        return NULL;
    const size_t n = gp_store.n;
    size_t bytes, key_bytes;
    if (gp_mul_size(n, sizeof(gp_record_out), &bytes) < 0 ||
        gp_mul_size(n, sizeof(PyObject *), &key_bytes) < 0)
        return NULL;
    /* Neither allocation runs Python (a bytes object is not tracked by the gc), so `n` holds until
     * phase one is done; the bytes object is ours alone until it is returned. */
    PyObject *packed = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)bytes);
    PyObject **keys = PyMem_RawMalloc(key_bytes ? key_bytes : 1);
    if (packed == NULL || keys == NULL) {
        Py_XDECREF(packed);
        PyMem_RawFree(keys);
        return keys == NULL ? PyErr_NoMemory() : NULL;
    }
    gp_record_out *out = (gp_record_out *)PyBytes_AS_STRING(packed);
    for (size_t k = 0; k < n; k++) { /* phase one: no Python runs */
        const gp_record *r = &gp_store.recs[k];
        keys[k] = Py_NewRef(r->name);
        memset(&out[k], 0, sizeof out[k]);
        out[k].host_start_ns = r->host_start_ns;
        out[k].host_end_ns = r->host_end_ns;
        out[k].gpu_ms = r->gpu_ms;
        out[k].parent = r->parent;
        out[k].thread = r->thread;
        out[k].depth = r->depth;
        out[k].device = r->device;
        out[k].raised = (r->flags & REC_RAISED) != 0;
        out[k].failed = (r->flags & REC_FAILED) != 0;
        out[k].open = r->state == REC_OPEN;
        out[k].memory = (r->flags & REC_MEMORY) != 0;
        out[k].cupti = (r->flags & REC_CUPTI) != 0;
        out[k].no_gpu_work = (r->flags & REC_NO_WORK) != 0;
    }
    PyObject *result = NULL;
    PyObject *names = PyList_New(0), *index = PyDict_New();
    if (names == NULL || index == NULL)
        goto done;
    for (size_t k = 0; k < n; k++) { /* phase two: only the copies are touched */
        Py_ssize_t pos;
        if (k > 0 && keys[k] == keys[k - 1]) { /* consecutive records share names */
            out[k].name_index = out[k - 1].name_index;
            continue;
        }
        PyObject *found = PyDict_GetItemWithError(index, keys[k]);
        if (found != NULL) {
            pos = PyLong_AsSsize_t(found);
        } else if (PyErr_Occurred()) {
            goto done;
        } else {
            pos = PyList_GET_SIZE(names);
            PyObject *v = PyLong_FromSsize_t(pos);
            int rc = v == NULL ? -1 : PyDict_SetItem(index, keys[k], v);
            Py_XDECREF(v);
            if (rc < 0 || PyList_Append(names, keys[k]) < 0)
                goto done;
        }
        if (pos < 0 || pos > INT32_MAX) {
            if (!PyErr_Occurred())
                PyErr_SetString(gp_GpuProfileError, "records(): too many region names");
            goto done;
        }
        out[k].name_index = (int32_t)pos;
    }
    result = PyTuple_Pack(2, names, packed);
done:
    Py_XDECREF(packed);
    Py_XDECREF(names);
    Py_XDECREF(index);
    for (size_t k = 0; k < n; k++)
        Py_DECREF(keys[k]);
    PyMem_RawFree(keys);
    return result;
}

static PyObject *
regions_reset(PyObject *module, PyObject *unused)
{
    close_dead_threads();
    if (gp_store.open > 0)
        return PyErr_Format(gp_GpuProfileError,
                            "reset() while %zu region(s) are open; call it outside all regions",
                            gp_store.open);
    for (size_t k = 0; k < gp_store.n; k++) {
        gp_record *r = &gp_store.recs[k];
        /* Events still in flight can go back: re-recording an event replaces its old record. */
        if (r->state == REC_PENDING)
            gp_event_pool_give(r->device, 2, r->ev);
        Py_DECREF(r->name);
    }
    gp_store.n = 0;
    gp_store.generation++;
    for (int d = 0; d < GP_MAX_DEVICES; d++)
        pending[d].head = pending[d].tail = 0;
    Py_RETURN_NONE;
}

static PyObject *
regions_enable(PyObject *module, PyObject *unused)
{
    gp_regions_enabled = 1;
    Py_RETURN_NONE;
}

static PyObject *
regions_disable(PyObject *module, PyObject *unused)
{
    gp_regions_enabled = 0;
    Py_RETURN_NONE;
}

static PyObject *
regions_is_enabled(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(gp_regions_enabled);
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

/* _record_layout() -> the NumPy dtype dict of gp_record_out (gpuprofile/regions.py). */
static PyObject *
record_layout(PyObject *module, PyObject *unused)
{
    static const gp_layout_field fields[] = {
        GP_LAYOUT_FIELD(gp_record_out, host_start_ns), GP_LAYOUT_FIELD(gp_record_out, host_end_ns),
        GP_LAYOUT_FIELD(gp_record_out, gpu_ms),        GP_LAYOUT_FIELD(gp_record_out, parent),
        GP_LAYOUT_FIELD(gp_record_out, thread),        GP_LAYOUT_FIELD(gp_record_out, depth),
        GP_LAYOUT_FIELD(gp_record_out, device),        GP_LAYOUT_FIELD(gp_record_out, name_index),
        GP_LAYOUT_FIELD(gp_record_out, raised),        GP_LAYOUT_FIELD(gp_record_out, failed),
        GP_LAYOUT_FIELD(gp_record_out, open),          GP_LAYOUT_FIELD(gp_record_out, memory),
        GP_LAYOUT_FIELD(gp_record_out, cupti),         GP_LAYOUT_FIELD(gp_record_out, no_gpu_work),
    };
    return gp_layout_dtype(fields, sizeof fields / sizeof fields[0], sizeof(gp_record_out));
}

static PyMethodDef module_methods[] = {
    {"_records", records_raw, METH_NOARGS, "Resolve and return (names, packed records)."},
    {"_record_layout", record_layout, METH_NOARGS, "NumPy dtype dict of the packed records."},
    {"reset", regions_reset, METH_NOARGS, "reset()\n--\n\nForget every region record."},
    {"enable", regions_enable, METH_NOARGS, "enable()\n--\n\nTime regions (the default)."},
    {"disable", regions_disable, METH_NOARGS,
     "disable()\n--\n\nMake regions no-ops that cost almost nothing, until enable()."},
    {"is_enabled", regions_is_enabled, METH_NOARGS, "is_enabled()\n--\n\nWhether regions time."},
    {NULL, NULL, 0, NULL},
};
/* The tests': _C._testing. */
static PyMethodDef testing_methods[] = {
    {"pool_stats", pool_stats, METH_NOARGS, "{device: (events created, free, pending records)}"},
    {NULL, NULL, 0, NULL},
};
int
gp_region_store_init(PyObject *module)
{
    if (gp_testing_add_functions(module, testing_methods) < 0)
        return -1;
    return PyModule_AddFunctions(module, module_methods);
}
