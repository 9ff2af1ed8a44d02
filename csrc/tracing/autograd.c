/* Which autograd node a CUDA call belongs to (autograd.h). */
#include "autograd.h"
#include "core/errors.h"

#include <dlfcn.h>
#include <string.h>

/* torch::autograd::get_current_node() returns a std::shared_ptr<Node> (two words: the node and
 * its control block) or, in later torch, a c10::intrusive_ptr<Node> (one word). Both have a
 * non-trivial destructor, so the C++ ABI returns them through memory whose address the caller
 * passes, in the register a C struct over 16 bytes uses too (rdi on x86-64, x8 on AArch64):
 * declared as returning this struct, the call is made as C++ makes it. Unwritten words are
 * never read. */
typedef struct {
    void *w[3];
} smart_ptr;

static uint64_t (*peek_fn)(void);     /* at::sequence_number::peek() */
static uint64_t (*thread_fn)(void);   /* at::RecordFunction::currentThreadId() */
static smart_ptr (*node_fn)(void);    /* torch::autograd::get_current_node() */

enum { REF_UNKNOWN, REF_INTRUSIVE, REF_SHARED };
static int ref_kind;                  /* found by _autograd_probe */
static int seq_word, thread_word;     /* the node's fields, in 8-byte words; thread -1: none */
static int enabled;                   /* atomic: bound, probed and calibrated */

#define MAX_WORDS 32

/* The reference count the call added, in bytes from the node (intrusive) or from the control
 * block (shared): both put it in the word after the vtable pointer. */
static void *
count_of(const smart_ptr *p)
{
    return ref_kind == REF_INTRUSIVE ? (char *)p->w[0] + 8 : (char *)p->w[1] + 8;
}

/* Gives back the reference the call returned. While the engine runs a node, its task and the
 * thread-local it set hold two more, so the count never falls to where a release has effects
 * (freeing the node; for an intrusive count, dropping its Python object's reference at 2 -> 1):
 * should it ever stand that low, the reference is kept (a node leaks) rather than released
 * without those effects. */
static void
release(const smart_ptr *p)
{
    if (p->w[0] == NULL)
        return;
    if (ref_kind == REF_INTRUSIVE) {
        uint64_t *count = count_of(p), old = __atomic_load_n(count, __ATOMIC_ACQUIRE);
        do {
            if ((uint32_t)old <= 2) /* the strong count is the low half */
                return;
        } while (!__atomic_compare_exchange_n(count, &old, old - 1, 1, __ATOMIC_ACQ_REL,
                                              __ATOMIC_ACQUIRE));
    } else {
        int32_t *count = count_of(p), old = __atomic_load_n(count, __ATOMIC_ACQUIRE);
        do {
            if (old <= 1)
                return;
        } while (!__atomic_compare_exchange_n(count, &old, old - 1, 1, __ATOMIC_ACQ_REL,
                                              __ATOMIC_ACQUIRE));
    }
}

static _Thread_local uint64_t forward_thread; /* torch's id of this thread, once read */

void
gp_autograd_mark_now(gp_autograd_mark *out)
{
    out->seq = 0;
    out->thread = 0;
    out->pass = GP_PASS_NONE;
    if (!__atomic_load_n(&enabled, __ATOMIC_ACQUIRE))
        return;
    smart_ptr p = node_fn();
    if (p.w[0] != NULL) {
        const uint64_t *node = p.w[0];
        out->seq = node[seq_word];
        out->thread = thread_word >= 0 ? (uint32_t)node[thread_word] : 0;
        out->pass = GP_PASS_BACKWARD;
        release(&p);
        return;
    }
    if (forward_thread == 0)
        forward_thread = thread_fn();
    out->seq = peek_fn();
    out->thread = (uint32_t)forward_thread;
    out->pass = GP_PASS_FORWARD;
}

/* ---- Python entry points (GIL held) ---------------------------------------------------------- */

/* _autograd_bind(path): finds the three functions in the torch library at `path`, which must be
 * loaded already (nothing is loaded here). Turns the marks off until the next _autograd_enable. */
static PyObject *
autograd_bind(PyObject *module, PyObject *arg)
{
    PyObject *bytes;
    if (!PyUnicode_FSConverter(arg, &bytes))
        return NULL;
    __atomic_store_n(&enabled, 0, __ATOMIC_RELEASE);
    void *lib = dlopen(PyBytes_AS_STRING(bytes), RTLD_LAZY | RTLD_NOLOAD);
    Py_DECREF(bytes);
    if (lib == NULL) {
        const char *why = dlerror();
        return PyErr_Format(gp_GpuProfileError, "torch's library is not loaded: %s",
                            why ? why : "dlopen failed");
    }
    static const char *names[] = {"_ZN2at15sequence_number4peekEv",
                                  "_ZN2at14RecordFunction15currentThreadIdEv",
                                  "_ZN5torch8autograd16get_current_nodeEv"};
    void *found[3];
    for (int k = 0; k < 3; k++) {
        found[k] = dlsym(lib, names[k]);
        if (found[k] == NULL) {
            dlclose(lib);
            return PyErr_Format(gp_GpuProfileError, "torch's library has no %s", names[k]);
        }
    }
    /* The handle stays open: the functions are called until the process ends. What a probe
     * found about the node holds while it is the same function. */
    smart_ptr (*node)(void);
    memcpy(&node, &found[2], sizeof node);
    if (node != node_fn)
        ref_kind = REF_UNKNOWN;
    memcpy(&peek_fn, &found[0], sizeof peek_fn);
    memcpy(&thread_fn, &found[1], sizeof thread_fn);
    node_fn = node;
    Py_RETURN_NONE;
}

static int
bound(void)
{
    if (node_fn == NULL) {
        PyErr_SetString(gp_GpuProfileError, "torch's autograd functions are not bound");
        return 0;
    }
    return 1;
}

/* _autograd_forward() -> (next sequence number, torch's thread id) of the calling thread. */
static PyObject *
autograd_forward(PyObject *module, PyObject *unused)
{
    if (!bound())
        return NULL;
    return Py_BuildValue("(KK)", (unsigned long long)peek_fn(), (unsigned long long)thread_fn());
}

/* Which smart pointer `get_current_node` returns, from two calls on the same live node: the one
 * whose count the callee raised. An intrusive count sits in the node, right after its vtable
 * pointer; there a shared_ptr's node keeps its enable_shared_from_this pointer, which no call
 * changes. A shared_ptr's count is confirmed the same way in its control block. 1, or 0 (the
 * references taken stay taken: a tiny node leaks rather than a count being guessed). */
static int
probe_kind(smart_ptr *a)
{
    uint64_t before = __atomic_load_n((uint64_t *)((char *)a->w[0] + 8), __ATOMIC_ACQUIRE);
    smart_ptr b = node_fn();
    uint64_t after = __atomic_load_n((uint64_t *)((char *)a->w[0] + 8), __ATOMIC_ACQUIRE);
    if (b.w[0] != a->w[0])
        return 0;
    if (after == before + 1) {
        ref_kind = REF_INTRUSIVE;
        release(&b);
        return 1;
    }
    if (a->w[1] == NULL || b.w[1] != a->w[1] || ((uintptr_t)a->w[1] & 7) != 0)
        return 0;
    int32_t *count = (int32_t *)((char *)a->w[1] + 8);
    int32_t held = __atomic_load_n(count, __ATOMIC_ACQUIRE);
    __atomic_fetch_sub(count, 1, __ATOMIC_ACQ_REL); /* b's reference */
    smart_ptr c = node_fn();
    int32_t again = __atomic_load_n(count, __ATOMIC_ACQUIRE);
    if (c.w[0] != a->w[0] || c.w[1] != a->w[1] || again != held) {
        __atomic_fetch_add(count, 1, __ATOMIC_ACQ_REL); /* leave it as the calls made it */
        return 0;
    }
    ref_kind = REF_SHARED;
    release(&c);
    return 1;
}

/* _autograd_probe(nwords) -> None (no node is being evaluated on this thread) or the first
 * `nwords` 8-byte words of the current node, as ints. Called from a node's pre-hook during the
 * calibration; the first call also finds which smart pointer the node comes in. */
static PyObject *
autograd_probe(PyObject *module, PyObject *arg)
{
    long nwords = PyLong_AsLong(arg);
    if (nwords == -1 && PyErr_Occurred())
        return NULL;
    if (nwords < 1 || nwords > MAX_WORDS)
        return PyErr_Format(PyExc_ValueError, "nwords must be in 1..%d, got %ld", MAX_WORDS,
                            nwords);
    if (!bound())
        return NULL;
    smart_ptr a = node_fn();
    if (a.w[0] == NULL)
        Py_RETURN_NONE;
    if (ref_kind == REF_UNKNOWN && !probe_kind(&a)) {
        PyErr_SetString(gp_GpuProfileError,
                        "torch's current autograd node comes in a smart pointer gpuprofile does "
                        "not recognise");
        return NULL;
    }
    uint64_t words[MAX_WORDS];
    memcpy(words, a.w[0], (size_t)nwords * sizeof words[0]);
    release(&a);
    PyObject *out = PyTuple_New(nwords);
    for (long k = 0; out != NULL && k < nwords; k++) {
        PyObject *v = PyLong_FromUnsignedLongLong(words[k]);
        if (v == NULL)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, k, v);
    }
    return out;
}

/* _autograd_enable(seq_word, thread_word): the node's fields as the calibration found them
 * (thread_word -1: none); marks are taken from now on. */
static PyObject *
autograd_enable(PyObject *module, PyObject *args)
{
    int s, t;
    if (!PyArg_ParseTuple(args, "ii:_autograd_enable", &s, &t))
        return NULL;
    if (s < 0 || s >= MAX_WORDS || t < -1 || t >= MAX_WORDS || s == t)
        return PyErr_Format(PyExc_ValueError, "bad node words: sequence %d, thread %d", s, t);
    if (!bound())
        return NULL;
    if (ref_kind == REF_UNKNOWN) {
        PyErr_SetString(gp_GpuProfileError, "probe a node (_autograd_probe) before enabling");
        return NULL;
    }
    seq_word = s;
    thread_word = t;
    __atomic_store_n(&enabled, 1, __ATOMIC_RELEASE);
    Py_RETURN_NONE;
}

/* _autograd_disable(): no more marks (launches are noted as without torch). */
static PyObject *
autograd_disable(PyObject *module, PyObject *unused)
{
    __atomic_store_n(&enabled, 0, __ATOMIC_RELEASE);
    Py_RETURN_NONE;
}

static PyMethodDef autograd_methods[] = {
    {"_autograd_bind", autograd_bind, METH_O,
     "_autograd_bind(path): find torch's autograd functions in its loaded library."},
    {"_autograd_forward", autograd_forward, METH_NOARGS,
     "(next sequence number, torch's thread id) of the calling thread."},
    {"_autograd_probe", autograd_probe, METH_O,
     "_autograd_probe(nwords): the first words of the autograd node being evaluated, or None."},
    {"_autograd_enable", autograd_enable, METH_VARARGS,
     "_autograd_enable(seq_word, thread_word): mark launches with their autograd node."},
    {"_autograd_disable", autograd_disable, METH_NOARGS, "Stop marking launches."},
    {NULL, NULL, 0, NULL},
};

int
gp_autograd_init(PyObject *module)
{
    return PyModule_AddFunctions(module, autograd_methods);
}
