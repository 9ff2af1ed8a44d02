/* Python lines' tables (pysites.h). */
#include "pysites.h"
#include "core/intmap.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

pthread_mutex_t gp_pysites_lock = PTHREAD_MUTEX_INITIALIZER;
static char **prefixes; /* UTF-8 file prefixes that are not user code */
static size_t n_prefixes;

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

/* Sites: (code index, line); `at` caches the site of each (code index, instruction offset), so
 * that a line table is read once per call site. */
static struct {
    uint32_t *code;
    int32_t *line;
    size_t n, cap, cap_line;
    gp_intmap index; /* code index << 32 | line -> index */
    gp_intmap at;    /* code index << 32 | instruction offset -> index */
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

/* API records not yet taken. */
static struct {
    gp_pyapi_out *data;
    size_t n, cap;
} apis;

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
uint32_t
gp_pysites_code(PyCodeObject *code, int *user)
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

uint32_t
gp_pysites_site(uint32_t code, int line)
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

uint32_t
gp_pysites_site_at(uint32_t code, gp_pyframe *frame)
{
    if (frame->line >= 0) /* read with the line already known */
        return gp_pysites_site(code, frame->line);
    uint64_t key = ((uint64_t)code << 32 | (uint32_t)frame->lasti) + 1;
    uint32_t i = gp_intmap_find(&sites.at, key, NULL, NULL);
    if (i == NONE) {
        i = gp_pysites_site(code, gp_pyframe_line(frame));
        if (i != NONE && gp_intmap_put(&sites.at, key, i) < 0)
            return i; /* uncached: found again next time */
    }
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

uint32_t
gp_pysites_stack(const uint32_t *ids, size_t n)
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

void
gp_pysites_note(uint32_t correlation_id, uint32_t site, uint32_t stack,
                const gp_autograd_mark *mark)
{
    if (gp_reserve((void **)&notes.data, &notes.cap, notes.n, sizeof *notes.data) < 0) {
        notes_lost++;
        return;
    }
    notes.data[notes.n++] = (gp_pyline_out){.seq = mark->seq,
                                            .correlation_id = correlation_id,
                                            .site = site,
                                            .stack = stack,
                                            .thread = mark->thread,
                                            .pass = mark->pass};
}

void
gp_pysites_api(const gp_pyapi_out *api)
{
    if (gp_reserve((void **)&apis.data, &apis.cap, apis.n, sizeof *apis.data) < 0) {
        notes_lost++;
        return;
    }
    apis.data[apis.n++] = *api;
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
    gp_intmap_clear(&sites.at);
    free(stacks.pool);
    free(stacks.start);
    free(stacks.len);
    gp_intmap_clear(&stacks.index);
    free(notes.data);
    free(apis.data);
    memset(&apis, 0, sizeof apis);
    memset(&codes, 0, sizeof codes);
    memset(&sites, 0, sizeof sites);
    memset(&stacks, 0, sizeof stacks);
    memset(&notes, 0, sizeof notes);
    notes_lost = 0;
}

/* Clears the tables and sets the excluded prefixes (a tuple of str). 0 or -1 with TypeError. */
int
gp_pysites_reset(PyObject *prefix_tuple)
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
    pthread_mutex_lock(&gp_pysites_lock);
    clear_tables();
    for (size_t k = 0; k < n_prefixes; k++)
        free(prefixes[k]);
    free(prefixes);
    prefixes = copies;
    n_prefixes = (size_t)n;
    pthread_mutex_unlock(&gp_pysites_lock);
    return 0;
}

/* What take() reads of the tables, copied under the lock: once it is dropped, a launching
 * thread may grow the arrays and a reset (from a finalizer run by the objects take() makes, or
 * from another thread) frees the names. */
typedef struct {
    char *file, *func; /* owned copies */
    int user;
} code_copy;

typedef struct {
    uint32_t code;
    int line;
} site_copy;

static void
free_code_copies(code_copy *c, size_t n)
{
    for (size_t k = 0; c != NULL && k < n; k++) {
        free(c[k].file);
        free(c[k].func);
    }
    free(c);
}

/* Copies of the code entries' names; NULL when out of memory. Lock held. */
static code_copy *
copy_codes(size_t n)
{
    code_copy *c = calloc(n ? n : 1, sizeof *c);
    for (size_t k = 0; c != NULL && k < n; k++) {
        c[k].file = strdup(codes.data[k].file);
        c[k].func = strdup(codes.data[k].func);
        c[k].user = codes.data[k].user;
        if (c[k].file == NULL || c[k].func == NULL) {
            free_code_copies(c, k + 1);
            c = NULL;
        }
    }
    return c;
}

static PyObject *
site_tuple(const site_copy *s, const code_copy *codes_taken)
{
    const code_copy *c = &codes_taken[s->code];
    PyObject *file = PyUnicode_DecodeUTF8(c->file, (Py_ssize_t)strlen(c->file), "replace");
    PyObject *func = PyUnicode_DecodeUTF8(c->func, (Py_ssize_t)strlen(c->func), "replace");
    PyObject *t = file && func
                      ? Py_BuildValue("(OiOO)", file, s->line, func, c->user ? Py_True : Py_False)
                      : NULL;
    Py_XDECREF(file);
    Py_XDECREF(func);
    return t;
}

static PyObject *
stack_tuple(const uint32_t *ids, uint32_t n)
{
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    for (uint32_t j = 0; t != NULL && j < n; j++) {
        PyObject *id = PyLong_FromUnsignedLong(ids[j]);
        if (id == NULL)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, (Py_ssize_t)j, id);
    }
    return t;
}

/* Everything is copied under the lock and the objects are made after it: making objects may run
 * a finalizer that calls CUDA, whose callback takes the lock. */
PyObject *
gp_pysites_take(void)
{
    pthread_mutex_lock(&gp_pysites_lock);
    gp_pyline_out *taken = notes.data;
    gp_pyapi_out *taken_api = apis.data;
    size_t n_api = apis.n;
    apis.data = NULL;
    apis.n = apis.cap = 0;
    size_t n_notes = notes.n, n_sites = sites.n, n_stacks = stacks.n, n_pool = stacks.n_pool;
    unsigned long long lost = notes_lost;
    notes.data = NULL;
    notes.n = notes.cap = 0;
    notes_lost = 0;
    size_t n_codes = codes.n;
    code_copy *code_copies = copy_codes(n_codes);
    site_copy *site_copies = calloc(n_sites ? n_sites : 1, sizeof *site_copies);
    uint32_t *pool = calloc(n_pool ? n_pool : 1, sizeof *pool);
    uint32_t *start = calloc(n_stacks ? n_stacks : 1, sizeof *start);
    uint32_t *len = calloc(n_stacks ? n_stacks : 1, sizeof *len);
    int copied = code_copies && site_copies && pool && start && len;
    if (copied) {
        for (size_t k = 0; k < n_sites; k++)
            site_copies[k] = (site_copy){sites.code[k], sites.line[k]};
        if (n_stacks > 0) { /* (the arrays are NULL while empty: memcpy may not take NULL) */
            memcpy(pool, stacks.pool, n_pool * sizeof *pool);
            memcpy(start, stacks.start, n_stacks * sizeof *start);
            memcpy(len, stacks.len, n_stacks * sizeof *len);
        }
    }
    pthread_mutex_unlock(&gp_pysites_lock);
    PyObject *raw = NULL, *api = NULL, *site_list = NULL, *stack_list = NULL, *out = NULL;
    if (!copied) {
        PyErr_NoMemory();
        goto done;
    }
    raw = PyBytes_FromStringAndSize((const char *)taken, (Py_ssize_t)(n_notes * sizeof *taken));
    api = raw ? PyBytes_FromStringAndSize((const char *)taken_api,
                                          (Py_ssize_t)(n_api * sizeof *taken_api))
              : NULL;
    site_list = api ? PyList_New((Py_ssize_t)n_sites) : NULL;
    stack_list = site_list ? PyList_New((Py_ssize_t)n_stacks) : NULL;
    if (stack_list == NULL)
        goto done;
    for (size_t k = 0; k < n_sites; k++) {
        PyObject *t = site_tuple(&site_copies[k], code_copies);
        if (t == NULL)
            goto done;
        PyList_SET_ITEM(site_list, (Py_ssize_t)k, t);
    }
    for (size_t k = 0; k < n_stacks; k++) {
        PyObject *t = stack_tuple(pool + start[k], len[k]);
        if (t == NULL)
            goto done;
        PyList_SET_ITEM(stack_list, (Py_ssize_t)k, t);
    }
    out = Py_BuildValue("{s:O,s:O,s:O,s:O,s:K}", "notes", raw, "api", api, "sites", site_list,
                        "stacks", stack_list, "lost", lost);
done:
    Py_XDECREF(raw);
    Py_XDECREF(api);
    Py_XDECREF(site_list);
    Py_XDECREF(stack_list);
    free(taken);
    free(taken_api);
    free_code_copies(code_copies, n_codes);
    free(site_copies);
    free(pool);
    free(start);
    free(len);
    return out;
}
