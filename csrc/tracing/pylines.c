/* Python lines (pylines.h).
 *
 * The handler runs on whichever thread makes a watched CUDA call, usually without the GIL (the
 * frameworks release it around CUDA calls): it reads the thread's frames through pyframes.h and
 * copies what it keeps (file and function names as UTF-8, lines), so nothing here holds a Python
 * reference or needs the GIL; `gp_pysites_lock` guards the tables. A code object is known by its
 * address, checked against its file name object and first line, so that a new code object at the
 * address of a dead one is not taken for it. A runtime call raises a callback of its own and one
 * for each driver call inside it, each with its own correlation id (kernel records carry the
 * runtime's, copies both): the runtime enter reads the frames, and driver enters inside it reuse
 * that. A driver call outside any runtime call (Triton, CuPy kernels) reads them itself. */
#include "pylines.h"
#include "core/cupti_loader.h"
#include "core/errors.h"
#include "core/layout.h"
#include "pyframes.h"
#include "pysites.h"

#include <cupti.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define GP_MAX_FRAMES 128
#define NONE UINT32_MAX

enum { MODE_OFF, MODE_LINE, MODE_STACK };
static int mode;     /* atomic: what the handler records */
static int work = 1; /* 0: the handler returns at once (the cost breakdown of bench_tracing) */
static unsigned generation; /* atomic: bumped at each start, resets stale per-thread state */
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
    DRV(cuLaunchKernel),
    DRV(cuLaunchKernel_ptsz),
    DRV(cuLaunchKernelEx),
    DRV(cuLaunchKernelEx_ptsz),
    DRV(cuLaunchCooperativeKernel),
    DRV(cuLaunchCooperativeKernel_ptsz),
    DRV(cuGraphLaunch),
    DRV(cuGraphLaunch_ptsz),
    DRV(cuMemcpy),
    DRV(cuMemcpyAsync),
    DRV(cuMemcpyAsync_ptsz),
    DRV(cuMemcpyHtoD_v2),
    DRV(cuMemcpyDtoH_v2),
    DRV(cuMemcpyDtoD_v2),
    DRV(cuMemcpyHtoDAsync_v2),
    DRV(cuMemcpyDtoHAsync_v2),
    DRV(cuMemcpyDtoDAsync_v2),
    DRV(cuMemcpyHtoDAsync_v2_ptsz),
    DRV(cuMemcpyDtoHAsync_v2_ptsz),
    DRV(cuMemcpyDtoDAsync_v2_ptsz),
    DRV(cuMemsetD8_v2),
    DRV(cuMemsetD32_v2),
    DRV(cuMemsetD8Async),
    DRV(cuMemsetD32Async),
    DRV(cuMemsetD8Async_ptsz),
    DRV(cuMemsetD32Async_ptsz),
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

/* Driver calls that set memory (memset records carry the driver call's correlation id). */
static int
is_set(CUpti_CallbackId cbid)
{
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz:
        return 1;
    default:
        return 0;
    }
}

/* ---- reading the frames (any thread, gp_pysites_lock held)
 * -----------------------------------------
 */

/* The calling thread's site (innermost user frame, else innermost frame) and, when `whole`, its
 * interned stack; NONE when the thread has no Python frame that can be read. */
static void
capture(int whole, uint32_t *site_out, uint32_t *stack_out)
{
    gp_pyframe frames[GP_MAX_FRAMES];
    uint32_t ids[GP_MAX_FRAMES];
    /* The user frame is usually among the innermost few: read them first, more only if needed. */
    int max = whole ? GP_MAX_FRAMES : 16;
    for (;;) {
        int n = gp_pyframes_read(frames, max);
        uint32_t first = NONE, user_site = NONE;
        int kept = 0;
        for (int k = 0; k < n; k++) {
            int user = 0;
            uint32_t ci = gp_pysites_code(frames[k].code, &user);
            uint32_t s = NONE;
            if (ci != NONE && (whole || k == 0 || user))
                s = gp_pysites_site_at(ci, &frames[k]);
            if (k == 0)
                first = s;
            if (user && user_site == NONE)
                user_site = s;
            if (whole)
                ids[kept++] = s;
            else if (user_site != NONE)
                break;
        }
        if (whole || user_site != NONE || n < max || max == GP_MAX_FRAMES) {
            *site_out = user_site != NONE ? user_site : first;
            *stack_out = whole && kept > 0 ? gp_pysites_stack(ids, (size_t)kept) : NONE;
            return;
        }
        max = GP_MAX_FRAMES;
    }
}

/* ---- the handler (any thread) --------------------------------------------------------------- */

static _Thread_local struct {
    unsigned generation;
    int busy;       /* inside capture: a call made meanwhile is not re-entered */
    int in_runtime; /* inside a watched runtime call: driver calls inside it reuse its capture */
    uint32_t site, stack;
} tls;

static void
handler(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *cbdata)
{
    int m = __atomic_load_n(&mode, __ATOMIC_ACQUIRE);
    if (m == MODE_OFF || tls.busy || !is_watched(domain, cbid) || !work)
        return;
    const CUpti_CallbackData *d = cbdata;
    unsigned gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
    if (tls.generation != gen) {
        tls.generation = gen;
        tls.in_runtime = 0;
    }
    int runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
    if (d->callbackSite == CUPTI_API_EXIT) {
        if (runtime)
            tls.in_runtime = 0;
        return;
    }
    if (!runtime && tls.in_runtime) {
        /* Kernel and copy records carry the runtime call's id; set records only the driver's */
        if (is_set(cbid)) {
            pthread_mutex_lock(&gp_pysites_lock);
            gp_pysites_note(d->correlationId, tls.site, tls.stack);
            pthread_mutex_unlock(&gp_pysites_lock);
        }
        return;
    }
    pthread_mutex_lock(&gp_pysites_lock);
    uint32_t site, stack;
    tls.busy = 1;
    capture(m == MODE_STACK, &site, &stack);
    tls.busy = 0;
    gp_pysites_note(d->correlationId, site, stack);
    pthread_mutex_unlock(&gp_pysites_lock);
    tls.in_runtime = runtime;
    tls.site = site;
    tls.stack = stack;
}

/* ---- Python entry points (GIL held) ---------------------------------------------------------- */

static int on_claimed; /* a subscriber claim and the callbacks are held */

/* _pylines_reset(excluded): clears the tables and sets the excluded prefixes (tests). */
static PyObject *
pylines_reset(PyObject *module, PyObject *prefixes)
{
    if (gp_pysites_reset(prefixes) < 0)
        return NULL;
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

/* _pylines_start(stack: bool, excluded: tuple of str, domains=3, work=True): start noting (clears
 * the tables). `domains` and `work` serve the cost breakdown in benchmarks/bench_tracing.py only:
 * callbacks of the runtime (1) and/or driver (2) API, and whether the handler does anything. */
static PyObject *
pylines_start(PyObject *module, PyObject *args)
{
    int whole, domains = 3, do_work = 1;
    PyObject *prefixes;
    if (!PyArg_ParseTuple(args, "pO|ip:_pylines_start", &whole, &prefixes, &domains, &do_work))
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
    work = do_work;
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

/* _pylines_take() -> {"notes": bytes, "sites": [(file, line, function, user)], "stacks":
 * [tuple of site ids, innermost first], "lost": int}: the notes since the last take (cleared),
 * and every site and stack so far. */
static PyObject *
pylines_take(PyObject *module, PyObject *unused)
{
    return gp_pysites_take();
}

/* _pylines_capture(correlation_id, stack=False, release_gil=False) -> (site, stack): notes the
 * calling frame as the handler would for a CUDA call with that id, optionally with the GIL
 * released as frameworks do (tests; the cost of a capture without a GPU). */
static PyObject *
pylines_capture(PyObject *module, PyObject *args)
{
    unsigned int corr;
    int whole = 0, release = 0;
    if (!PyArg_ParseTuple(args, "I|pp:_pylines_capture", &corr, &whole, &release))
        return NULL;
    uint32_t site, stack;
    PyThreadState *saved = release ? PyEval_SaveThread() : NULL;
    pthread_mutex_lock(&gp_pysites_lock);
    capture(whole, &site, &stack);
    gp_pysites_note(corr, site, stack);
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
    static const gp_layout_field fields[] = {GP_LAYOUT_FIELD(gp_pyline_out, correlation_id),
                                             GP_LAYOUT_FIELD(gp_pyline_out, site),
                                             GP_LAYOUT_FIELD(gp_pyline_out, stack)};
    return gp_layout_dtype(fields, sizeof fields / sizeof fields[0], sizeof(gp_pyline_out));
}

static PyMethodDef pylines_methods[] = {
    {"_pylines_start", pylines_start, METH_VARARGS,
     "_pylines_start(stack, excluded): note the Python line of each CUDA launch, copy, set."},
    {"_pylines_stop", pylines_stop, METH_NOARGS, "Stop noting Python lines."},
    {"_pylines_reset", pylines_reset, METH_O, "Clear the tables; set the excluded prefixes."},
    {"_pylines_take", pylines_take, METH_NOARGS, "Notes since the last take, sites and stacks."},
    {"_pylines_capture", pylines_capture, METH_VARARGS,
     "_pylines_capture(correlation_id, stack=False, release_gil=False): note the calling frame."},
    {"_pylines_layout", pylines_layout, METH_NOARGS, "dtype dict of the notes."},
    {"_pylines_nogil", pylines_nogil, METH_NOARGS, "Whether frames are read without the GIL."},
    {NULL, NULL, 0, NULL},
};

int
gp_pylines_init(PyObject *module)
{
    return PyModule_AddFunctions(module, pylines_methods);
}
