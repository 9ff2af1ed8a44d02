/* CUPTI activity: buffers, parsing, the record store and reference-counted kinds.
 *
 * Everything here runs with the GIL held; the records themselves are records.c's. */
#include "activity.h"
#include "records.h"
#include "core/cupti_loader.h"
#include "core/device.h"
#include "core/errors.h"
#include "gpu_wait.h"
#include "core/util.h"

#include <cupti.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- kinds (GIL held) ----------------------------------------------------------------------- */

#define N_KINDS 6
static int refs[N_KINDS];
static int session; /* kinds are in use: we hold a claim on the CUPTI subscriber */

static const CUpti_ActivityKind kind_lists[N_KINDS][3] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
    {CUPTI_ACTIVITY_KIND_MEMCPY},
    {CUPTI_ACTIVITY_KIND_MEMSET},
    {CUPTI_ACTIVITY_KIND_MEMORY2},
    /* External ids are attached to API records: launches go through the runtime (torch, CuPy)
     * or straight to the driver (Triton), so both kinds are needed; their records are ignored. */
    {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME,
     CUPTI_ACTIVITY_KIND_DRIVER},
    /* API (Python lines: which runtime launch each driver launch ran inside): the records of
     * launch calls only, enabled by callback id below, or nothing when REGIONS has them all. */
    {0},
};
static const int kind_counts[N_KINDS] = {1, 1, 1, 1, 3, 0};
#define API_GROUP 5

/* Users of each CUPTI kind, over all groups above. */
#define GP_MAX_CUPTI_KIND 128
static int cupti_refs[GP_MAX_CUPTI_KIND];

static int
any_refs(void)
{
    for (int k = 0; k < N_KINDS; k++)
        if (refs[k] > 0)
            return 1;
    return 0;
}

_Static_assert(CUPTI_ACTIVITY_KIND_COUNT <= GP_MAX_CUPTI_KIND, "cupti_refs too small");

/* Drops one user of the first `j` CUPTI kinds of group k, disabling those no other group uses.
 * If CUPTI refuses one and *rc is 0, sets CuptiError and *rc = -1 (the first error is the one
 * reported; pass *rc = -1 to set none). */
static void
drop_kinds(int k, int j, int *rc)
{
    while (--j >= 0) {
        CUpti_ActivityKind kind = kind_lists[k][j];
        if (--cupti_refs[kind] > 0)
            continue;
        CUptiResult res = gp_cupti.cuptiActivityDisable(kind);
        if (res != CUPTI_SUCCESS && *rc == 0) {
            gp_set_cupti_error(res, "cuptiActivityDisable", __FILE__, __LINE__);
            *rc = -1;
        }
    }
}

/* ---- API records of launches, by callback id ------------------------------------------------ */

static const CUpti_CallbackId *api_cbids[2]; /* runtime, driver */
static size_t n_api_cbids[2];
static int api_by_cbid; /* the API group turned records on by callback id (its kinds were off) */

void
gp_activity_set_api_cbids(const CUpti_CallbackId *runtime, size_t n_runtime,
                          const CUpti_CallbackId *driver, size_t n_driver)
{
    api_cbids[0] = runtime;
    n_api_cbids[0] = n_runtime;
    api_cbids[1] = driver;
    n_api_cbids[1] = n_driver;
}

static CUptiResult
api_by_cbid_set(uint8_t on)
{
    CUptiResult first = CUPTI_SUCCESS;
    for (int d = 0; d < 2; d++)
        for (size_t k = 0; k < n_api_cbids[d]; k++) {
            CUptiResult res = d == 0 ? gp_cupti.cuptiActivityEnableRuntimeApi(api_cbids[d][k], on)
                                     : gp_cupti.cuptiActivityEnableDriverApi(api_cbids[d][k], on);
            if (res != CUPTI_SUCCESS && first == CUPTI_SUCCESS)
                first = res;
        }
    return first;
}

/* Whether REGIONS has every API record on (RUNTIME and DRIVER enabled as kinds). */
static int
api_kinds_on(void)
{
    return cupti_refs[CUPTI_ACTIVITY_KIND_RUNTIME] > 0 ||
           cupti_refs[CUPTI_ACTIVITY_KIND_DRIVER] > 0;
}

/* The kinds' settings override the callback ids' (CUPTI): while REGIONS holds RUNTIME and DRIVER,
 * every record is on and nothing is set here; a profile acquires REGIONS before API and releases
 * API first, so the two never undo each other. */
static int
api_enable(void)
{
    if (api_kinds_on())
        return 0;
    CUptiResult res = api_by_cbid_set(1);
    if (res != CUPTI_SUCCESS) {
        (void)api_by_cbid_set(0);
        gp_set_cupti_error(res, "cuptiActivityEnableRuntimeApi/DriverApi", __FILE__, __LINE__);
        return -1;
    }
    api_by_cbid = 1;
    return 0;
}

static void
api_disable(int *rc)
{
    if (!api_by_cbid)
        return;
    api_by_cbid = 0;
    if (api_kinds_on())
        return; /* the kinds were turned on since: turning ids off would cut their records */
    CUptiResult res = api_by_cbid_set(0);
    if (res != CUPTI_SUCCESS && *rc == 0) {
        gp_set_cupti_error(res, "cuptiActivityEnableRuntimeApi/DriverApi", __FILE__, __LINE__);
        *rc = -1;
    }
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
    if (k == API_GROUP)
        return api_enable();
    int j = 0;
    for (; j < kind_counts[k]; j++) {
        CUpti_ActivityKind kind = kind_lists[k][j];
        if (cupti_refs[kind] == 0)
            GP_CUPTI_CHECK(gp_cupti.cuptiActivityEnable(kind));
        cupti_refs[kind]++;
    }
    if ((1u << k) == GP_ACT_REGIONS && regions_hook != NULL && regions_hook(1) < 0)
        goto error;
    return 0;
error:;
    int quiet = -1; /* the enable's error is the one to see */
    drop_kinds(k, j, &quiet);
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
    if (gp_records_register() < 0)
        goto error;
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
        if (k == API_GROUP)
            api_disable(&rc);
        else
            drop_kinds(k, kind_counts[k], &rc);
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

/* _activity_acquire(mask, held=None): enable the kinds; with `held` (a list), append the mask to it
 * before returning. A Ctrl-C is raised after a C call returns, before Python stores anything, so
 * the caller learns from `held`, not from the call returning, whether it must release. */
static PyObject *
activity_acquire(PyObject *module, PyObject *args)
{
    PyObject *arg, *held = Py_None;
    unsigned mask;
    if (!PyArg_ParseTuple(args, "O|O:_activity_acquire", &arg, &held))
        return NULL;
    if (held != Py_None && !PyList_Check(held))
        return PyErr_Format(PyExc_TypeError, "_activity_acquire: held must be a list, not %.80s",
                            Py_TYPE(held)->tp_name);
    if (parse_mask(arg, &mask) < 0 || gp_activity_acquire(mask) < 0)
        return NULL;
    if (held != Py_None) {
        PyObject *m = PyLong_FromUnsignedLong(mask);
        if (m == NULL || PyList_Append(held, m) < 0) {
            Py_XDECREF(m);
            (void)gp_activity_release(mask);
            return NULL;
        }
        Py_DECREF(m);
    }
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
    if (!gp_records_registered())
        Py_RETURN_NONE;
    unsigned long long in_cupti, refused;
    int kept;
    gp_records_buffer_stats(&in_cupti, &refused, &kept);
    if (!any_refs() && in_cupti == 0)
        Py_RETURN_NONE; /* nothing enabled and no buffer in CUPTI's hands: no record can come */
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

static PyObject *
activity_state(PyObject *module, PyObject *unused)
{
    unsigned long long allocated, refused;
    int free_count;
    gp_records_buffer_stats(&allocated, &refused, &free_count);
    return Py_BuildValue("{s:{s:i,s:i,s:i,s:i,s:i,s:i},s:K,s:K,s:i,s:n}", "refs", "kernel", refs[0],
                         "memcpy", refs[1], "memset", refs[2], "memory", refs[3], "regions",
                         refs[4], "api", refs[5], "buffers_in_cupti", allocated, "buffers_refused",
                         refused, "buffers_free", free_count, "buffer_bytes",
                         (Py_ssize_t)GP_RECORDS_BUFFER_BYTES);
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

static PyMethodDef activity_methods[] = {
    {"_activity_acquire", activity_acquire, METH_VARARGS,
     "_activity_acquire(mask, held=None): enable a mask of activity kinds (refcounted); the mask "
     "is appended to the list `held` once enabled."},
    {"_activity_release", activity_release, METH_O, "Release a mask of activity kinds."},
    {"_activity_flush", activity_flush, METH_O,
     "_activity_flush(wait): wait for the GPU if asked, then flush CUPTI's buffers."},
    {"_activity_state", activity_state, METH_NOARGS, "Kind reference counts and buffer counters."},
    {"_clock_offset", clock_offset, METH_NOARGS,
     "(offset_ns, uncertainty_ns): CUPTI timestamp minus time.monotonic_ns()."},
    {"_cupti_timestamp", cupti_timestamp, METH_NOARGS, "cuptiGetTimestamp() in ns."},
    {NULL, NULL, 0, NULL},
};

int
gp_activity_init(PyObject *module)
{
    return PyModule_AddFunctions(module, activity_methods);
}
