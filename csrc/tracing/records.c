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
#include "core/layout.h"
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

static void (*api_hook)(const CUpti_ActivityAPI *api);

void
gp_records_set_api_hook(void (*hook)(const CUpti_ActivityAPI *api))
{
    api_hook = hook;
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
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER:
            /* enabled so that external ids are recorded, and for Python lines' launches */
            if (api_hook != NULL)
                api_hook((const CUpti_ActivityAPI *)rec);
            break;
        default:
            break;
        }
    }
    pthread_mutex_unlock(&store_lock);
}

void
gp_records_note_region_stream(int64_t record, uint32_t device, uint32_t stream, int before,
                              int edge, uint32_t bound)
{
    pthread_mutex_lock(&store_lock);
    gp_region_stream_out *o = vec_push(&region_streams);
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
    gp_extcorr_out *o = vec_push(&extcorrs);
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
    return Py_BuildValue("{s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:K}", "kernels", kb, "memcpy", cb, "memset",
                         sb, "memory", mb, "extcorr", eb, "region_streams", vb, "names", names,
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

/* _activity_layouts() -> {struct: dtype dict}: the one description of the records, from which
 * gpuprofile/tracing/activity.py builds its NumPy dtypes (core/layout.h). */
#define GP_F(type, field) GP_LAYOUT_FIELD(type, field)
#define GP_AT(type, name, member)                                                                  \
    {                                                                                              \
        name, GP_LAYOUT_FORMAT(((type *)0)->member), offsetof(type, member)                        \
    }
#define GP_DTYPE(fields, type)                                                                     \
    gp_layout_dtype(fields, sizeof fields / sizeof fields[0], sizeof(type))

static PyObject *
activity_layouts(PyObject *module, PyObject *unused)
{
    static const gp_layout_field kernel[] = {GP_F(gp_kernel_out, start),
                                             GP_F(gp_kernel_out, end),
                                             GP_F(gp_kernel_out, correlation_id),
                                             GP_F(gp_kernel_out, name_id),
                                             GP_F(gp_kernel_out, device),
                                             GP_F(gp_kernel_out, context),
                                             GP_F(gp_kernel_out, stream),
                                             GP_AT(gp_kernel_out, "grid_x", grid[0]),
                                             GP_AT(gp_kernel_out, "grid_y", grid[1]),
                                             GP_AT(gp_kernel_out, "grid_z", grid[2]),
                                             GP_AT(gp_kernel_out, "block_x", block[0]),
                                             GP_AT(gp_kernel_out, "block_y", block[1]),
                                             GP_AT(gp_kernel_out, "block_z", block[2]),
                                             GP_F(gp_kernel_out, static_smem),
                                             GP_F(gp_kernel_out, dynamic_smem),
                                             GP_F(gp_kernel_out, local_mem_per_thread),
                                             GP_F(gp_kernel_out, smem_executed),
                                             GP_F(gp_kernel_out, graph_id),
                                             GP_F(gp_kernel_out, registers_per_thread),
                                             GP_F(gp_kernel_out, launch_type)};
    static const gp_layout_field memcpy_[] = {GP_F(gp_memcpy_out, start),
                                              GP_F(gp_memcpy_out, end),
                                              GP_F(gp_memcpy_out, bytes),
                                              GP_F(gp_memcpy_out, correlation_id),
                                              GP_F(gp_memcpy_out, runtime_correlation_id),
                                              GP_F(gp_memcpy_out, device),
                                              GP_F(gp_memcpy_out, context),
                                              GP_F(gp_memcpy_out, stream),
                                              GP_F(gp_memcpy_out, copy_kind),
                                              GP_F(gp_memcpy_out, src_kind),
                                              GP_F(gp_memcpy_out, dst_kind),
                                              GP_F(gp_memcpy_out, flags)};
    static const gp_layout_field memset_[] = {
        GP_F(gp_memset_out, start),       GP_F(gp_memset_out, end),
        GP_F(gp_memset_out, bytes),       GP_F(gp_memset_out, correlation_id),
        GP_F(gp_memset_out, device),      GP_F(gp_memset_out, context),
        GP_F(gp_memset_out, stream),      GP_F(gp_memset_out, value),
        GP_F(gp_memset_out, memory_kind), GP_F(gp_memset_out, flags)};
    static const gp_layout_field memory[] = {
        GP_F(gp_memory_out, timestamp),   GP_F(gp_memory_out, address),
        GP_F(gp_memory_out, bytes),       GP_F(gp_memory_out, correlation_id),
        GP_F(gp_memory_out, device),      GP_F(gp_memory_out, context),
        GP_F(gp_memory_out, stream),      GP_F(gp_memory_out, operation),
        GP_F(gp_memory_out, memory_kind), GP_F(gp_memory_out, is_async)};
    static const gp_layout_field extcorr[] = {GP_F(gp_extcorr_out, external_id),
                                              GP_F(gp_extcorr_out, correlation_id)};
    static const gp_layout_field region_stream[] = {
        GP_F(gp_region_stream_out, record), GP_F(gp_region_stream_out, device),
        GP_F(gp_region_stream_out, stream), GP_F(gp_region_stream_out, before),
        GP_F(gp_region_stream_out, edge),   GP_F(gp_region_stream_out, bound)};
    return Py_BuildValue(
        "{s:N,s:N,s:N,s:N,s:N,s:N}", "kernel", GP_DTYPE(kernel, gp_kernel_out), "memcpy",
        GP_DTYPE(memcpy_, gp_memcpy_out), "memset", GP_DTYPE(memset_, gp_memset_out), "memory",
        GP_DTYPE(memory, gp_memory_out), "extcorr", GP_DTYPE(extcorr, gp_extcorr_out),
        "region_stream", GP_DTYPE(region_stream, gp_region_stream_out));
}

static PyMethodDef records_methods[] = {
    {"_activity_take", activity_take, METH_NOARGS, "Take every parsed record (packed structs)."},
    {"_intern_kernel_names", demangle, METH_O, "[(id, demangled)] for kernel names (tests)."},
    {"_activity_layouts", activity_layouts, METH_NOARGS,
     "NumPy dtype dicts of the record structs."},
    {NULL, NULL, 0, NULL},
};

int
gp_records_init(PyObject *module)
{
    return PyModule_AddFunctions(module, records_methods);
}
