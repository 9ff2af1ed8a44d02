/* Python lines (pylines.h).
 *
 * The handler runs on whichever thread makes a watched CUDA call, but reads Python frames and
 * touches the tables only when that thread holds the GIL: the GIL serializes every table here,
 * and the Python entry points hold it too. A runtime call raises a callback of its own and one
 * for each driver call inside it, each with its own correlation id (kernel records carry the
 * runtime's, copies both): the runtime enter walks the frames, and driver enters inside it reuse
 * that walk. A driver call outside any runtime call (Triton, CuPy kernels) walks on its own. */
#include "pylines.h"
#include "core/cupti_loader.h"
#include "core/errors.h"
#include "core/intmap.h"
#include "core/layout.h"

#include <cupti.h>
#include <stdlib.h>
#include <string.h>

#define GP_MAX_FRAMES 128
#define NONE UINT32_MAX

enum { MODE_OFF, MODE_LINE, MODE_STACK };
static int mode;            /* atomic: what the handler records */
static unsigned generation; /* atomic: bumped at each start, resets stale per-thread state */
static int handler_added;
static PyObject *excluded; /* tuple of str: file prefixes that are not user code */

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

static int
is_watched(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    for (size_t k = 0; k < N_WATCHED; k++)
        if (watched[k].cbid == cbid && watched[k].domain == domain)
            return 1;
    return 0;
}

/* ---- tables (GIL held) ---------------------------------------------------------------------- */

/* Code objects (strong references) and whether each is user code. */
static struct {
    PyObject **obj;
    uint8_t *user;
    size_t n, cap, cap_user;
    gp_intmap index; /* pointer -> index */
} codes;

/* Sites: (code index, line). */
static struct {
    uint32_t *code;
    int32_t *line;
    size_t n, cap, cap_line;
    gp_intmap index; /* code index << 32 | line -> index */
} sites;

/* Stacks: runs of site ids (innermost first) in one pool. */
static struct {
    uint32_t *pool, *start, *len;
    size_t n_pool, cap_pool, n, cap_start, cap_len;
    gp_intmap index; /* hash of the run -> index */
} stacks;

/* Notes not yet taken. */
static struct {
    gp_pyline_out *data;
    size_t n, cap;
} notes;
static uint64_t notes_lost; /* out of memory */

static int
is_user_file(PyObject *code)
{
    PyObject *file = PyObject_GetAttrString(code, "co_filename");
    int user = 1;
    if (file == NULL || !PyUnicode_Check(file)) {
        PyErr_Clear();
        user = 0;
    } else if (excluded != NULL) {
        for (Py_ssize_t k = 0; user && k < PyTuple_GET_SIZE(excluded); k++)
            if (PyUnicode_Tailmatch(file, PyTuple_GET_ITEM(excluded, k), 0, PY_SSIZE_T_MAX, -1) ==
                1)
                user = 0;
        PyErr_Clear();
    }
    Py_XDECREF(file);
    return user;
}

static uint32_t
code_index(PyObject *code, int *user)
{
    uint32_t i = gp_intmap_find(&codes.index, (uint64_t)(uintptr_t)code, NULL, NULL);
    if (i != NONE) {
        *user = codes.user[i];
        return i;
    }
    if (gp_reserve((void **)&codes.obj, &codes.cap, codes.n, sizeof *codes.obj) < 0 ||
        gp_reserve((void **)&codes.user, &codes.cap_user, codes.n, sizeof *codes.user) < 0)
        return NONE;
    i = (uint32_t)codes.n;
    if (gp_intmap_put(&codes.index, (uint64_t)(uintptr_t)code, i) < 0)
        return NONE;
    codes.obj[i] = Py_NewRef(code);
    codes.user[i] = (uint8_t)is_user_file(code);
    codes.n++;
    *user = codes.user[i];
    return i;
}

static uint32_t
site_index(uint32_t code, int line)
{
    uint64_t key = ((uint64_t)code << 32 | (uint32_t)line) + 1;
    uint32_t i = gp_intmap_find(&sites.index, key, NULL, NULL);
    if (i != NONE)
        return i;
    if (gp_reserve((void **)&sites.code, &sites.cap, sites.n, sizeof *sites.code) < 0 ||
        gp_reserve((void **)&sites.line, &sites.cap_line, sites.n, sizeof *sites.line) < 0)
        return NONE;
    i = (uint32_t)sites.n;
    if (gp_intmap_put(&sites.index, key, i) < 0)
        return NONE;
    sites.code[i] = code;
    sites.line[i] = line;
    sites.n++;
    return i;
}

typedef struct {
    const uint32_t *ids;
    size_t n;
} run_t;

static int
same_run(uint32_t stack, const void *ctx)
{
    const run_t *r = ctx;
    return stacks.len[stack] == r->n &&
           memcmp(stacks.pool + stacks.start[stack], r->ids, r->n * sizeof *r->ids) == 0;
}

static uint32_t
stack_index(const uint32_t *ids, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t k = 0; k < n; k++)
        h = (h ^ ids[k]) * 1099511628211ull;
    h |= 1;
    run_t run = {ids, n};
    uint32_t i = gp_intmap_find(&stacks.index, h, same_run, &run);
    if (i != NONE)
        return i;
    while (stacks.n_pool + n > stacks.cap_pool)
        if (gp_reserve((void **)&stacks.pool, &stacks.cap_pool, stacks.cap_pool,
                       sizeof *stacks.pool) < 0)
            return NONE;
    if (gp_reserve((void **)&stacks.start, &stacks.cap_start, stacks.n, sizeof *stacks.start) < 0 ||
        gp_reserve((void **)&stacks.len, &stacks.cap_len, stacks.n, sizeof *stacks.len) < 0)
        return NONE;
    i = (uint32_t)stacks.n;
    if (gp_intmap_put(&stacks.index, h, i) < 0)
        return NONE;
    memcpy(stacks.pool + stacks.n_pool, ids, n * sizeof *ids);
    stacks.start[i] = (uint32_t)stacks.n_pool;
    stacks.len[i] = (uint32_t)n;
    stacks.n_pool += n;
    stacks.n++;
    return i;
}

static void
note(uint32_t correlation_id, uint32_t site, uint32_t stack)
{
    if (gp_reserve((void **)&notes.data, &notes.cap, notes.n, sizeof *notes.data) < 0) {
        notes_lost++;
        return;
    }
    notes.data[notes.n++] = (gp_pyline_out){correlation_id, site, stack};
}

static void
clear_tables(void)
{
    for (size_t k = 0; k < codes.n; k++)
        Py_DECREF(codes.obj[k]);
    free(codes.obj);
    free(codes.user);
    gp_intmap_clear(&codes.index);
    free(sites.code);
    free(sites.line);
    gp_intmap_clear(&sites.index);
    free(stacks.pool);
    free(stacks.start);
    free(stacks.len);
    gp_intmap_clear(&stacks.index);
    free(notes.data);
    memset(&codes, 0, sizeof codes);
    memset(&sites, 0, sizeof sites);
    memset(&stacks, 0, sizeof stacks);
    memset(&notes, 0, sizeof notes);
    notes_lost = 0;
}

/* ---- reading the frames (GIL held) ---------------------------------------------------------- */

/* The calling thread's site (innermost user frame, else innermost frame) and, when `whole`, its
 * interned stack. Reading a frame object only: no Python code runs here. */
static void
capture(int whole, uint32_t *site_out, uint32_t *stack_out)
{
    uint32_t ids[GP_MAX_FRAMES];
    size_t n = 0;
    uint32_t first = NONE, user_site = NONE;
    PyFrameObject *f = PyThreadState_GetFrame(PyThreadState_Get());
    for (int depth = 0; f != NULL; depth++) {
        PyCodeObject *code = PyFrame_GetCode(f);
        int user = 0;
        uint32_t ci = code_index((PyObject *)code, &user);
        Py_DECREF(code);
        uint32_t s = NONE;
        if (ci != NONE && (whole || depth == 0 || user))
            s = site_index(ci, PyFrame_GetLineNumber(f));
        if (depth == 0)
            first = s;
        if (user && user_site == NONE)
            user_site = s;
        if (whole && n < GP_MAX_FRAMES)
            ids[n++] = s;
        if (!whole && user_site != NONE) {
            Py_DECREF(f);
            break;
        }
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    *site_out = user_site != NONE ? user_site : first;
    *stack_out = whole && n > 0 ? stack_index(ids, n) : NONE;
}

/* ---- the handler (any thread) --------------------------------------------------------------- */

static _Thread_local struct {
    unsigned generation;
    int busy;       /* inside capture: a call made meanwhile is not re-entered */
    int in_runtime; /* inside a watched runtime call: driver calls reuse its site */
    uint32_t site, stack;
} tls;

static void
handler(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *cbdata)
{
    int m = __atomic_load_n(&mode, __ATOMIC_ACQUIRE);
    if (m == MODE_OFF || tls.busy || !is_watched(domain, cbid))
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
    if (!PyGILState_Check())
        return; /* no Python frame of this thread to read, and the tables need the GIL */
    if (!runtime && tls.in_runtime) {
        if (tls.site != NONE)
            note(d->correlationId, tls.site, tls.stack);
        return;
    }
    uint32_t site, stack;
    tls.busy = 1;
    capture(m == MODE_STACK, &site, &stack);
    tls.busy = 0;
    note(d->correlationId, site, stack);
    if (runtime) {
        tls.in_runtime = 1;
        tls.site = site;
        tls.stack = stack;
    }
}

/* ---- Python entry points (GIL held) ---------------------------------------------------------- */

static int on_claimed; /* a subscriber claim and the callbacks are held */

/* Clears the tables and sets the excluded prefixes (a tuple of str). 0 or -1 with TypeError. */
static int
reset(PyObject *prefixes)
{
    if (!PyTuple_Check(prefixes)) {
        PyErr_Format(PyExc_TypeError, "excluded prefixes must be a tuple of str, got %R", prefixes);
        return -1;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(prefixes); k++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(prefixes, k))) {
            PyErr_Format(PyExc_TypeError, "excluded prefixes must be str, got %R",
                         PyTuple_GET_ITEM(prefixes, k));
            return -1;
        }
    clear_tables();
    Py_XSETREF(excluded, Py_NewRef(prefixes));
    return 0;
}

/* _pylines_reset(excluded): clears the tables and sets the excluded prefixes (tests). */
static PyObject *
pylines_reset(PyObject *module, PyObject *prefixes)
{
    if (reset(prefixes) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* _pylines_start(stack: bool, excluded: tuple of str): start noting (clears the tables). */
static PyObject *
pylines_start(PyObject *module, PyObject *args)
{
    int whole;
    PyObject *prefixes;
    if (!PyArg_ParseTuple(args, "pO:_pylines_start", &whole, &prefixes))
        return NULL;
    if (on_claimed) {
        PyErr_SetString(gp_GpuProfileError, "Python lines are already being recorded");
        return NULL;
    }
    if (gp_cupti_subscribe() < 0)
        return NULL;
    if (!handler_added) {
        if (gp_cupti_add_handler(handler, NULL) < 0)
            goto error;
        handler_added = 1;
    }
    if (gp_cupti_callbacks_on(watched, N_WATCHED) < 0)
        goto error;
    if (reset(prefixes) < 0)
        goto error_on;
    on_claimed = 1;
    __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&mode, whole ? MODE_STACK : MODE_LINE, __ATOMIC_RELEASE);
    Py_RETURN_NONE;
error_on:
    (void)gp_cupti_callbacks_off(watched, N_WATCHED);
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
    int rc = gp_cupti_callbacks_off(watched, N_WATCHED);
    gp_cupti_release();
    if (rc < 0) {
        PyErr_SetString(gp_CuptiError, "could not disable the Python-line callbacks");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
site_tuple(size_t k)
{
    PyObject *code = codes.obj[sites.code[k]];
    PyObject *file = PyObject_GetAttrString(code, "co_filename");
    PyObject *func = file ? PyObject_GetAttrString(code, "co_qualname") : NULL;
    if (func == NULL && file != NULL) { /* Python 3.10 has no co_qualname */
        PyErr_Clear();
        func = PyObject_GetAttrString(code, "co_name");
    }
    PyObject *t = func ? Py_BuildValue("(OiOO)", file, sites.line[k], func,
                                       codes.user[sites.code[k]] ? Py_True : Py_False)
                       : NULL;
    Py_XDECREF(file);
    Py_XDECREF(func);
    return t;
}

/* _pylines_take() -> {"notes": bytes, "sites": [(file, line, function, user)], "stacks":
 * [tuple of site ids, innermost first], "lost": int}: the notes since the last take (they are
 * cleared), and every site and stack so far. */
static PyObject *
pylines_take(PyObject *module, PyObject *unused)
{
    PyObject *site_list = PyList_New((Py_ssize_t)sites.n);
    PyObject *stack_list = site_list ? PyList_New((Py_ssize_t)stacks.n) : NULL;
    if (stack_list == NULL)
        goto error;
    for (size_t k = 0; k < sites.n; k++) {
        PyObject *t = site_tuple(k);
        if (t == NULL)
            goto error;
        PyList_SET_ITEM(site_list, (Py_ssize_t)k, t);
    }
    for (size_t k = 0; k < stacks.n; k++) {
        PyObject *t = PyTuple_New((Py_ssize_t)stacks.len[k]);
        if (t == NULL)
            goto error;
        PyList_SET_ITEM(stack_list, (Py_ssize_t)k, t);
        for (uint32_t j = 0; j < stacks.len[k]; j++) {
            PyObject *id = PyLong_FromUnsignedLong(stacks.pool[stacks.start[k] + j]);
            if (id == NULL)
                goto error;
            PyTuple_SET_ITEM(t, (Py_ssize_t)j, id);
        }
    }
    PyObject *raw = PyBytes_FromStringAndSize((const char *)notes.data,
                                              (Py_ssize_t)(notes.n * sizeof *notes.data));
    if (raw == NULL)
        goto error;
    unsigned long long lost = notes_lost;
    notes.n = 0;
    notes_lost = 0;
    return Py_BuildValue("{s:N,s:N,s:N,s:K}", "notes", raw, "sites", site_list, "stacks",
                         stack_list, "lost", lost);
error:
    Py_XDECREF(site_list);
    Py_XDECREF(stack_list);
    return NULL;
}

/* _pylines_capture(correlation_id, stack=False) -> (site, stack): notes the calling frame as the
 * handler would for a CUDA call with that id (tests; the cost of a capture without a GPU). */
static PyObject *
pylines_capture(PyObject *module, PyObject *args)
{
    unsigned int corr;
    int whole = 0;
    if (!PyArg_ParseTuple(args, "I|p:_pylines_capture", &corr, &whole))
        return NULL;
    uint32_t site, stack;
    capture(whole, &site, &stack);
    note(corr, site, stack);
    return Py_BuildValue("(kk)", (unsigned long)site, (unsigned long)stack);
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
     "_pylines_capture(correlation_id, stack=False): note the calling frame (tests)."},
    {"_pylines_layout", pylines_layout, METH_NOARGS, "dtype dict of the notes."},
    {NULL, NULL, 0, NULL},
};

int
gp_pylines_init(PyObject *module)
{
    return PyModule_AddFunctions(module, pylines_methods);
}
