/* The region observer behind kernel attribution and memory=True regions. Observers run with the
 * GIL held, on the thread that enters or exits the region. */
#include "attribution.h"
#include "activity.h"
#include "records.h"
#include "core/cupti_loader.h"
#include "core/device.h"
#include "core/events.h" /* GP_MAX_DEVICES */
#include "core/errors.h"
#include "core/util.h"
#include "core/context.h"
#include "regions/regions.h"

#include <string.h>

/* Deeper region nests than this are attributed to their 256th level. */
#define GP_MAX_PUSHED 256

typedef struct {
    int64_t ids[GP_MAX_PUSHED];
    int n;
} id_stack;

/* Region records this thread is inside while tracing (its calls are noted with the innermost),
 * and memory=True regions holding memory
 * tracking, innermost last. An exit usually finds its own record on top; regions of asyncio
 * tasks that interleave on the thread may close in any order (remove_id); a record
 * not there was entered while tracing was off, or too deep. */
static _Thread_local id_stack pushed;
static _Thread_local id_stack tracked;

static int tracing;
static unsigned long long memory_entries, stream_errors;
static int last_stream_error; /* CUPTI's (or -1: no context) for the last stream not named */

static void
push_id(int64_t rec)
{
    if (pushed.n < GP_MAX_PUSHED)
        pushed.ids[pushed.n++] = rec;
}

/* Takes `rec` out of `s` wherever it is: regions of asyncio tasks that interleave on a thread
 * close in any order. 0 if it was not there (entered while tracing was off, or too deep). */
static int
remove_id(id_stack *s, int64_t rec)
{
    int k = s->n - 1;
    while (k >= 0 && s->ids[k] != rec)
        k--;
    if (k < 0)
        return 0;
    memmove(&s->ids[k], &s->ids[k + 1], (size_t)(s->n - 1 - k) * sizeof rec);
    s->n--;
    return 1;
}

/* Each watched call (gp_activity_regions_callbacks) made while tracing, on a thread inside a
 * region, is noted with that thread's innermost region: what CUPTI's external correlation
 * records gave. Runs on the calling thread, without the GIL; `pushed` is that thread's own,
 * written only by it (region enter and exit). */
static uint8_t watched[2][1024];

/* The highest correlation id of a watched call made while tracing, on any thread: what a region
 * on the CUPTI clock notes as its bounds at enter and exit instead of recording events (a call
 * made after the enter has a higher id; CUPTI numbers calls in the order they are made). Kept
 * from the start of tracing, not only while the clock is on, so that a region entered just
 * after the clock went on does not reach back to calls made since tracing started. */
static uint32_t last_call;

static void
note_last_call(uint32_t id)
{
    uint32_t seen = __atomic_load_n(&last_call, __ATOMIC_RELAXED);
    while (id > seen && !__atomic_compare_exchange_n(&last_call, &seen, id, 1, __ATOMIC_RELAXED,
                                                     __ATOMIC_RELAXED))
        ;
}

static void
handler(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *cbdata)
{
    if (!__atomic_load_n(&tracing, __ATOMIC_ACQUIRE) || cbid >= 1024)
        return;
    int d = domain == CUPTI_CB_DOMAIN_DRIVER_API;
    if ((!d && domain != CUPTI_CB_DOMAIN_RUNTIME_API) || !watched[d][cbid])
        return;
    const CUpti_CallbackData *data = cbdata;
    if (data->callbackSite != CUPTI_API_ENTER)
        return;
    note_last_call(data->correlationId);
    if (pushed.n > 0)
        gp_records_note_call(data->correlationId, (uint64_t)pushed.ids[pushed.n - 1] + 1);
}

static int handler_added;
static int callbacks_on;

static int
watch_calls(int on)
{
    size_t n;
    const gp_cupti_callback *cbs = gp_activity_regions_callbacks(&n);
    if (!on) {
        if (callbacks_on) {
            callbacks_on = 0;
            (void)gp_cupti_callbacks_off(cbs, n);
        }
        return 0;
    }
    if (!handler_added) {
        for (size_t k = 0; k < n; k++)
            if (cbs[k].cbid < 1024)
                watched[cbs[k].domain == CUPTI_CB_DOMAIN_DRIVER_API][cbs[k].cbid] = 1;
        if (gp_cupti_add_handler(handler, NULL) < 0)
            return -1;
        handler_added = 1;
    }
    if (gp_cupti_callbacks_on(cbs, n) < 0)
        return -1;
    callbacks_on = 1;
    return 0;
}

/* Notes which CUPTI stream region `rec` records its events on, for the stream rule
 * (gpuprofile/tracing/attribution.py): work on that stream enqueued between the region's two
 * cudaEventRecord calls ran inside the region, whichever thread enqueued it. A stream CUPTI
 * cannot name is noted as UINT32_MAX (no stream rule for that region) and counted. `before`:
 * the region was open before tracing started. A region on the CUPTI clock records no events:
 * its enter notes `edge` GP_EDGE_ENTER with the last call's correlation id as its bound. */
/* CUPTI's ids of each device's two default streams (legacy, per-thread), looked up once per
 * tracing session: a default stream's handle never names another stream, so regions on it (the
 * usual case: stream=None, PyTorch's default stream) skip cuStreamGetCtx and
 * cuptiGetStreamIdEx at enter. A created stream's handle may be reused by a later stream, so
 * those are looked up every time. GIL held. */
static uint64_t session; /* bumped when tracing starts */
static struct {
    uint64_t session;
    uint32_t id;
} default_ids[GP_MAX_DEVICES][2];

static void
note_stream(int64_t rec, int before, int edge, uint32_t bound)
{
    int device;
    cudaStream_t stream;
    if (gp_region_record_stream(rec, &device, &stream) < 0)
        return;
    /* The two default-stream handles: CUPTI takes NULL plus a per-thread flag. */
    uint8_t per_thread = stream == cudaStreamPerThread;
    int is_default = per_thread || stream == cudaStreamLegacy || stream == NULL;
    if (is_default && device >= 0 && device < GP_MAX_DEVICES &&
        default_ids[device][per_thread].session == session) {
        gp_records_note_region_stream(rec, (uint32_t)device, default_ids[device][per_thread].id,
                                      before, edge, bound);
        return;
    }
    CUstream s = is_default ? NULL : (CUstream)stream;
    CUcontext ctx = NULL;
    uint32_t id = UINT32_MAX;
    CUptiResult res = CUPTI_ERROR_UNKNOWN;
    if (gp_stream_context(stream, &ctx) < 0)
        PyErr_Clear(); /* counted below: that region gets no stream rule */
    else
        res = gp_cupti.cuptiGetStreamIdEx(ctx, s, per_thread, &id);
    if (res != CUPTI_SUCCESS) {
        id = UINT32_MAX;
        stream_errors++;
        last_stream_error = ctx == NULL ? -1 : (int)res;
    } else if (is_default && device >= 0 && device < GP_MAX_DEVICES) {
        default_ids[device][per_thread].session = session;
        default_ids[device][per_thread].id = id;
    }
    gp_records_note_region_stream(rec, (uint32_t)device, id, before, edge, bound);
}

/* After an exit, the parent becomes innermost: make sure it is the one on top. */
static void
push_innermost(void)
{
    int64_t inner = gp_region_innermost();
    if (inner < 0 || (pushed.n > 0 && pushed.ids[pushed.n - 1] == inner))
        return;
    push_id(inner);
}

int
gp_attribution_set_tracing(int on)
{
    if (on) {
        if (watch_calls(1) < 0)
            return -1;
        session++; /* default streams' ids are looked up again: the contexts may be new */
        int64_t inner = gp_region_innermost();
        if (inner >= 0 && (pushed.n == 0 || pushed.ids[pushed.n - 1] != inner))
            push_id(inner);
        if (inner >= 0)
            note_stream(inner, 1, GP_EDGE_EVENTS, 0);
        __atomic_store_n(&tracing, 1, __ATOMIC_RELEASE);
        return 0;
    }
    __atomic_store_n(&tracing, 0, __ATOMIC_RELEASE);
    (void)watch_calls(0);
    pushed.n = 0;
    return 0;
}

/* memory=True: hold MEMORY2 while the region is open. When tracking cannot start (no CUPTI,
 * another profiler holds it) the region still runs, with a warning, and has no memory peak. */
static int
memory_enter(int64_t rec)
{
    if (gp_device_count() == 0 || tracked.n == GP_MAX_PUSHED)
        return 0;
    if (gp_activity_acquire(GP_ACT_MEMORY) < 0) {
        PyObject *exc = gp_take_exception();
        int rc = PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                                  "gpuprofile: region(memory=True) cannot track device memory: %S",
                                  exc ? exc : Py_None);
        Py_XDECREF(exc);
        return rc;
    }
    tracked.ids[tracked.n++] = rec;
    memory_entries++;
    return 0;
}

static void
memory_exit(int64_t rec)
{
    if (!remove_id(&tracked, rec))
        return;
    if (gp_activity_release(GP_ACT_MEMORY) < 0)
        PyErr_Clear(); /* an exit cannot raise; CUPTI keeps MEMORY2 on, which costs nothing */
}

static int
observe_enter(int64_t rec, void *unused)
{
    int memory = gp_region_record_memory(rec);
    if (memory && memory_enter(rec) < 0)
        return -1;
    if (tracing) {
        push_id(rec);
        if (gp_region_record_cupti(rec))
            note_stream(rec, 0, GP_EDGE_ENTER, __atomic_load_n(&last_call, __ATOMIC_RELAXED));
        else
            note_stream(rec, 0, GP_EDGE_EVENTS, 0);
    }
    return 0;
}

static void
observe_exit(int64_t rec, void *unused)
{
    (void)remove_id(&pushed, rec);
    if (tracing) {
        push_innermost();
        /* Every call made before this exit has an id below the bound. */
        if (gp_region_record_cupti(rec))
            gp_records_note_region_stream(rec, 0, UINT32_MAX, 0, GP_EDGE_EXIT,
                                          __atomic_load_n(&last_call, __ATOMIC_RELAXED) + 1);
    }
    memory_exit(rec);
}

static const gp_region_observer observer = {observe_enter, observe_exit, NULL};

static PyObject *
attribution_state(PyObject *module, PyObject *unused)
{
    return Py_BuildValue("{s:O,s:i,s:i,s:K,s:K,s:i}", "tracing", tracing ? Py_True : Py_False,
                         "pushed_on_this_thread", pushed.n, "memory_regions_open_on_this_thread",
                         tracked.n, "memory_region_entries", memory_entries, "stream_errors",
                         stream_errors, "last_stream_error", last_stream_error);
}

static PyMethodDef attribution_methods[] = {
    {"_attribution_state", attribution_state, METH_NOARGS,
     "Whether region ids are pushed, and counters of the attribution observer."},
    {NULL, NULL, 0, NULL},
};

int
gp_attribution_init(PyObject *module)
{
    if (gp_regions_add_observer(&observer) < 0)
        return -1;
    gp_activity_set_regions_hook(gp_attribution_set_tracing);
    return PyModule_AddFunctions(module, attribution_methods);
}
