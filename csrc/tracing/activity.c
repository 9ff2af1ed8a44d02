/* CUPTI activity: buffers, parsing, the record store and reference-counted kinds.
 *
 * Threads: CUPTI calls buffer_requested on whichever thread needs a buffer (often one that is
 * launching a kernel) and buffer_completed on its own worker thread or inside
 * cuptiActivityFlushAll; neither holds the GIL nor touches Python. The store and the kernel-name
 * table are guarded by `store_lock`; the free list of buffers by `buffer_lock`. Everything else
 * here runs with the GIL held. */
#include "activity.h"
#include "core/cupti_loader.h"
#include "core/device.h"
#include "core/errors.h"
#include "gpu_wait.h"
#include "kernel_names.h"
#include "core/util.h"

#include <cupti.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* 8 MiB holds ~30k kernel records: 0 dropped records for 50k kernels in our measurements. */
#define GP_BUFFER_BYTES ((size_t)8 << 20)
#define GP_BUFFER_ALIGN 8
/* Completed buffers kept for reuse; more are freed. */
#define GP_FREE_BUFFERS 16

/* ---- the store ------------------------------------------------------------------------------ */

typedef struct {
    char *data;
    size_t n, cap, elem;
} vec_t;

static pthread_mutex_t store_lock = PTHREAD_MUTEX_INITIALIZER;
static vec_t kernels = {.elem = sizeof(gp_kernel_out)};
static vec_t memcpys = {.elem = sizeof(gp_memcpy_out)};
static vec_t memsets = {.elem = sizeof(gp_memset_out)};
static vec_t memories = {.elem = sizeof(gp_memory_out)};
static vec_t extcorrs = {.elem = sizeof(gp_extcorr_out)};
static vec_t region_streams = {.elem = sizeof(gp_region_stream_out)};
static uint64_t lost; /* records parsed but not stored (out of memory) */

/* A zeroed slot at the end of `v`, or NULL (record counted as lost). store_lock held. */
static void *
vec_push(vec_t *v)
{
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

static void
add_kernel(const CUpti_ActivityKernel10 *k)
{
    gp_kernel_out *o = vec_push(&kernels);
    if (o == NULL)
        return;
    o->start = k->start;
    o->end = k->end;
    o->correlation_id = k->correlationId;
    o->name_id = gp_kernel_name_intern(k->name);
    o->device = k->deviceId;
    o->context = k->contextId;
    o->stream = k->streamId;
    o->grid[0] = k->gridX;
    o->grid[1] = k->gridY;
    o->grid[2] = k->gridZ;
    o->block[0] = k->blockX;
    o->block[1] = k->blockY;
    o->block[2] = k->blockZ;
    o->static_smem = k->staticSharedMemory;
    o->dynamic_smem = k->dynamicSharedMemory;
    o->local_mem_per_thread = k->localMemoryPerThread;
    o->smem_executed = k->sharedMemoryExecuted;
    o->graph_id = k->graphId;
    o->registers_per_thread = k->registersPerThread;
    o->launch_type = k->launchType;
}

static void
add_memcpy(const CUpti_ActivityMemcpy6 *m)
{
    gp_memcpy_out *o = vec_push(&memcpys);
    if (o == NULL)
        return;
    o->start = m->start;
    o->end = m->end;
    o->bytes = m->bytes;
    o->correlation_id = m->correlationId;
    o->runtime_correlation_id = m->runtimeCorrelationId;
    o->device = m->deviceId;
    o->context = m->contextId;
    o->stream = m->streamId;
    o->copy_kind = m->copyKind;
    o->src_kind = m->srcKind;
    o->dst_kind = m->dstKind;
    o->flags = m->flags;
}

static void
add_memset(const CUpti_ActivityMemset4 *m)
{
    gp_memset_out *o = vec_push(&memsets);
    if (o == NULL)
        return;
    o->start = m->start;
    o->end = m->end;
    o->bytes = m->bytes;
    o->correlation_id = m->correlationId;
    o->device = m->deviceId;
    o->context = m->contextId;
    o->stream = m->streamId;
    o->value = m->value;
    o->memory_kind = m->memoryKind;
    o->flags = m->flags;
}

static void
add_memory(const CUpti_ActivityMemory4 *m)
{
    gp_memory_out *o = vec_push(&memories);
    if (o == NULL)
        return;
    o->timestamp = m->timestamp;
    o->address = m->address;
    o->bytes = m->bytes;
    o->correlation_id = m->correlationId;
    o->device = m->deviceId;
    o->context = m->contextId;
    o->stream = m->streamId;
    o->operation = (uint8_t)m->memoryOperationType;
    o->memory_kind = (uint8_t)m->memoryKind;
    o->is_async = m->isAsync != 0;
}

static void
add_extcorr(const CUpti_ActivityExternalCorrelation *e)
{
    if (e->externalKind != GP_EXTERNAL_KIND)
        return; /* another tool's ids */
    gp_extcorr_out *o = vec_push(&extcorrs);
    if (o == NULL)
        return;
    o->external_id = e->externalId;
    o->correlation_id = e->correlationId;
}

static void
parse_buffer(uint8_t *buffer, size_t valid)
{
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&store_lock);
    while (gp_cupti.cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        switch (rec->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
            add_kernel((const CUpti_ActivityKernel10 *)rec);
            break;
        case CUPTI_ACTIVITY_KIND_MEMCPY:
            add_memcpy((const CUpti_ActivityMemcpy6 *)rec);
            break;
        case CUPTI_ACTIVITY_KIND_MEMSET:
            add_memset((const CUpti_ActivityMemset4 *)rec);
            break;
        case CUPTI_ACTIVITY_KIND_MEMORY2:
            add_memory((const CUpti_ActivityMemory4 *)rec);
            break;
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
            add_extcorr((const CUpti_ActivityExternalCorrelation *)rec);
            break;
        default: /* RUNTIME and DRIVER records: enabled only so that external ids are recorded */
            break;
        }
    }
    pthread_mutex_unlock(&store_lock);
}

void
gp_activity_note_region_stream(int64_t record, uint32_t device, uint32_t stream, int before)
{
    pthread_mutex_lock(&store_lock);
    gp_region_stream_out *o = vec_push(&region_streams);
    if (o != NULL) {
        o->record = record;
        o->device = device;
        o->stream = stream;
        o->before = before != 0;
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
        b = aligned_alloc(GP_BUFFER_ALIGN, GP_BUFFER_BYTES);
    pthread_mutex_lock(&buffer_lock);
    if (b == NULL)
        buffers_refused++; /* CUPTI drops records and counts them as dropped */
    else
        buffers_allocated++;
    pthread_mutex_unlock(&buffer_lock);
    *buffer = b;
    *size = b ? GP_BUFFER_BYTES : 0;
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

/* ---- kinds (GIL held) ----------------------------------------------------------------------- */

#define N_KINDS 5
static int refs[N_KINDS];
static int registered; /* our buffer callbacks were registered: flushing means something */
static int session;    /* kinds are in use: we hold a claim on the CUPTI subscriber */

static const CUpti_ActivityKind kind_lists[N_KINDS][3] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
    {CUPTI_ACTIVITY_KIND_MEMCPY},
    {CUPTI_ACTIVITY_KIND_MEMSET},
    {CUPTI_ACTIVITY_KIND_MEMORY2},
    /* External ids are attached to API records: launches go through the runtime (torch, CuPy)
     * or straight to the driver (Triton), so both kinds are needed; their records are ignored. */
    {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME,
     CUPTI_ACTIVITY_KIND_DRIVER},
};
static const int kind_counts[N_KINDS] = {1, 1, 1, 1, 3};

static int
any_refs(void)
{
    for (int k = 0; k < N_KINDS; k++)
        if (refs[k] > 0)
            return 1;
    return 0;
}

static void
disable_kind(int k)
{
    for (int j = kind_counts[k] - 1; j >= 0; j--)
        (void)gp_cupti.cuptiActivityDisable(kind_lists[k][j]);
}

static int (*regions_hook)(int on);

void
gp_activity_set_regions_hook(int (*hook)(int on))
{
    regions_hook = hook;
}

static int
enable_kind(int k)
{
    for (int j = 0; j < kind_counts[k]; j++)
        GP_CUPTI_CHECK(gp_cupti.cuptiActivityEnable(kind_lists[k][j]));
    if ((1u << k) == GP_ACT_REGIONS && regions_hook != NULL && regions_hook(1) < 0)
        goto error;
    return 0;
error:
    disable_kind(k);
    return -1;
}

/* First user: CUPTI, a device, the process's subscriber, our buffer callbacks. CUPTI is loaded
 * first so that a missing one is reported even on a machine without a GPU. Callbacks are
 * registered at every session start in case another tool replaced them in between. */
static int
begin_session(void)
{
    if (gp_cupti_load() < 0 || gp_require_device() < 0 || gp_cupti_subscribe() < 0)
        return -1;
    GP_CUPTI_CHECK(gp_cupti.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    registered = 1;
    session = 1;
    return 0;
error:
    gp_cupti_release();
    return -1;
}

int
gp_activity_acquire(unsigned mask)
{
    if ((mask & GP_ACT_ALL) == 0)
        return 0;
    if (!any_refs() && begin_session() < 0)
        return -1;
    unsigned done = 0;
    for (int k = 0; k < N_KINDS; k++) {
        if (!(mask & (1u << k)))
            continue;
        if (refs[k] == 0 && enable_kind(k) < 0)
            goto error;
        refs[k]++;
        done |= 1u << k;
    }
    return 0;
error:;
    gp_exc_state saved;
    gp_exc_save(&saved);
    (void)gp_activity_release(done);
    PyErr_Clear();
    gp_exc_restore(&saved);
    return -1;
}

int
gp_activity_release(unsigned mask)
{
    int rc = 0;
    for (int k = N_KINDS - 1; k >= 0; k--) {
        if (!(mask & (1u << k)) || refs[k] == 0)
            continue;
        if (--refs[k] > 0)
            continue;
        if ((1u << k) == GP_ACT_REGIONS && regions_hook != NULL)
            regions_hook(0);
        for (int j = kind_counts[k] - 1; j >= 0; j--) {
            CUptiResult res = gp_cupti.cuptiActivityDisable(kind_lists[k][j]);
            if (res != CUPTI_SUCCESS && rc == 0) {
                gp_set_cupti_error(res, "cuptiActivityDisable", __FILE__, __LINE__);
                rc = -1;
            }
        }
    }
    if (session && !any_refs()) {
        gp_cupti_release(); /* the session's claim on the subscriber, taken in begin_session */
        session = 0;
    }
    return rc;
}

/* ---- Python entry points -------------------------------------------------------------------- */

static int
parse_mask(PyObject *arg, unsigned *mask)
{
    int m;
    if (gp_as_int(arg, "activity kinds", &m) < 0)
        return -1;
    if (m < 0 || (m & ~GP_ACT_ALL)) {
        PyErr_Format(PyExc_ValueError, "activity kinds must be a mask of 0..%d, got %d", GP_ACT_ALL,
                     m);
        return -1;
    }
    *mask = (unsigned)m;
    return 0;
}

static PyObject *
activity_acquire(PyObject *module, PyObject *arg)
{
    unsigned mask;
    if (parse_mask(arg, &mask) < 0 || gp_activity_acquire(mask) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
activity_release(PyObject *module, PyObject *arg)
{
    unsigned mask;
    if (parse_mask(arg, &mask) < 0 || gp_activity_release(mask) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* _activity_flush(wait): optionally wait for the GPU (interruptible), then have CUPTI hand over
 * every buffer, complete or not. Before our first session there is nothing to flush. */
static PyObject *
activity_flush(PyObject *module, PyObject *arg)
{
    int wait = PyObject_IsTrue(arg);
    if (wait < 0)
        return NULL;
    if (!registered)
        Py_RETURN_NONE;
    if (wait && gp_wait_devices() < 0)
        return NULL;
    CUptiResult res;
    Py_BEGIN_ALLOW_THREADS
    res = gp_cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    Py_END_ALLOW_THREADS
    GP_CUPTI_CHECK(res);
    Py_RETURN_NONE;
error:
    return NULL;
}

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

/* _activity_take() -> dict: every record parsed since the last take, as packed structs, with the
 * kernel-name table and the dropped count. */
static PyObject *
activity_take(PyObject *module, PyObject *unused)
{
    vec_t k, c, s, m, e, v;
    uint64_t our_lost, dropped;
    pthread_mutex_lock(&store_lock);
    k = kernels, c = memcpys, s = memsets, m = memories, e = extcorrs, v = region_streams;
    kernels.data = memcpys.data = memsets.data = memories.data = extcorrs.data = NULL;
    kernels.n = memcpys.n = memsets.n = memories.n = extcorrs.n = 0;
    kernels.cap = memcpys.cap = memsets.cap = memories.cap = extcorrs.cap = 0;
    region_streams.data = NULL;
    region_streams.n = region_streams.cap = 0;
    our_lost = lost;
    lost = 0;
    pthread_mutex_unlock(&store_lock);
    PyObject *names = names_list();
    PyObject *kb = vec_take(&k), *cb = vec_take(&c), *sb = vec_take(&s), *mb = vec_take(&m),
             *eb = vec_take(&e), *vb = vec_take(&v);
    if (names == NULL || !kb || !cb || !sb || !mb || !eb || !vb ||
        take_dropped(our_lost, &dropped) < 0)
        goto error;
    return Py_BuildValue("{s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:K}", "kernels", kb, "memcpy", cb,
                         "memset", sb, "memory", mb, "extcorr", eb, "region_streams", vb, "names", names,
                         "dropped", (unsigned long long)dropped);
error:
    Py_XDECREF(vb);
    Py_XDECREF(names);
    Py_XDECREF(kb);
    Py_XDECREF(cb);
    Py_XDECREF(sb);
    Py_XDECREF(mb);
    Py_XDECREF(eb);
    return NULL;
}

static PyObject *
activity_state(PyObject *module, PyObject *unused)
{
    pthread_mutex_lock(&buffer_lock);
    unsigned long long allocated = buffers_allocated, refused = buffers_refused;
    int free_count = n_free;
    pthread_mutex_unlock(&buffer_lock);
    return Py_BuildValue("{s:{s:i,s:i,s:i,s:i,s:i},s:K,s:K,s:i,s:n}", "refs", "kernel", refs[0],
                         "memcpy", refs[1], "memset", refs[2], "memory", refs[3], "regions",
                         refs[4], "buffers_in_cupti", allocated, "buffers_refused", refused,
                         "buffers_free", free_count, "buffer_bytes", (Py_ssize_t)GP_BUFFER_BYTES);
}

/* _clock_offset() -> (offset_ns, uncertainty_ns): CUPTI timestamp minus CLOCK_MONOTONIC, from
 * the tightest of several bracketed readings. */
static PyObject *
clock_offset(PyObject *module, PyObject *unused)
{
    if (gp_cupti_load() < 0)
        return NULL;
    int64_t best_width = INT64_MAX, best_offset = 0;
    for (int trial = 0; trial < 16; trial++) {
        uint64_t ts = 0;
        int64_t h0 = gp_now_ns();
        GP_CUPTI_CHECK(gp_cupti.cuptiGetTimestamp(&ts));
        int64_t h1 = gp_now_ns();
        if (h1 - h0 < best_width) {
            best_width = h1 - h0;
            best_offset = (int64_t)ts - (h0 + (h1 - h0) / 2);
        }
    }
    return Py_BuildValue("(LL)", (long long)best_offset, (long long)(best_width / 2 + 1));
error:
    return NULL;
}

static PyObject *
cupti_timestamp(PyObject *module, PyObject *unused)
{
    uint64_t ts = 0;
    if (gp_cupti_load() < 0)
        return NULL;
    GP_CUPTI_CHECK(gp_cupti.cuptiGetTimestamp(&ts));
    return PyLong_FromUnsignedLongLong(ts);
error:
    return NULL;
}

/* _intern_kernel_names(names) -> list: interns and demangles names as CUPTI's would be (tests). */
static PyObject *
demangle(PyObject *module, PyObject *seq)
{
    PyObject *fast = PySequence_Fast(seq, "_intern_kernel_names takes a sequence of str");
    if (fast == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject *out = PyList_New(n);
    for (Py_ssize_t k = 0; out != NULL && k < n; k++) {
        const char *s = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(fast, k));
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

/* _activity_layouts() -> {struct: [(field, offset), ...]}: lets a test check that the NumPy
 * mirrors in gpuprofile/_activity.py match these structs. */
#define GP_FIELD(type, field) {#field, offsetof(type, field)}
typedef struct {
    const char *name;
    size_t offset;
} field_t;

static PyObject *
layout_list(const field_t *fields, size_t n)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t k = 0; list != NULL && k < n; k++) {
        PyObject *item = Py_BuildValue("(sn)", fields[k].name, (Py_ssize_t)fields[k].offset);
        if (item == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)k, item);
    }
    return list;
}

static PyObject *
activity_layouts(PyObject *module, PyObject *unused)
{
    static const field_t kernel[] = {
        GP_FIELD(gp_kernel_out, start), GP_FIELD(gp_kernel_out, correlation_id),
        GP_FIELD(gp_kernel_out, name_id), GP_FIELD(gp_kernel_out, stream),
        GP_FIELD(gp_kernel_out, grid), GP_FIELD(gp_kernel_out, block),
        GP_FIELD(gp_kernel_out, static_smem), GP_FIELD(gp_kernel_out, local_mem_per_thread),
        GP_FIELD(gp_kernel_out, graph_id), GP_FIELD(gp_kernel_out, registers_per_thread),
        GP_FIELD(gp_kernel_out, launch_type)};
    static const field_t memcpy_[] = {
        GP_FIELD(gp_memcpy_out, bytes), GP_FIELD(gp_memcpy_out, runtime_correlation_id),
        GP_FIELD(gp_memcpy_out, stream), GP_FIELD(gp_memcpy_out, copy_kind),
        GP_FIELD(gp_memcpy_out, flags)};
    static const field_t memset_[] = {
        GP_FIELD(gp_memset_out, bytes), GP_FIELD(gp_memset_out, stream),
        GP_FIELD(gp_memset_out, value), GP_FIELD(gp_memset_out, memory_kind),
        GP_FIELD(gp_memset_out, flags)};
    static const field_t memory[] = {
        GP_FIELD(gp_memory_out, timestamp), GP_FIELD(gp_memory_out, bytes),
        GP_FIELD(gp_memory_out, stream), GP_FIELD(gp_memory_out, operation),
        GP_FIELD(gp_memory_out, is_async)};
    static const field_t extcorr[] = {GP_FIELD(gp_extcorr_out, external_id),
                                      GP_FIELD(gp_extcorr_out, correlation_id)};
    static const field_t region_stream[] = {
        GP_FIELD(gp_region_stream_out, record), GP_FIELD(gp_region_stream_out, device),
        GP_FIELD(gp_region_stream_out, stream), GP_FIELD(gp_region_stream_out, before)};
#define GP_N(a) (sizeof a / sizeof a[0])
    return Py_BuildValue("{s:N,s:N,s:N,s:N,s:N,s:N}", "kernel", layout_list(kernel, GP_N(kernel)),
                         "memcpy", layout_list(memcpy_, GP_N(memcpy_)), "memset",
                         layout_list(memset_, GP_N(memset_)), "memory",
                         layout_list(memory, GP_N(memory)), "extcorr",
                         layout_list(extcorr, GP_N(extcorr)), "region_stream",
                         layout_list(region_stream, GP_N(region_stream)));
#undef GP_N
}

static PyMethodDef activity_methods[] = {
    {"_activity_acquire", activity_acquire, METH_O, "Enable a mask of activity kinds (refcounted)."},
    {"_activity_release", activity_release, METH_O, "Release a mask of activity kinds."},
    {"_activity_flush", activity_flush, METH_O,
     "_activity_flush(wait): wait for the GPU if asked, then flush CUPTI's buffers."},
    {"_activity_take", activity_take, METH_NOARGS, "Take every parsed record (packed structs)."},
    {"_activity_state", activity_state, METH_NOARGS, "Kind reference counts and buffer counters."},
    {"_clock_offset", clock_offset, METH_NOARGS,
     "(offset_ns, uncertainty_ns): CUPTI timestamp minus time.monotonic_ns()."},
    {"_cupti_timestamp", cupti_timestamp, METH_NOARGS, "cuptiGetTimestamp() in ns."},
    {"_intern_kernel_names", demangle, METH_O, "[(id, demangled)] for kernel names (tests)."},
    {"_activity_layouts", activity_layouts, METH_NOARGS, "Field offsets of the record structs."},
    {NULL, NULL, 0, NULL},
};

int
gp_activity_init(PyObject *module)
{
    return PyModule_AddFunctions(module, activity_methods);
}
