/* The region observer behind kernel attribution and memory=True regions. Observers run with the
 * GIL held, on the thread that enters or exits the region. */
#include "attribution.h"
#include "activity.h"
#include "core/cupti_loader.h"
#include "core/device.h"
#include "core/errors.h"
#include "regions/regions.h"
#include "core/util.h"

/* Deeper region nests than this are attributed to their 256th level. */
#define GP_MAX_PUSHED 256

typedef struct {
    int64_t ids[GP_MAX_PUSHED];
    int n;
} id_stack;

/* Region records whose external id this thread pushed, and memory=True regions holding memory
 * tracking, innermost last. Regions nest strictly per thread, so an exit finds its own record on
 * top or not at all (not pushed: entered while tracing was off, or too deep). */
static _Thread_local id_stack pushed;
static _Thread_local id_stack tracked;

static int tracing;
static unsigned long long memory_entries, pop_errors;

static int
push_id(int64_t rec)
{
    if (pushed.n == GP_MAX_PUSHED)
        return 0;
    GP_CUPTI_CHECK(gp_cupti.cuptiActivityPushExternalCorrelationId(GP_EXTERNAL_KIND,
                                                                   (uint64_t)rec + 1));
    pushed.ids[pushed.n++] = rec;
    return 0;
error:
    return -1;
}

static void
pop_id(void)
{
    uint64_t last = 0;
    if (gp_cupti.cuptiActivityPopExternalCorrelationId(GP_EXTERNAL_KIND, &last) != CUPTI_SUCCESS)
        pop_errors++;
    pushed.n--;
}

/* After an exit, the parent becomes innermost: make sure it is the one on top. */
static void
push_innermost(void)
{
    int64_t inner = gp_region_innermost();
    if (inner < 0 || (pushed.n > 0 && pushed.ids[pushed.n - 1] == inner))
        return;
    if (push_id(inner) < 0) {
        PyErr_Clear(); /* an exit cannot raise; the miss shows as unattributed kernels */
        pop_errors++;
    }
}

int
gp_attribution_set_tracing(int on)
{
    if (on) {
        tracing = 1;
        int64_t inner = gp_region_innermost();
        if (inner >= 0 && (pushed.n == 0 || pushed.ids[pushed.n - 1] != inner) &&
            push_id(inner) < 0) {
            tracing = 0;
            return -1;
        }
        return 0;
    }
    tracing = 0;
    while (pushed.n > 0)
        pop_id();
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
    if (tracked.n == 0 || tracked.ids[tracked.n - 1] != rec)
        return;
    tracked.n--;
    if (gp_activity_release(GP_ACT_MEMORY) < 0)
        PyErr_Clear(); /* an exit cannot raise; CUPTI keeps MEMORY2 on, which costs nothing */
}

static int
observe_enter(int64_t rec, void *unused)
{
    int memory = gp_region_record_memory(rec);
    if (memory && memory_enter(rec) < 0)
        return -1;
    if (tracing && push_id(rec) < 0) {
        if (memory)
            memory_exit(rec);
        return -1;
    }
    return 0;
}

static void
observe_exit(int64_t rec, void *unused)
{
    if (pushed.n > 0 && pushed.ids[pushed.n - 1] == rec)
        pop_id();
    if (tracing)
        push_innermost();
    memory_exit(rec);
}

static const gp_region_observer observer = {observe_enter, observe_exit, NULL};

static PyObject *
attribution_state(PyObject *module, PyObject *unused)
{
    return Py_BuildValue("{s:O,s:i,s:i,s:K,s:K}", "tracing", tracing ? Py_True : Py_False,
                         "pushed_on_this_thread", pushed.n, "memory_regions_open_on_this_thread",
                         tracked.n, "memory_region_entries", memory_entries, "pop_errors",
                         pop_errors);
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
