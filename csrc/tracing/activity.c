/* CUPTI activity: buffers, parsing, the record store and reference-counted kinds.
 *
 * Everything here runs with the GIL held; the records themselves are records.c's. */
#include "activity.h"
#include "records.h"
#include "core/cupti_loader.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/gpu_wait.h"
#include "core/util.h"

#include <cupti.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- kinds (GIL held) ----------------------------------------------------------------------- */

/* A group per activity bit (GP_ACT_*, record_kinds.h): group k is bit 1 << k. */
#define N_KINDS GP_N_ACT_BITS
static int refs[N_KINDS];
static int session; /* kinds are in use: we hold a claim on the CUPTI subscriber */
#define REGIONS_GROUP 4
#define API_GROUP 5
_Static_assert(GP_ACT_REGIONS == 1 << REGIONS_GROUP && GP_ACT_API == 1 << API_GROUP, "groups");

/* The CUPTI kinds group k enables: those of the record kinds its bit asks for, in table order
 * (record_kinds.h). The regions group enables none (its records are noted by callbacks); the API
 * group's records are enabled by callback id (api_enable below). */
static int
cupti_kinds(int k, CUpti_ActivityKind out[GP_N_RECORD_KINDS])
{
    int n = 0;
    for (int r = 0; r < GP_N_RECORD_KINDS; r++)
        if (gp_record_kinds[r].bit == 1u << k &&
            gp_record_kinds[r].enable != CUPTI_ACTIVITY_KIND_INVALID)
            out[n++] = gp_record_kinds[r].enable;
    return n;
}

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

/* Drops one user of the first `j` CUPTI kinds of group k (all of them: -1), disabling those no
 * other group uses. If CUPTI refuses one and *rc is 0, sets CuptiError and *rc = -1 (the first
 * error is the one reported; pass *rc = -1 to set none). */
static void
drop_kinds(int k, int j, int *rc)
{
    CUpti_ActivityKind kinds[GP_N_RECORD_KINDS];
    int n = cupti_kinds(k, kinds);
    if (j < 0 || j > n)
        j = n;
    while (--j >= 0) {
        CUpti_ActivityKind kind = kinds[j];
        if (--cupti_refs[kind] > 0)
            continue;
        CUptiResult res = gp_cupti.cuptiActivityDisable(kind);
        if (res != CUPTI_SUCCESS && *rc == 0) {
            gp_set_cupti_error(res, "cuptiActivityDisable", __FILE__, __LINE__);
            *rc = -1;
        }
    }
}

/* ---- API records of launches, by callback id ------------------------------------------------ *
 *
 * Enabling the RUNTIME and DRIVER kinds makes CUPTI write a record for every CUDA call of the
 * process (a training step makes thousands: device queries, stream checks, ...). Python lines
 * need the launch calls' records only, enabled by callback id while the API group has users.
 * Regions need no record at all (attribution.c watches their calls' callbacks). Domain 0 is the
 * runtime, 1 the driver. */

#define GP_MAX_API_CBID 1024
_Static_assert(CUPTI_RUNTIME_TRACE_CBID_SIZE <= GP_MAX_API_CBID, "runtime cbids");
_Static_assert(CUPTI_DRIVER_TRACE_CBID_SIZE <= GP_MAX_API_CBID, "driver cbids");

typedef struct {
    const CUpti_CallbackId *ids[2];
    size_t n[2];
} cbid_set;

static cbid_set api_cbids;     /* launches (set by pylines.c) */
static cbid_set regions_cbids; /* found by name at first use (regions_cbids_find) */

void
gp_activity_set_api_cbids(const CUpti_CallbackId *runtime, size_t n_runtime,
                          const CUpti_CallbackId *driver, size_t n_driver)
{
    api_cbids = (cbid_set){{runtime, driver}, {n_runtime, n_driver}};
}

/* Turns the records of every id of `set` on or off; the first refusal is returned (the others
 * are still set). */
static CUptiResult
cbids_set(const cbid_set *set, uint8_t on)
{
    CUptiResult first = CUPTI_SUCCESS;
    for (int d = 0; d < 2; d++)
        for (size_t k = 0; k < set->n[d]; k++) {
            CUpti_CallbackId id = set->ids[d][k];
            CUptiResult res = d == 0 ? gp_cupti.cuptiActivityEnableRuntimeApi(id, on)
                                     : gp_cupti.cuptiActivityEnableDriverApi(id, on);
            if (res != CUPTI_SUCCESS && first == CUPTI_SUCCESS)
                first = res;
        }
    return first;
}

static int
api_enable(void)
{
    CUptiResult res = cbids_set(&api_cbids, 1);
    if (res == CUPTI_SUCCESS)
        return 0;
    (void)cbids_set(&api_cbids, 0);
    gp_set_cupti_error(res, "cuptiActivityEnableRuntimeApi/DriverApi", __FILE__, __LINE__);
    return -1;
}

static void
api_disable(int *rc)
{
    CUptiResult res = cbids_set(&api_cbids, 0);
    if (res != CUPTI_SUCCESS && *rc == 0) {
        gp_set_cupti_error(res, "cuptiActivityEnableRuntimeApi/DriverApi", __FILE__, __LINE__);
        *rc = -1;
    }
}

/* The calls attribution reads, by the prefix of their names (so that calls a newer CUDA adds to
 * these families are covered): kernel and graph launches, copies, sets, event records (a
 * region's own start and stop events: the stream rule), allocations and frees (memory records). */
static const char *const regions_prefixes[2][12] = {
    {"cudaLaunch", "__cudaLaunch", "cudaGraphLaunch", "cudaMemcpy", "cudaMemset", "cudaEventRecord",
     "cudaMalloc", "cudaFree", NULL},
    {"cuLaunch", "cuGraphLaunch", "cuMemcpy", "cuMemset", "cuEventRecord", "cuMemAlloc",
     "cuMemFree", "cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemRelease", NULL},
};
static CUpti_CallbackId regions_found[2][GP_MAX_API_CBID];
static gp_cupti_callback regions_list[2 * GP_MAX_API_CBID]; /* the same ids, as callbacks */
static size_t n_regions_list;
static const CUpti_CallbackDomain api_domains[2] = {CUPTI_CB_DOMAIN_RUNTIME_API,
                                                    CUPTI_CB_DOMAIN_DRIVER_API};

static void
regions_cbids_find(void)
{
    if (regions_cbids.ids[0] != NULL)
        return;
    static const uint32_t sizes[2] = {CUPTI_RUNTIME_TRACE_CBID_SIZE, CUPTI_DRIVER_TRACE_CBID_SIZE};
    for (int d = 0; d < 2; d++) {
        size_t n = 0;
        for (uint32_t id = 1; id < sizes[d]; id++) {
            const char *name = NULL;
            if (gp_cupti.cuptiGetCallbackName(api_domains[d], id, &name) != CUPTI_SUCCESS ||
                name == NULL)
                continue;
            for (const char *const *p = regions_prefixes[d]; *p != NULL; p++)
                if (strncmp(name, *p, strlen(*p)) == 0) {
                    regions_found[d][n++] = id;
                    regions_list[n_regions_list++] = (gp_cupti_callback){api_domains[d], id};
                    break;
                }
        }
        regions_cbids.ids[d] = regions_found[d];
        regions_cbids.n[d] = n;
    }
}

const gp_cupti_callback *
gp_activity_regions_callbacks(size_t *n)
{
    regions_cbids_find();
    *n = n_regions_list;
    return regions_list;
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
    CUpti_ActivityKind kinds[GP_N_RECORD_KINDS];
    int n = cupti_kinds(k, kinds), j = 0;
    for (; j < n; j++) {
        CUpti_ActivityKind kind = kinds[j];
        if (cupti_refs[kind] == 0)
            GP_CUPTI_CHECK(gp_cupti.cuptiActivityEnable(kind));
        cupti_refs[kind]++;
    }
    if (k == REGIONS_GROUP && regions_hook != NULL && regions_hook(1) < 0)
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
        if (k == REGIONS_GROUP && regions_hook != NULL)
            regions_hook(0);
        if (k == API_GROUP)
            api_disable(&rc);
        else
            drop_kinds(k, -1, &rc);
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

/* _activity_api_cbids() -> {"regions": {"runtime": [...], "driver": [...]}, "api": {...}}: the
 * names of the calls whose API records each group enables (loads CUPTI; no device needed). */
static PyObject *
names_of(const cbid_set *set)
{
    PyObject *out = PyDict_New();
    for (int d = 0; out != NULL && d < 2; d++) {
        PyObject *list = PyList_New(0);
        for (size_t k = 0; list != NULL && k < set->n[d]; k++) {
            const char *name = NULL;
            if (gp_cupti.cuptiGetCallbackName(api_domains[d], set->ids[d][k], &name) !=
                    CUPTI_SUCCESS ||
                name == NULL)
                name = "?";
            PyObject *s = PyUnicode_FromString(name);
            if (s == NULL || PyList_Append(list, s) < 0)
                Py_CLEAR(list);
            Py_XDECREF(s);
        }
        if (list == NULL || PyDict_SetItemString(out, d == 0 ? "runtime" : "driver", list) < 0)
            Py_CLEAR(out);
        Py_XDECREF(list);
    }
    return out;
}

static PyObject *
activity_api_cbids(PyObject *module, PyObject *unused)
{
    if (gp_cupti_load() < 0)
        return NULL;
    regions_cbids_find();
    PyObject *regions = names_of(&regions_cbids), *api = names_of(&api_cbids);
    PyObject *out =
        regions && api ? Py_BuildValue("{s:O,s:O}", "regions", regions, "api", api) : NULL;
    Py_XDECREF(regions);
    Py_XDECREF(api);
    return out;
}

static PyMethodDef activity_methods[] = {
    {"_activity_api_cbids", activity_api_cbids, METH_NOARGS,
     "Names of the calls whose API records the regions and Python-line groups enable."},
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
    if (PyModule_AddFunctions(module, activity_methods) < 0)
        return -1;
    PyObject *bits = gp_activity_bits_export(); /* the mask bits _activity_acquire takes */
    if (bits == NULL)
        return -1;
    int rc = PyModule_AddObjectRef(module, "ACTIVITY_BITS", bits);
    Py_DECREF(bits);
    return rc;
}
