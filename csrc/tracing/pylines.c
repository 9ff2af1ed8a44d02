/* Python lines (pylines.h).
 *
 * The handler runs on whichever thread makes a watched CUDA call, usually without the GIL (the
 * frameworks release it around CUDA calls): it reads the thread's frames through pyframes.h and
 * copies what it keeps (file and function names as UTF-8, lines), so nothing here holds a Python
 * reference or needs the GIL; `table_lock` guards the tables. A code object is known by its
 * address, checked against its file name object and first line, so that a new code object at the
 * address of a dead one is not taken for it. A runtime call raises a callback of its own and one
 * for each driver call inside it, each with its own correlation id (kernel records carry the
 * runtime's, copies both): the runtime enter reads the frames, and driver enters inside it reuse
 * that. A driver call outside any runtime call (Triton, CuPy kernels) reads them itself. */
#include "pylines.h"
#include "core/cupti_loader.h"
#include "core/errors.h"
#include "core/intmap.h"
#include "core/layout.h"
#include "pyframes.h"

#include <cupti.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define GP_MAX_FRAMES 128
#define NONE UINT32_MAX

enum { MODE_OFF, MODE_LINE, MODE_STACK };
static int mode;            /* atomic: what the handler records */
static unsigned generation; /* atomic: bumped at each start, resets stale per-thread state */
static int handler_added;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static char **prefixes; /* UTF-8 file prefixes that are not user code (under table_lock) */
static size_t n_prefixes;

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

/* Code objects seen, by address, with copies of their names and whether each is user code. */
typedef struct {
    const PyCodeObject *code;
    const PyObject *filename; /* identity check only: never dereferenced after the capture */
    int firstlineno;
    uint8_t user;
    char *file, *func;
} code_entry;

static struct {
    code_entry *data;
    size_t n, cap;
    gp_intmap index; /* address -> index (several when an address was reused) */
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

/* A UTF-8 copy of str `u`, read without the GIL (str objects are immutable); NULL when out of
 * memory. */
static char *
utf8_copy(PyObject *u)
{
    if (u == NULL || !PyUnicode_Check(u))
        return strdup("?");
    Py_ssize_t n = PyUnicode_GET_LENGTH(u);
    int kind = PyUnicode_KIND(u);
    const void *data = PyUnicode_DATA(u);
    char *out = malloc(4 * (size_t)n + 1), *o = out;
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 0x80) {
            *o++ = (char)c;
        } else if (c < 0x800) {
            *o++ = (char)(0xC0 | c >> 6);
            *o++ = (char)(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            *o++ = (char)(0xE0 | c >> 12);
            *o++ = (char)(0x80 | (c >> 6 & 0x3F));
            *o++ = (char)(0x80 | (c & 0x3F));
        } else {
            *o++ = (char)(0xF0 | c >> 18);
            *o++ = (char)(0x80 | (c >> 12 & 0x3F));
            *o++ = (char)(0x80 | (c >> 6 & 0x3F));
            *o++ = (char)(0x80 | (c & 0x3F));
        }
    }
    if (out != NULL)
        *o = '\0';
    return out;
}

static int
is_user(const char *file)
{
    for (size_t k = 0; k < n_prefixes; k++)
        if (strncmp(file, prefixes[k], strlen(prefixes[k])) == 0)
            return 0;
    return 1;
}

static int
same_code(uint32_t i, const void *ctx)
{
    const PyCodeObject *code = ctx;
    return codes.data[i].filename == code->co_filename &&
           codes.data[i].firstlineno == code->co_firstlineno;
}

/* Index of `code` (alive: a frame holds it), added on first sight. table_lock held. */
static uint32_t
code_index(PyCodeObject *code, int *user)
{
    uint64_t key = (uint64_t)(uintptr_t)code;
    uint32_t i = gp_intmap_find(&codes.index, key, same_code, code);
    if (i != NONE) {
        *user = codes.data[i].user;
        return i;
    }
    if (gp_reserve((void **)&codes.data, &codes.cap, codes.n, sizeof *codes.data) < 0)
        return NONE;
#if PY_VERSION_HEX >= 0x030B0000
    PyObject *func = code->co_qualname;
#else
    PyObject *func = code->co_name;
#endif
    code_entry e = {
        code,           code->co_filename, code->co_firstlineno, 0, utf8_copy(code->co_filename),
        utf8_copy(func)};
    i = (uint32_t)codes.n;
    if (e.file == NULL || e.func == NULL || gp_intmap_put(&codes.index, key, i) < 0) {
        free(e.file);
        free(e.func);
        return NONE;
    }
    e.user = (uint8_t)is_user(e.file);
    codes.data[codes.n++] = e;
    *user = e.user;
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
    for (size_t k = 0; k < codes.n; k++) {
        free(codes.data[k].file);
        free(codes.data[k].func);
    }
    free(codes.data);
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

/* ---- reading the frames (any thread, table_lock held) -----------------------------------------
 */

/* The calling thread's site (innermost user frame, else innermost frame) and, when `whole`, its
 * interned stack; NONE when the thread has no Python frame that can be read. */
static void
capture(int whole, uint32_t *site_out, uint32_t *stack_out)
{
    gp_pyframe frames[GP_MAX_FRAMES];
    uint32_t ids[GP_MAX_FRAMES];
    int n = gp_pyframes_read(frames, GP_MAX_FRAMES);
    uint32_t first = NONE, user_site = NONE;
    int kept = 0;
    for (int k = 0; k < n; k++) {
        int user = 0;
        uint32_t ci = code_index(frames[k].code, &user);
        uint32_t s = NONE;
        if (ci != NONE && (whole || k == 0 || user))
            s = site_index(ci, gp_pyframe_line(&frames[k]));
        if (k == 0)
            first = s;
        if (user && user_site == NONE)
            user_site = s;
        if (whole)
            ids[kept++] = s;
        else if (user_site != NONE)
            break;
    }
    *site_out = user_site != NONE ? user_site : first;
    *stack_out = whole && kept > 0 ? stack_index(ids, (size_t)kept) : NONE;
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
    pthread_mutex_lock(&table_lock);
    if (!runtime && tls.in_runtime) {
        note(d->correlationId, tls.site, tls.stack);
        pthread_mutex_unlock(&table_lock);
        return;
    }
    uint32_t site, stack;
    tls.busy = 1;
    capture(m == MODE_STACK, &site, &stack);
    tls.busy = 0;
    note(d->correlationId, site, stack);
    pthread_mutex_unlock(&table_lock);
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
reset(PyObject *prefix_tuple)
{
    if (!PyTuple_Check(prefix_tuple)) {
        PyErr_Format(PyExc_TypeError, "excluded prefixes must be a tuple of str, got %R",
                     prefix_tuple);
        return -1;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(prefix_tuple); k++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(prefix_tuple, k))) {
            PyErr_Format(PyExc_TypeError, "excluded prefixes must be str, got %R",
                         PyTuple_GET_ITEM(prefix_tuple, k));
            return -1;
        }
    Py_ssize_t n = PyTuple_GET_SIZE(prefix_tuple);
    char **copies = calloc((size_t)n + 1, sizeof *copies);
    for (Py_ssize_t k = 0; copies != NULL && k < n; k++) {
        const char *utf8 = PyUnicode_AsUTF8(PyTuple_GET_ITEM(prefix_tuple, k));
        copies[k] = utf8 ? strdup(utf8) : NULL;
        if (copies[k] == NULL) {
            for (Py_ssize_t j = 0; j < k; j++)
                free(copies[j]);
            free(copies);
            copies = NULL;
        }
    }
    if (copies == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -1;
    }
    pthread_mutex_lock(&table_lock);
    clear_tables();
    for (size_t k = 0; k < n_prefixes; k++)
        free(prefixes[k]);
    free(prefixes);
    prefixes = copies;
    n_prefixes = (size_t)n;
    pthread_mutex_unlock(&table_lock);
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
    const code_entry *c = &codes.data[sites.code[k]];
    PyObject *file = PyUnicode_DecodeUTF8(c->file, (Py_ssize_t)strlen(c->file), "replace");
    PyObject *func = PyUnicode_DecodeUTF8(c->func, (Py_ssize_t)strlen(c->func), "replace");
    PyObject *t = file && func ? Py_BuildValue("(OiOO)", file, sites.line[k], func,
                                               c->user ? Py_True : Py_False)
                               : NULL;
    Py_XDECREF(file);
    Py_XDECREF(func);
    return t;
}

/* _pylines_take() -> {"notes": bytes, "sites": [(file, line, function, user)], "stacks":
 * [tuple of site ids, innermost first], "lost": int}: the notes since the last take (they are
 * cleared), and every site and stack so far. The notes and counts are taken under the lock and
 * the objects made after it (making objects may run a finalizer that calls CUDA, whose callback
 * takes the lock). The tables only grow, and only reset() (GIL held, like this) empties them. */
static PyObject *
pylines_take(PyObject *module, PyObject *unused)
{
    pthread_mutex_lock(&table_lock);
    gp_pyline_out *taken = notes.data;
    size_t n_notes = notes.n, n_sites = sites.n, n_stacks = stacks.n;
    unsigned long long lost = notes_lost;
    notes.data = NULL;
    notes.n = notes.cap = 0;
    notes_lost = 0;
    pthread_mutex_unlock(&table_lock);
    PyObject *raw =
        PyBytes_FromStringAndSize((const char *)taken, (Py_ssize_t)(n_notes * sizeof *taken));
    free(taken);
    PyObject *site_list = raw ? PyList_New((Py_ssize_t)n_sites) : NULL;
    PyObject *stack_list = site_list ? PyList_New((Py_ssize_t)n_stacks) : NULL;
    if (stack_list == NULL)
        goto error;
    for (size_t k = 0; k < n_sites; k++) {
        PyObject *t = site_tuple(k);
        if (t == NULL)
            goto error;
        PyList_SET_ITEM(site_list, (Py_ssize_t)k, t);
    }
    for (size_t k = 0; k < n_stacks; k++) {
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
    return Py_BuildValue("{s:N,s:N,s:N,s:K}", "notes", raw, "sites", site_list, "stacks",
                         stack_list, "lost", lost);
error:
    Py_XDECREF(raw);
    Py_XDECREF(site_list);
    Py_XDECREF(stack_list);
    return NULL;
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
    pthread_mutex_lock(&table_lock);
    capture(whole, &site, &stack);
    note(corr, site, stack);
    pthread_mutex_unlock(&table_lock);
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
