/* The questions about the attention kernels that need no device work: what impl="auto" picks and
 * why (_C._attention_auto_choice, which the main job prints), and in _C._testing what the tests and
 * benchmarks ask of flash_wgmma's host rules (its schedule, O store and item order per shape, the
 * fast division) and its forced runs (attention_wgmma: one schedule of the table, or one O store,
 * in place of the rule's). */
#include "attention_queries.h"
#include "array.h"
#include "attention/attention.h"
#include "attention/flash_wgmma/schedules.h"
#include "attention_impls.h"
#include "attention_py.h"
#include "core/device.h"
#include "core/events.h"
#include "core/testing.h"

#include <string.h>

/* Parameters of contiguous arrays of this dtype and shape at an aligned (or, with aligned 0,
 * a 2-byte misaligned) placeholder address: enough to choose an implementation, never launched. */
static int
choice_params(const char *dtype_name, const int shape[4], int aligned, gp_attn_params *p)
{
    const int dtype = gp_dtype_from_name(dtype_name);
    if (dtype < 0) {
        PyErr_Format(PyExc_ValueError, "unknown dtype '%s'", dtype_name);
        return -1;
    }
    for (int i = 0; i < 4; i++)
        if (shape[i] < 1) {
            PyErr_Format(PyExc_ValueError, "attention: shape (%d, %d, %d, %d) has a dimension < 1",
                         shape[0], shape[1], shape[2], shape[3]);
            return -1;
        }
    memset(p, 0, sizeof *p);
    p->batch = shape[0];
    p->heads = shape[1];
    p->seq = shape[2];
    p->head_dim = shape[3];
    p->scale = 1.0f;
    p->dtype = (gp_attn_dtype)dtype;
    p->q = p->k = p->v = p->o = (void *)(uintptr_t)(aligned ? 256 : 258);
    const int64_t dense[3] = {(int64_t)p->heads * p->seq * p->head_dim,
                              (int64_t)p->seq * p->head_dim, p->head_dim};
    int64_t *strides[4] = {p->q_stride, p->k_stride, p->v_stride, p->o_stride};
    for (int i = 0; i < 4; i++)
        memcpy(strides[i], dense, sizeof dense);
    return 0;
}

/* auto's choice for p: 1 if the current device was asked, 0 without a device; -1 with an error. */
static int
auto_choice(const gp_attn_params *p, int *chosen)
{
    if (gp_attn_choose_impl(IMPL_AUTO, p, chosen) < 0)
        return -1;
    if (gp_current_device() < 0) { /* no device: the choice without one */
        PyErr_Clear();
        return 0;
    }
    gp_attn_prefer_runnable(IMPL_AUTO, p, chosen);
    return 1;
}

/* The implementation impl='auto' picks for a dtype, head_dim and row alignment. */
static PyObject *
attention_auto_impl(PyObject *module, PyObject *args)
{
    const char *dtype_name;
    int head_dim, aligned;
    if (!PyArg_ParseTuple(args, "sip:attention_auto_impl", &dtype_name, &head_dim, &aligned))
        return NULL;
    const int shape[4] = {1, 1, 1, head_dim};
    gp_attn_params p;
    int chosen = IMPL_NAIVE; /* set on success; initialized for the compiler */
    if (choice_params(dtype_name, shape, aligned, &p) < 0 || auto_choice(&p, &chosen) < 0)
        return NULL;
    return PyUnicode_FromString(gp_attn_impl_name(chosen));
}

/* (impl, reason): what impl='auto' picks for contiguous, aligned arrays of this dtype, shape and
 * causal on the current device, and why (gp_attn_auto_reason); where that is flash_wgmma, the
 * reason ends with the schedule it runs for the shape (gp_attn_flash_wgmma_schedule). */
static PyObject *
attention_auto_choice(PyObject *module, PyObject *args)
{
    const char *dtype_name;
    int shape[4], causal = 0;
    if (!PyArg_ParseTuple(args, "s(iiii)|p:_attention_auto_choice", &dtype_name, &shape[0],
                          &shape[1], &shape[2], &shape[3], &causal))
        return NULL;
    gp_attn_params p;
    int chosen = IMPL_NAIVE; /* set on success; initialized for the compiler */
    int on_device;
    if (choice_params(dtype_name, shape, 1, &p) < 0 || (on_device = auto_choice(&p, &chosen)) < 0)
        return NULL;
    p.causal = causal;
    PyObject *reason = gp_attn_auto_reason(&p, chosen, on_device);
    if (reason != NULL && chosen == IMPL_FLASH_WGMMA) /* only with a device */
        Py_SETREF(reason, gp_attn_with_wgmma_schedule(reason, &p));
    if (reason == NULL)
        return NULL;
    return Py_BuildValue("(sN)", gp_attn_impl_name(chosen), reason);
}

/* The sms argument of the schedule queries: an int from 1 to 2^20, or None for the current
 * device's SM count. 0, or -1 with an exception. */
static int
sms_arg(PyObject *sms_obj, int *sms)
{
    const long n = sms_obj == Py_None                                ? gp_attn_current_sms()
                   : PyLong_Check(sms_obj) && !PyBool_Check(sms_obj) ? PyLong_AsLong(sms_obj)
                                                                     : -1;
    if (sms_obj == Py_None && n < 0)
        return -1;
    if (n < 1 || n > 1 << 20) { /* an int past long's range: its OverflowError replaced */
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "sms must be an int from 1 to 2**20, got %R", sms_obj);
        return -1;
    }
    *sms = (int)n;
    return 0;
}

/* The parameters of the schedule queries: a contiguous bf16 case of `shape` that flash_wgmma takes
 * (its checks, with their messages), causal or not. 0, or -1 with an exception. */
static int
wgmma_query_params(const int shape[4], int causal, gp_attn_params *p)
{
    int impl;
    if (choice_params("bfloat16", shape, 1, p) < 0 ||
        gp_attn_choose_impl(IMPL_FLASH_WGMMA, p, &impl) < 0)
        return -1;
    p->causal = causal;
    return 0;
}

/* The name of the schedule flash_wgmma runs for (batch, heads, seq, head_dim) and causal on a
 * device of `sms` SMs (None: the current device's); pure but for that query. */
static PyObject *
attention_wgmma_schedule(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"shape", "causal", "sms", NULL};
    int shape[4], causal = 0;
    PyObject *sms_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "(iiii)|pO:attention_wgmma_schedule", kwlist,
                                     &shape[0], &shape[1], &shape[2], &shape[3], &causal, &sms_obj))
        return NULL;
    gp_attn_params p;
    int sms;
    if (wgmma_query_params(shape, causal, &p) < 0 || sms_arg(sms_obj, &sms) < 0)
        return NULL;
    return PyUnicode_FromString(
        gp_attn_flash_wgmma_schedule_name(gp_attn_flash_wgmma_schedule(&p, sms)));
}

/* attention_wgmma_out((batch, heads, seq, head_dim), causal=False, schedule): how that schedule
 * (by name, "fixed", "persist", ...) stores O for this shape: "smem" (through shared memory and
 * TMA) or "regs" (from registers); pure. */
static PyObject *
attention_wgmma_out(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"shape", "causal", "schedule", NULL};
    int shape[4], causal = 0;
    const char *name;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "(iiii)ps:attention_wgmma_out", kwlist,
                                     &shape[0], &shape[1], &shape[2], &shape[3], &causal, &name))
        return NULL;
    gp_attn_params p;
    int schedule;
    if (wgmma_query_params(shape, causal, &p) < 0 ||
        (schedule = gp_attn_wgmma_schedule_by_name(name, "attention_wgmma_out", 0)) < 0)
        return NULL;
    return PyUnicode_FromString(gp_attn_flash_wgmma_out_smem(&p, schedule) ? "smem" : "regs");
}

/* attention_wgmma_order((batch, heads, seq, head_dim), causal, schedule, sms=None): how that
 * persistent schedule hands its items to its blocks on sms SMs (None: the current device's). */
static PyObject *
attention_wgmma_order(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"shape", "causal", "schedule", "sms", NULL};
    int shape[4], causal = 0;
    const char *name;
    PyObject *sms_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "(iiii)ps|O:attention_wgmma_order", kwlist,
                                     &shape[0], &shape[1], &shape[2], &shape[3], &causal, &name,
                                     &sms_obj))
        return NULL;
    gp_attn_params p;
    int sms, schedule;
    if (wgmma_query_params(shape, causal, &p) < 0 || sms_arg(sms_obj, &sms) < 0 ||
        (schedule = gp_attn_wgmma_schedule_by_name(name, "attention_wgmma_order", 0)) < 0)
        return NULL;
    const char *order = gp_attn_flash_wgmma_order(&p, schedule, sms);
    if (order == NULL) {
        PyObject *persistent = gp_attn_wgmma_schedule_names(GP_ATTN_NAMES_PERSISTENT);
        if (persistent != NULL)
            PyErr_Format(PyExc_ValueError,
                         "attention_wgmma_order: '%s' is not a persistent schedule (%U)", name,
                         persistent);
        Py_XDECREF(persistent);
        return NULL;
    }
    return PyUnicode_FromString(order);
}

/* attention_fast_div(d, n): n // d as flash_wgmma's persistent kernels compute it (tests). */
static PyObject *
attention_fast_div(PyObject *module, PyObject *args)
{
    long long d, n;
    if (!PyArg_ParseTuple(args, "LL:attention_fast_div", &d, &n))
        return NULL;
    const long long q = gp_attn_fast_div(d, n);
    if (q < 0)
        return PyErr_Format(PyExc_ValueError,
                            "attention_fast_div takes d from 1 to 2**32 - 1 and n from 0 to "
                            "2**31 - 1, got d=%lld, n=%lld",
                            d, n);
    return PyLong_FromLongLong(q);
}

/* attention_wgmma(q, k, v, out=None, *, schedule='per_shape', store=None, causal=False,
 * scale=None, stream=None): gp.kernels.attention with impl='flash_wgmma', its schedule (a name of
 * the table) and O store ('smem', 'regs'; None: the rule's) forced. */
static PyObject *
attention_wgmma(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"q",     "k",      "v",     "out",    "schedule",
                             "store", "causal", "scale", "stream", NULL};
    PyObject *objs[4] = {NULL, NULL, NULL, Py_None}, *scale_obj = Py_None, *stream_obj = Py_None;
    const char *name = "per_shape", *store = NULL;
    int causal = 0, schedule, out = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|O$szpOO:attention_wgmma", kwlist, &objs[0],
                                     &objs[1], &objs[2], &objs[3], &name, &store, &causal,
                                     &scale_obj, &stream_obj) ||
        (schedule = gp_attn_wgmma_schedule_by_name(name, "attention_wgmma", 1)) < 0)
        return NULL;
    if (store != NULL && strcmp(store, "smem") == 0)
        out = GP_ATTN_WGMMA_OUT_SMEM;
    else if (store != NULL && strcmp(store, "regs") == 0)
        out = GP_ATTN_WGMMA_OUT_REGS;
    else if (store != NULL)
        return PyErr_Format(PyExc_ValueError,
                            "attention_wgmma: store must be 'smem', 'regs' or None, got '%s'",
                            store);
    return gp_attention_run(objs, "flash_wgmma", causal, scale_obj, stream_obj, schedule, out);
}

static PyMethodDef public_methods[] = {
    {"_attention_auto_choice", attention_auto_choice, METH_VARARGS,
     "_attention_auto_choice(dtype, (batch, heads, seq, head_dim), causal=False): (impl, reason): "
     "what 'auto' picks for contiguous aligned arrays on the current device, and why (for "
     "flash_wgmma, with the schedule it runs for the shape)."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef testing_methods[] = {
    {"attention_wgmma", (PyCFunction)(void (*)(void))attention_wgmma, METH_VARARGS | METH_KEYWORDS,
     "attention_wgmma(q, k, v, out=None, *, schedule='per_shape', store=None, causal=False, "
     "scale=None, stream=None): impl='flash_wgmma' with one schedule of ATTENTION_WGMMA_SCHEDULES "
     "(by name) and/or one O store ('smem', 'regs') forced in place of the rule's; what this build "
     "does not have (ATTENTION_WGMMA_LAB) is refused before any device work."},
    {"attention_auto_impl", attention_auto_impl, METH_VARARGS,
     "attention_auto_impl(dtype, head_dim, aligned): the impl that 'auto' picks on the current "
     "device (without a device: what it would pick off Hopper)."},
    {"attention_wgmma_schedule", (PyCFunction)(void (*)(void))attention_wgmma_schedule,
     METH_VARARGS | METH_KEYWORDS,
     "attention_wgmma_schedule((batch, heads, seq, head_dim), causal=False, sms=None): the "
     "schedule flash_wgmma runs for this shape on sms SMs (None: the current device's)."},
    {"attention_wgmma_out", (PyCFunction)(void (*)(void))attention_wgmma_out,
     METH_VARARGS | METH_KEYWORDS,
     "attention_wgmma_out((batch, heads, seq, head_dim), causal, schedule): 'smem' where that "
     "flash_wgmma schedule stores O through shared memory and TMA for this shape, 'regs' where "
     "from registers."},
    {"attention_wgmma_order", (PyCFunction)(void (*)(void))attention_wgmma_order,
     METH_VARARGS | METH_KEYWORDS,
     "attention_wgmma_order((batch, heads, seq, head_dim), causal, schedule, sms=None): how that "
     "persistent flash_wgmma schedule hands its work items to its blocks on sms SMs (None: the "
     "current device's): 'in order', 'twos' or 'heaviest first'."},
    {"attention_fast_div", attention_fast_div, METH_VARARGS,
     "attention_fast_div(d, n): n // d as flash_wgmma's persistent kernels divide (a multiply-high "
     "and a shift); d from 1 to 2**32 - 1, n from 0 to 2**31 - 1."},
    {NULL, NULL, 0, NULL},
};

int
gp_attention_queries_init(PyObject *module)
{
    PyObject *testing = gp_testing_module(module);
    if (testing == NULL ||
        PyModule_AddObjectRef(testing, "ATTENTION_WGMMA_LAB",
                              gp_attn_flash_wgmma_lab() ? Py_True : Py_False) < 0 ||
        PyModule_AddFunctions(testing, testing_methods) < 0)
        return -1;
    return PyModule_AddFunctions(module, public_methods);
}
