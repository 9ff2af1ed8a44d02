/* Python lines (pylines.h).
 *
 * The handler runs on whichever thread makes a watched CUDA call, usually without the GIL (the
 * frameworks release it around CUDA calls): it reads the thread's frames through pyframes.h and
 * copies what it keeps (file and function names as UTF-8, lines), so nothing here holds a Python
 * reference or needs the GIL; `gp_pysites_lock` guards the tables. A code object is known by its
 * address, checked against its file name object and first line, so that a new code object at the
 * address of a dead one is not taken for it.
 *
 * Only the driver API's callbacks are on: every launch, copy and set reaches the driver, also
 * those made through the runtime, and CUPTI charges every API call of a domain that has any
 * callback on (torch makes several runtime calls per op). Copy and set records carry the driver
 * call's correlation id; a kernel launched through the runtime carries the runtime call's, so the
 * API records of launches are kept too (runtime and driver), and Python
 * (gpuprofile.tracing.pylines) places each driver launch inside the runtime launch of the same
 * thread that encloses it in time.
 *
 * Each note also carries the launch's autograd mark (autograd.h): in the forward, the thread's
 * next autograd sequence number; in the backward, the node being evaluated; Python gives a
 * backward launch the line of its node's forward launch. */
#include "pylines.h"
#include "activity.h"
#include "autograd.h"
#include "core/cupti_loader.h"
#include "core/errors.h"
#include "core/layout.h"
#include "core/testing.h"
#include "pyframes.h"
#include "records.h"
#include "pysites.h"

#include <cupti.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define GP_MAX_FRAMES 128
#define NONE UINT32_MAX

enum { MODE_OFF, MODE_LINE, MODE_STACK };
static int mode;     /* atomic: what the handler records */
static int work = 1; /* 0: the handler returns at once (the cost breakdown of bench_pylines) */
static int handler_added;

/* ---- the calls watched ---------------------------------------------------------------------- */

#define RT(name)                                                                                   \
    {                                                                                              \
        CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##name                               \
    }
#define DRV(name)                                                                                  \
    {                                                                                              \
        CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##name                                 \
    }
/* Callbacks are the costly part (CUPTI charges each API call of a domain with any callback on),
 * so only the driver API's are on: every launch, copy and set reaches the driver, also those made
 * through the runtime. The runtime's are kept for the cost breakdown of bench_pylines. */
static const gp_cupti_callback watched[] = {
    RT(cudaLaunchKernel_v7000),
    RT(cudaLaunchKernel_ptsz_v7000),
    RT(cudaLaunchKernelExC_v11060),
    RT(cudaLaunchKernelExC_ptsz_v11060),
    RT(cudaLaunchCooperativeKernel_v9000),
    RT(cudaLaunchCooperativeKernel_ptsz_v9000),
    RT(__cudaLaunchKernel_v13000),
    RT(__cudaLaunchKernel_ptsz_v13000),
    RT(cudaGraphLaunch_v10000),
    RT(cudaGraphLaunch_ptsz_v10000),
    RT(cudaMemcpy_v3020),
    RT(cudaMemcpy_ptds_v7000),
    RT(cudaMemcpyAsync_v3020),
    RT(cudaMemcpyAsync_ptsz_v7000),
    RT(cudaMemcpy2D_v3020),
    RT(cudaMemcpy2DAsync_v3020),
    RT(cudaMemcpyPeerAsync_v4000),
    RT(cudaMemset_v3020),
    RT(cudaMemset_ptds_v7000),
    RT(cudaMemsetAsync_v3020),
    RT(cudaMemsetAsync_ptsz_v7000),
    RT(cudaMemset2DAsync_v3020),
    /* driver: launches (kernels, graphs) */
    DRV(cuLaunch),
    DRV(cuLaunchGrid),
    DRV(cuLaunchGridAsync),
    DRV(cuLaunchKernel),
    DRV(cuLaunchKernel_ptsz),
    DRV(cuLaunchKernelEx),
    DRV(cuLaunchKernelEx_ptsz),
    DRV(cuLaunchCooperativeKernel),
    DRV(cuLaunchCooperativeKernel_ptsz),
    DRV(cuGraphLaunch),
    DRV(cuGraphLaunch_ptsz),
    /* driver: copies */
    DRV(cuMemcpy),
    DRV(cuMemcpyAsync),
    DRV(cuMemcpyAsync_ptsz),
    DRV(cuMemcpy_ptds),
    DRV(cuMemcpyPeer),
    DRV(cuMemcpyPeerAsync),
    DRV(cuMemcpyPeer_ptds),
    DRV(cuMemcpyPeerAsync_ptsz),
    DRV(cuMemcpyHtoD_v2),
    DRV(cuMemcpyDtoH_v2),
    DRV(cuMemcpyDtoD_v2),
    DRV(cuMemcpyHtoD_v2_ptds),
    DRV(cuMemcpyDtoH_v2_ptds),
    DRV(cuMemcpyDtoD_v2_ptds),
    DRV(cuMemcpyHtoDAsync_v2),
    DRV(cuMemcpyDtoHAsync_v2),
    DRV(cuMemcpyDtoDAsync_v2),
    DRV(cuMemcpyHtoDAsync_v2_ptsz),
    DRV(cuMemcpyDtoHAsync_v2_ptsz),
    DRV(cuMemcpyDtoDAsync_v2_ptsz),
    DRV(cuMemcpy2D_v2),
    DRV(cuMemcpy2DUnaligned_v2),
    DRV(cuMemcpy2DAsync_v2),
    DRV(cuMemcpy2D_v2_ptds),
    DRV(cuMemcpy2DUnaligned_v2_ptds),
    DRV(cuMemcpy2DAsync_v2_ptsz),
    DRV(cuMemcpy3D_v2),
    DRV(cuMemcpy3DAsync_v2),
    DRV(cuMemcpy3D_v2_ptds),
    DRV(cuMemcpy3DAsync_v2_ptsz),
    DRV(cuMemcpy3DPeer),
    DRV(cuMemcpy3DPeerAsync),
    DRV(cuMemcpy3DPeer_ptds),
    DRV(cuMemcpy3DPeerAsync_ptsz),
    /* driver: sets */
    DRV(cuMemsetD8_v2),
    DRV(cuMemsetD16_v2),
    DRV(cuMemsetD32_v2),
    DRV(cuMemsetD2D8_v2),
    DRV(cuMemsetD2D16_v2),
    DRV(cuMemsetD2D32_v2),
    DRV(cuMemsetD8_v2_ptds),
    DRV(cuMemsetD16_v2_ptds),
    DRV(cuMemsetD32_v2_ptds),
    DRV(cuMemsetD2D8_v2_ptds),
    DRV(cuMemsetD2D16_v2_ptds),
    DRV(cuMemsetD2D32_v2_ptds),
    DRV(cuMemsetD8Async),
    DRV(cuMemsetD16Async),
    DRV(cuMemsetD32Async),
    DRV(cuMemsetD2D8Async),
    DRV(cuMemsetD2D16Async),
    DRV(cuMemsetD2D32Async),
    DRV(cuMemsetD8Async_ptsz),
    DRV(cuMemsetD16Async_ptsz),
    DRV(cuMemsetD32Async_ptsz),
    DRV(cuMemsetD2D8Async_ptsz),
    DRV(cuMemsetD2D16Async_ptsz),
    DRV(cuMemsetD2D32Async_ptsz),
};
/* The runtime launches whose API records are kept: their kernels' records carry their ids. */
static const CUpti_CallbackId runtime_launches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
};
/* The driver launches whose API records are kept, to be placed inside the runtime ones. */
static const CUpti_CallbackId driver_launches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};
#undef RT
#undef DRV
#define N_WATCHED (sizeof watched / sizeof watched[0])

/* Which callback ids the handler acts on, per domain (0 runtime, 1 driver): filled at start from
 * `watched` and the domains asked for. */
#define GP_MAX_CBID 2048
static uint8_t watching[2][GP_MAX_CBID];

static int
is_watched(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    int d = domain == CUPTI_CB_DOMAIN_DRIVER_API;
    return (domain == CUPTI_CB_DOMAIN_RUNTIME_API || d) && cbid < GP_MAX_CBID &&
           __atomic_load_n(&watching[d][cbid], __ATOMIC_RELAXED);
}

/* ---- reading the frames (any thread, gp_pysites_lock held) --------------------------------- */

/* Each thread's last capture: the (code, offset) of the frames it read, innermost first, up to the
 * user frame ("line") or all of them ("stack"), and what they gave. Launches come in runs from
 * one line (a loop, a model's layer), so most captures find the same frames and skip the table
 * lookups. Frames with the same code objects at the same offsets give the same site and stack;
 * a code object at a dead one's address is told apart by its file name object and first line,
 * as the tables do. */
typedef struct {
    const PyCodeObject *code;
    const PyObject *filename;
    int firstlineno, lasti;
} frame_key;

typedef struct {
    unsigned generation; /* the tables' generation it belongs to; 0: none */
    int whole, n;        /* the mode it was read in; frames kept (0: not cacheable) */
    uint32_t site, stack;
    frame_key frames[GP_MAX_FRAMES];
} last_capture;

static unsigned generation; /* atomic: bumped at each start, resets stale per-thread state */
static int use_cache = 1;   /* 0: every capture does the lookups (the cost breakdown) */

static void
key_of(const gp_pyframe *f, frame_key *k)
{
    k->code = f->code;
    k->filename = f->code->co_filename;
    k->firstlineno = f->code->co_firstlineno;
    k->lasti = f->lasti;
}

static int
same_key(const gp_pyframe *f, const frame_key *k)
{
    return k->code == f->code && k->lasti == f->lasti && k->filename == f->code->co_filename &&
           k->firstlineno == f->code->co_firstlineno;
}

/* The site and stack the cache holds for the `n` frames read, if it holds them. A stack cut at
 * GP_MAX_FRAMES is interned from the frames kept, so equal kept frames give it too. */
static int
cache_hit(const last_capture *c, unsigned gen, int whole, const gp_pyframe *frames, int n,
          uint32_t *site_out, uint32_t *stack_out)
{
    if (!use_cache || c->generation != gen || c->whole != whole || c->n == 0 || c->n > n ||
        (whole && c->n != n))
        return 0;
    for (int k = 0; k < c->n; k++)
        if (!same_key(&frames[k], &c->frames[k]))
            return 0;
    *site_out = c->site;
    *stack_out = c->stack;
    return 1;
}

/* The calling thread's site (innermost user frame, else innermost frame) and, when `whole`, its
 * interned stack; NONE when the thread has no Python frame that can be read. */
static void
capture(last_capture *c, unsigned gen, int whole, uint32_t *site_out, uint32_t *stack_out)
{
    gp_pyframe frames[GP_MAX_FRAMES];
    uint32_t ids[GP_MAX_FRAMES];
    /* "line": the frames the last capture kept decide, so only those are read for the cache. */
    if (!whole && c->n > 0 &&
        cache_hit(c, gen, whole, frames, gp_pyframes_read(frames, c->n), site_out, stack_out))
        return;
    /* The user frame is usually among the innermost few: read them first, more only if needed. */
    int max = whole ? GP_MAX_FRAMES : 16;
    for (;;) {
        int n = gp_pyframes_read(frames, max);
        if (whole && cache_hit(c, gen, whole, frames, n, site_out, stack_out))
            return;
        uint32_t first = NONE, user_site = NONE;
        int kept = 0, user_at = -1;
        for (int k = 0; k < n; k++) {
            int user = 0;
            uint32_t ci = gp_pysites_code(frames[k].code, &user);
            uint32_t s = NONE;
            if (ci != NONE && (whole || k == 0 || user))
                s = gp_pysites_site_at(ci, &frames[k]);
            if (k == 0)
                first = s;
            if (user && user_site == NONE) {
                user_site = s;
                user_at = k;
            }
            if (whole)
                ids[kept++] = s;
            else if (user_site != NONE)
                break;
        }
        if (whole || user_site != NONE || n < max || max == GP_MAX_FRAMES) {
            *site_out = user_site != NONE ? user_site : first;
            *stack_out = whole && kept > 0 ? gp_pysites_stack(ids, (size_t)kept) : NONE;
            /* Cached: a whole stack (the same frames give it), or the frames up to the user
             * frame; not a site read from a library frame (deeper frames decided it). */
            int keep = whole ? n : user_at + 1;
            c->generation = gen;
            c->whole = whole;
            c->n = *site_out != NONE && (whole ? *stack_out != NONE : user_at >= 0) ? keep : 0;
            for (int k = 0; k < c->n; k++)
                key_of(&frames[k], &c->frames[k]);
            c->site = *site_out;
            c->stack = *stack_out;
            return;
        }
        max = GP_MAX_FRAMES;
    }
}

/* ---- the handler (any thread) --------------------------------------------------------------- */

static _Thread_local struct {
    int busy; /* inside capture: a call made meanwhile is not re-entered */
    last_capture last;
} tls;

/* Each watched call's enter notes its correlation id with the calling thread's site. (With the
 * runtime's callbacks on too, for the cost breakdown only, the runtime call and the driver call
 * inside it are both noted.) */
static void
handler(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *cbdata)
{
    int m = __atomic_load_n(&mode, __ATOMIC_ACQUIRE);
    if (m == MODE_OFF || tls.busy || !is_watched(domain, cbid) || !work)
        return;
    const CUpti_CallbackData *d = cbdata;
    if (d->callbackSite != CUPTI_API_ENTER)
        return;
    unsigned gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
    uint32_t site, stack;
    gp_autograd_mark mark;
    tls.busy = 1;
    gp_autograd_mark_now(&mark);
    pthread_mutex_lock(&gp_pysites_lock);
    capture(&tls.last, gen, m == MODE_STACK, &site, &stack);
    tls.busy = 0;
    gp_pysites_note(d->correlationId, site, stack, &mark);
    pthread_mutex_unlock(&gp_pysites_lock);
}

/* ---- API records (CUPTI's thread or a flush; the record store's lock held) ------------------- */

static uint8_t launch_record[2][GP_MAX_CBID]; /* [runtime, driver][cbid]: kept */
static int keep_api;                          /* atomic: from a start to the next take */

static void
store_api(const CUpti_ActivityAPI *a)
{
    int runtime = a->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
    if ((!runtime && a->kind != CUPTI_ACTIVITY_KIND_DRIVER) || a->cbid >= GP_MAX_CBID ||
        !launch_record[!runtime][a->cbid])
        return;
    gp_pyapi_out o = {a->start, a->end, a->correlationId, a->threadId, (uint8_t)runtime, {0}};
    pthread_mutex_lock(&gp_pysites_lock);
    gp_pysites_api(&o);
    pthread_mutex_unlock(&gp_pysites_lock);
}

static void
api_record(const CUpti_ActivityAPI *a)
{
    if (__atomic_load_n(&keep_api, __ATOMIC_ACQUIRE))
        store_api(a);
}

/* ---- Python entry points (GIL held) ---------------------------------------------------------- */

static int on_claimed; /* a subscriber claim and the callbacks are held */

/* _pylines_reset(excluded): clears the tables and sets the excluded prefixes (tests). */
static PyObject *
pylines_reset(PyObject *module, PyObject *prefixes)
{
    if (gp_pysites_reset(prefixes) < 0)
        return NULL;
    __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE); /* the site ids cached are gone */
    Py_RETURN_NONE;
}

/* The watched callbacks of the domains in `domains` (1 runtime, 2 driver), and the bitmap. */
static size_t
select_watched(int domains, gp_cupti_callback *out)
{
    size_t n = 0;
    memset(watching, 0, sizeof watching);
    for (size_t k = 0; k < N_WATCHED; k++) {
        int d = watched[k].domain == CUPTI_CB_DOMAIN_DRIVER_API;
        if (domains & (1 << d) && watched[k].cbid < GP_MAX_CBID) {
            out[n++] = watched[k];
            watching[d][watched[k].cbid] = 1;
        }
    }
    return n;
}

static gp_cupti_callback enabled_now[N_WATCHED];
static size_t n_enabled_now;

/* _pylines_start(stack: bool, excluded: tuple of str, domains=2, work=1): start noting (clears
 * the tables) and keeping the launches' API records until the next take (the caller enables
 * their activity kinds). `domains` and `work` serve the cost breakdown in
 * benchmarks/bench_pylines.py only: callbacks of the runtime (1) and/or driver (2) API; the
 * handler returns at once (work 0), does its work (1), or does it without the per-thread cache
 * of the last capture (2). */
static PyObject *
pylines_start(PyObject *module, PyObject *args)
{
    int whole, domains = 2, do_work = 1;
    PyObject *prefixes;
    if (!PyArg_ParseTuple(args, "pO|ii:_pylines_start", &whole, &prefixes, &domains, &do_work))
        return NULL;
    if (domains < 1 || domains > 3)
        return PyErr_Format(PyExc_ValueError, "domains must be 1, 2 or 3, got %d", domains);
    if (on_claimed) {
        PyErr_SetString(gp_GpuProfileError, "Python lines are already being recorded");
        return NULL;
    }
    if (gp_pysites_reset(prefixes) < 0)
        return NULL;
    if (gp_cupti_subscribe() < 0)
        return NULL;
    if (!handler_added) {
        if (gp_cupti_add_handler(handler, NULL) < 0)
            goto error;
        handler_added = 1;
    }
    n_enabled_now = select_watched(domains, enabled_now);
    if (gp_cupti_callbacks_on(enabled_now, n_enabled_now) < 0)
        goto error;
    on_claimed = 1;
    __atomic_store_n(&keep_api, 1, __ATOMIC_RELEASE);
    work = do_work != 0;
    use_cache = do_work != 2;
    __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&mode, whole ? MODE_STACK : MODE_LINE, __ATOMIC_RELEASE);
    Py_RETURN_NONE;
error:
    gp_cupti_release();
    return NULL;
}

/* _pylines_stop(): stop noting; what was noted stays until taken. */
static PyObject *
pylines_stop(PyObject *module, PyObject *unused)
{
    __atomic_store_n(&mode, MODE_OFF, __ATOMIC_RELEASE);
    if (!on_claimed)
        Py_RETURN_NONE;
    on_claimed = 0;
    int rc = gp_cupti_callbacks_off(enabled_now, n_enabled_now);
    gp_cupti_release();
    if (rc < 0) {
        PyErr_SetString(gp_CuptiError, "could not disable the Python-line callbacks");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* _pylines_take() -> {"notes": bytes, "api": bytes, "sites": [(file, line, function, user)],
 * "stacks": [tuple of site ids, innermost first], "lost": int}: the notes and the launches' API
 * records since the last take (cleared), and every site and stack so far. After a stop, API
 * records are no longer kept: take after the records were flushed. */
static PyObject *
pylines_take(PyObject *module, PyObject *unused)
{
    if (__atomic_load_n(&mode, __ATOMIC_ACQUIRE) == MODE_OFF)
        __atomic_store_n(&keep_api, 0, __ATOMIC_RELEASE);
    return gp_pysites_take();
}

/* _pylines_capture(correlation_id, stack=False, release_gil=False, cached=True) -> (site, stack):
 * notes the calling frame as the handler would for a CUDA call with that id, optionally with the
 * GIL released as frameworks do, and with or without the thread's cache of its last capture
 * (tests; the cost of a capture without a GPU). */
static PyObject *
pylines_capture(PyObject *module, PyObject *args)
{
    unsigned int corr;
    int whole = 0, release = 0, cached = 1;
    if (!PyArg_ParseTuple(args, "I|ppp:pylines_capture", &corr, &whole, &release, &cached))
        return NULL;
    uint32_t site, stack;
    static last_capture scratch; /* used under gp_pysites_lock, emptied each time */
    unsigned gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
    gp_autograd_mark mark;
    PyThreadState *saved = release ? PyEval_SaveThread() : NULL;
    gp_autograd_mark_now(&mark);
    pthread_mutex_lock(&gp_pysites_lock);
    scratch.n = 0;
    capture(cached ? &tls.last : &scratch, gen, whole, &site, &stack);
    gp_pysites_note(corr, site, stack, &mark);
    pthread_mutex_unlock(&gp_pysites_lock);
    if (saved != NULL)
        PyEval_RestoreThread(saved);
    return Py_BuildValue("(kk)", (unsigned long)site, (unsigned long)stack);
}

/* _pylines_nogil() -> bool: frames are read without the GIL on this Python (3.11, 3.12). */
static PyObject *
pylines_nogil(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(gp_pyframes_nogil());
}

/* _pylines_layout() -> dtype dict of gp_pyline_out. */
static PyObject *
pylines_layout(PyObject *module, PyObject *unused)
{
    static const gp_layout_field fields[] = {
        GP_LAYOUT_FIELD(gp_pyline_out, seq),   GP_LAYOUT_FIELD(gp_pyline_out, correlation_id),
        GP_LAYOUT_FIELD(gp_pyline_out, site),  GP_LAYOUT_FIELD(gp_pyline_out, stack),
        GP_LAYOUT_FIELD(gp_pyline_out, thread), GP_LAYOUT_FIELD(gp_pyline_out, pass)};
    return gp_layout_dtype(fields, sizeof fields / sizeof fields[0], sizeof(gp_pyline_out));
}

/* _pylines_api_layout() -> dtype dict of gp_pyapi_out. */
static PyObject *
pylines_api_layout(PyObject *module, PyObject *unused)
{
    static const gp_layout_field fields[] = {
        GP_LAYOUT_FIELD(gp_pyapi_out, start), GP_LAYOUT_FIELD(gp_pyapi_out, end),
        GP_LAYOUT_FIELD(gp_pyapi_out, correlation_id), GP_LAYOUT_FIELD(gp_pyapi_out, thread),
        GP_LAYOUT_FIELD(gp_pyapi_out, runtime)};
    return gp_layout_dtype(fields, sizeof fields / sizeof fields[0], sizeof(gp_pyapi_out));
}

/* _pylines_api_record(kind, cbid, start, end, correlation_id, thread): hands the store a
 * CUpti_ActivityAPI record as CUPTI would while noting (tests without a GPU). */
static PyObject *
pylines_api_record(PyObject *module, PyObject *args)
{
    CUpti_ActivityAPI a = {0};
    unsigned int kind, cbid, corr, thread;
    unsigned long long start, end;
    if (!PyArg_ParseTuple(args, "IIKKII:pylines_api_record", &kind, &cbid, &start, &end, &corr,
                          &thread))
        return NULL;
    a.kind = (CUpti_ActivityKind)kind;
    a.cbid = cbid;
    a.start = start;
    a.end = end;
    a.correlationId = corr;
    a.threadId = thread;
    store_api(&a);
    Py_RETURN_NONE;
}

static PyMethodDef pylines_methods[] = {
    {"_pylines_start", pylines_start, METH_VARARGS,
     "_pylines_start(stack, excluded): note the Python line of each CUDA launch, copy, set."},
    {"_pylines_stop", pylines_stop, METH_NOARGS, "Stop noting Python lines."},
    {"_pylines_reset", pylines_reset, METH_O, "Clear the tables; set the excluded prefixes."},
    {"_pylines_take", pylines_take, METH_NOARGS, "Notes since the last take, sites and stacks."},
    {"_pylines_layout", pylines_layout, METH_NOARGS, "dtype dict of the notes."},
    {"_pylines_api_layout", pylines_api_layout, METH_NOARGS, "dtype dict of the API records."},
    {NULL, NULL, 0, NULL},
};

/* The tests' and benchmarks' (_C._testing). */
static PyMethodDef testing_methods[] = {
    {"pylines_capture", pylines_capture, METH_VARARGS,
     "pylines_capture(correlation_id, stack=False, release_gil=False, cached=True): note the "
     "calling frame."},
    {"pylines_nogil", pylines_nogil, METH_NOARGS, "Whether frames are read without the GIL."},
    {"pylines_api_record", pylines_api_record, METH_VARARGS,
     "pylines_api_record(kind, cbid, start, end, correlation_id, thread): a record (tests)."},
    {NULL, NULL, 0, NULL},
};

int
gp_pylines_init(PyObject *module)
{
    for (size_t k = 0; k < sizeof runtime_launches / sizeof runtime_launches[0]; k++)
        launch_record[0][runtime_launches[k]] = 1;
    for (size_t k = 0; k < sizeof driver_launches / sizeof driver_launches[0]; k++)
        launch_record[1][driver_launches[k]] = 1;
    gp_records_set_api_hook(api_record);
    gp_activity_set_api_cbids(runtime_launches,
                              sizeof runtime_launches / sizeof runtime_launches[0], driver_launches,
                              sizeof driver_launches / sizeof driver_launches[0]);
    if (gp_testing_add_functions(module, testing_methods) < 0)
        return -1;
    return PyModule_AddFunctions(module, pylines_methods);
}
