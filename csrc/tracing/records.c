/* The activity record store (records.h).
 *
 * Threads: CUPTI calls buffer_requested on whichever thread needs a buffer (often one that is
 * launching a kernel) and buffer_completed on its own worker thread or inside
 * cuptiActivityFlushAll; neither holds the GIL nor touches Python. The store and the kernel-name
 * table are guarded by `store_lock`; the free list of buffers by `buffer_lock`. The Python entry
 * points run with the GIL held. */
#include "records.h"
#include "core/cupti_loader.h"
#include "core/errors.h"
#include "kernel_names.h"

#include <cupti.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GP_BUFFER_ALIGN 8
/* Completed buffers kept for reuse; more are freed. */
#define GP_FREE_BUFFERS 16

/* ---- the store ------------------------------------------------------------------------------ */

typedef struct {
    char *data;
    size_t n, cap, elem;
} vec_t;

static pthread_mutex_t store_lock = PTHREAD_MUTEX_INITIALIZER;
static vec_t stores[GP_N_RECORD_KINDS]; /* one per row of gp_record_kinds; elem set on first push */
static uint64_t lost;                   /* records parsed but not stored (out of memory) */

void *
gp_records_push(int kind)
{
    vec_t *v = &stores[kind];
    v->elem = gp_record_kinds[kind].size;
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 4096;
        char *grown = realloc(v->data, cap * v->elem);
        if (grown == NULL) {
            lost++;
            return NULL;
        }
        v->data = grown;
        v->cap = cap;
    }
    void *slot = v->data + v->n++ * v->elem;
    memset(slot, 0, v->elem);
    return slot;
}

/* Moves the contents of `v` into a new bytes object and empties `v`. */
static PyObject *
vec_take(vec_t *taken)
{
    PyObject *b = PyBytes_FromStringAndSize(taken->data, (Py_ssize_t)(taken->n * taken->elem));
    free(taken->data);
    taken->data = NULL;
    taken->n = taken->cap = 0;
    return b;
}

/* ---- parsing (CUPTI's thread, store_lock held) ---------------------------------------------- */

static void (*api_hook)(const CUpti_ActivityAPI *api);

void
gp_records_set_api_hook(void (*hook)(const CUpti_ActivityAPI *api))
{
    api_hook = hook;
}

/* The row of gp_record_kinds that CUPTI record kind `kind` is parsed into, or NULL. */
static const gp_record_kind *
kind_of(CUpti_ActivityKind kind)
{
    for (int r = 0; r < GP_N_RECORD_KINDS; r++) {
        const gp_record_kind *row = &gp_record_kinds[r];
        if (row->add != NULL && (row->parse[0] == kind || row->parse[1] == kind))
            return row;
    }
    return NULL;
}

static void
parse_buffer(uint8_t *buffer, size_t valid)
{
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&store_lock);
    while (gp_cupti.cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        const gp_record_kind *row = kind_of(rec->kind);
        if (row != NULL)
            row->add(rec);
        else if ((rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME ||
                  rec->kind == CUPTI_ACTIVITY_KIND_DRIVER) &&
                 api_hook != NULL)
            /* enabled for Python lines' launches (activity.c's API bit): not stored here */
            api_hook((const CUpti_ActivityAPI *)rec);
    }
    pthread_mutex_unlock(&store_lock);
}

void
gp_records_note_region_stream(int64_t record, uint32_t device, uint32_t stream, int before,
                              int edge, uint32_t bound)
{
    pthread_mutex_lock(&store_lock);
    gp_region_stream_out *o = gp_records_push(GP_REC_REGION_STREAMS);
    if (o != NULL) {
        o->record = record;
        o->device = device;
        o->stream = stream;
        o->before = before != 0;
        o->edge = (uint16_t)edge;
        o->bound = bound;
    }
    pthread_mutex_unlock(&store_lock);
}

void
gp_records_note_call(uint32_t correlation_id, uint64_t external_id)
{
    pthread_mutex_lock(&store_lock);
    gp_extcorr_out *o = gp_records_push(GP_REC_EXTCORR);
    if (o != NULL) {
        o->external_id = external_id;
        o->correlation_id = correlation_id;
    }
    pthread_mutex_unlock(&store_lock);
}

/* ---- buffers (any thread) ------------------------------------------------------------------- */

static pthread_mutex_t buffer_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *free_buffers[GP_FREE_BUFFERS];
static int n_free;
static uint64_t buffers_allocated, buffers_refused; /* under buffer_lock */

static void CUPTIAPI
buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *max_records = 0; /* as many as fit */
    uint8_t *b = NULL;
    pthread_mutex_lock(&buffer_lock);
    if (n_free > 0)
        b = free_buffers[--n_free];
    pthread_mutex_unlock(&buffer_lock);
    if (b == NULL)
        b = aligned_alloc(GP_BUFFER_ALIGN, GP_RECORDS_BUFFER_BYTES);
    pthread_mutex_lock(&buffer_lock);
    if (b == NULL)
        buffers_refused++; /* CUPTI drops records and counts them as dropped */
    else
        buffers_allocated++;
    pthread_mutex_unlock(&buffer_lock);
    *buffer = b;
    *size = b ? GP_RECORDS_BUFFER_BYTES : 0;
}

static void CUPTIAPI
buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    if (buffer == NULL)
        return;
    if (valid > 0)
        parse_buffer(buffer, valid);
    pthread_mutex_lock(&buffer_lock);
    buffers_allocated--;
    if (n_free < GP_FREE_BUFFERS) {
        free_buffers[n_free++] = buffer;
        buffer = NULL;
    }
    pthread_mutex_unlock(&buffer_lock);
    free(buffer);
}

static int registered;

/* CUPTI's own clock on Linux (CLOCK_REALTIME, in ns), for every record's timestamps. A client
 * may register a clock of its own and never take it back: torch.profiler (Kineto) registers one
 * that counts TSC ticks, not ns, so once it had run and let go of CUPTI, every duration we read
 * was about 2.1x too long on an H200 host (a 2.1 GHz TSC) while CUDA events agreed with the
 * truth. Registering ours at every session start (where such a client may have run), before any
 * kind is enabled, makes the unit ours whatever ran before; it is also CUPTI's default, so a
 * later client that does not register its own sees what it would have seen without us. */
static uint64_t CUPTIAPI
realtime_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Whether a client that registers a clock of its own may have run in this process: torch's
 * Kineto or Triton's proton loaded. Only then is ours registered: the GPU leak tests (no torch)
 * saw the C heap grow by 0.6-1 kB per tracing session (H200, 2026-11-25) once every session
 * registered it, most likely CUPTI keeping each registration. */
static int
foreign_clock_possible(void)
{
    PyObject *modules = PySys_GetObject("modules"); /* borrowed */
    return modules != NULL && PyDict_Check(modules) &&
           (PyDict_GetItemString(modules, "torch") != NULL ||
            PyDict_GetItemString(modules, "triton.profiler") != NULL);
}

int
gp_records_register(void)
{
    if (foreign_clock_possible())
        GP_CUPTI_CHECK(gp_cupti.cuptiActivityRegisterTimestampCallback(realtime_ns));
    GP_CUPTI_CHECK(gp_cupti.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    registered = 1;
    return 0;
error:
    return -1;
}

int
gp_records_registered(void)
{
    return registered;
}

void
gp_records_buffer_stats(unsigned long long *in_cupti, unsigned long long *refused, int *kept)
{
    pthread_mutex_lock(&buffer_lock);
    *in_cupti = buffers_allocated;
    *refused = buffers_refused;
    *kept = n_free;
    pthread_mutex_unlock(&buffer_lock);
}

/* ---- Python entry points (GIL held) ---------------------------------------------------------- */

/* Records dropped since the last call: CUPTI's count (no buffer space) plus ours (no memory). */
static int
take_dropped(uint64_t our_lost, uint64_t *dropped)
{
    size_t n = 0;
    *dropped = our_lost;
    if (!registered)
        return 0;
    GP_CUPTI_CHECK(gp_cupti.cuptiActivityGetNumDroppedRecords(NULL, 0, &n));
    *dropped += n;
    return 0;
error:
    return -1;
}

/* Demangled names of every id, as C strings that live as long as the process (the table never
 * frees a name). Taken under store_lock, turned into str objects after it is released: creating
 * objects may run the garbage collector, and a finalizer could come back here. */
static const char **
demangled_names(uint32_t *count)
{
    pthread_mutex_lock(&store_lock);
    uint32_t n = gp_kernel_name_count();
    const char **out = malloc((n ? n : 1) * sizeof *out);
    for (uint32_t id = 0; out != NULL && id < n; id++)
        out[id] = gp_kernel_name_demangled(id);
    pthread_mutex_unlock(&store_lock);
    *count = n;
    return out;
}

static PyObject *
names_list(void)
{
    uint32_t n;
    const char **names = demangled_names(&n);
    if (names == NULL)
        return PyErr_NoMemory();
    PyObject *list = PyList_New(n);
    for (uint32_t id = 0; list != NULL && id < n; id++) {
        const char *s = names[id] ? names[id] : "<out of memory>";
        PyObject *u = PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
        if (u == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, id, u);
    }
    free(names);
    return list;
}

/* _activity_take() -> dict: every record parsed since the last take, as packed structs (one
 * bytes object per row of gp_record_kinds, under its name), with the kernel-name table
 * ("names") and the dropped count ("dropped"). */
static PyObject *
activity_take(PyObject *module, PyObject *unused)
{
    vec_t taken[GP_N_RECORD_KINDS];
    uint64_t our_lost, dropped;
    pthread_mutex_lock(&store_lock);
    for (int r = 0; r < GP_N_RECORD_KINDS; r++) {
        taken[r] = stores[r];
        stores[r].data = NULL;
        stores[r].n = stores[r].cap = 0;
    }
    our_lost = lost;
    lost = 0;
    pthread_mutex_unlock(&store_lock);
    PyObject *out = PyDict_New();
    int failed = out == NULL;
    for (int r = 0; r < GP_N_RECORD_KINDS; r++) { /* every store is freed, whatever failed */
        taken[r].elem = gp_record_kinds[r].size;
        PyObject *b = vec_take(&taken[r]);
        if (!failed && (b == NULL || PyDict_SetItemString(out, gp_record_kinds[r].name, b) < 0))
            failed = 1;
        Py_XDECREF(b);
    }
    if (failed)
        goto error;
    PyObject *names = names_list();
    if (names == NULL || PyDict_SetItemString(out, "names", names) < 0) {
        Py_XDECREF(names);
        goto error;
    }
    Py_DECREF(names);
    if (take_dropped(our_lost, &dropped) < 0)
        goto error;
    PyObject *d = PyLong_FromUnsignedLongLong((unsigned long long)dropped);
    if (d == NULL || PyDict_SetItemString(out, "dropped", d) < 0) {
        Py_XDECREF(d);
        goto error;
    }
    Py_DECREF(d);
    return out;
error:
    Py_XDECREF(out);
    return NULL;
}

/* _intern_kernel_names(names) -> list: interns and demangles names as CUPTI's would be (tests). */
static PyObject *
demangle(PyObject *module, PyObject *seq)
{
    /* A tuple of our own: the objects made in the loop may run a finalizer that changes a list. */
    PyObject *fast = PySequence_Tuple(seq);
    if (fast == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError))
            PyErr_SetString(PyExc_TypeError, "_intern_kernel_names takes a sequence of str");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(fast);
    PyObject *out = PyList_New(n);
    for (Py_ssize_t k = 0; out != NULL && k < n; k++) {
        const char *s = PyUnicode_AsUTF8(PyTuple_GET_ITEM(fast, k));
        if (s == NULL) {
            Py_CLEAR(out);
            break;
        }
        pthread_mutex_lock(&store_lock);
        uint32_t id = gp_kernel_name_intern(s);
        const char *d = id == GP_NAME_NONE ? NULL : gp_kernel_name_demangled(id);
        pthread_mutex_unlock(&store_lock);
        PyObject *u = d ? Py_BuildValue("(Is)", id, d) : PyErr_NoMemory();
        if (u == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, k, u);
    }
    Py_DECREF(fast);
    return out;
}

static PyMethodDef records_methods[] = {
    {"_activity_take", activity_take, METH_NOARGS, "Take every parsed record (packed structs)."},
    {"_intern_kernel_names", demangle, METH_O, "[(id, demangled)] for kernel names (tests)."},
    {NULL, NULL, 0, NULL},
};

int
gp_records_init(PyObject *module)
{
    if (PyModule_AddFunctions(module, records_methods) < 0)
        return -1;
    PyObject *kinds = gp_record_kinds_export();
    if (kinds == NULL)
        return -1;
    int rc = PyModule_AddObjectRef(module, "RECORD_KINDS", kinds);
    Py_DECREF(kinds);
    return rc;
}
