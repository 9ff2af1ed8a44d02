/* The attention implementations (attention_impls.h): the table, its names, "auto". */
#include "attention_impls.h"
#include "core/errors.h"
#include "core/events.h"
#include "core/util.h"

#include <string.h>

static cudaError_t
launch_naive(const gp_attn_params *p, void *workspace, cudaStream_t stream)
{
    return gp_attn_naive(p, workspace, stream);
}

static cudaError_t
launch_flash(const gp_attn_params *p, void *workspace, cudaStream_t stream)
{
    (void)workspace;
    return gp_attn_flash(p, stream);
}

static cudaError_t
launch_flash_tc(const gp_attn_params *p, void *workspace, cudaStream_t stream)
{
    (void)workspace;
    return gp_attn_flash_tc(p, stream);
}

static cudaError_t
launch_flash_wgmma(const gp_attn_params *p, void *workspace, cudaStream_t stream)
{
    (void)workspace;
    return gp_attn_flash_wgmma_launch(p, stream);
}

const gp_attn_impl gp_attn_impls[IMPL_COUNT] = {
    [IMPL_NAIVE] = {"naive",
                    "float32, float16, bfloat16; head_dim up to 256 (tensor cores for fp16/bf16 "
                    "at head_dim 64 and 128 with 16-byte aligned rows)",
                    "any CUDA device", "the seq x seq scores of every (batch, head) in fp32", 0,
                    gp_attn_naive_supports, gp_attn_naive_workspace_bytes, launch_naive},
    [IMPL_FLASH] = {"flash", "float32, float16, bfloat16 (fp32 arithmetic); head_dim 64 or 128",
                    "any CUDA device", NULL, 0, gp_attn_flash_supports, NULL, launch_flash},
    [IMPL_FLASH_TC] = {"flash_tc",
                       "float16, bfloat16; head_dim 64 or 128; 16-byte aligned rows",
                       "compute capability 8.0 or newer", NULL, 1, gp_attn_flash_tc_supports, NULL,
                       launch_flash_tc},
    [IMPL_FLASH_WGMMA] = {"flash_wgmma",
                          "float16, bfloat16; head_dim 64 or 128; 16-byte aligned rows; "
                          "non-negative strides below 2**39 elements",
                          "compute capability 9.0 (Hopper), a build with sm_90a code", NULL, 1,
                          gp_attn_flash_wgmma_supports, NULL, launch_flash_wgmma},
};

const char *
gp_attn_impl_name(int impl)
{
    return impl == IMPL_AUTO ? "auto" : gp_attn_impls[impl].name;
}

int
gp_attn_parse_impl(const char *name, int *out)
{
    for (int i = 0; i <= IMPL_AUTO; i++)
        if (strcmp(name, gp_attn_impl_name(i)) == 0) {
            *out = i;
            return 0;
        }
    /* "impl must be 'naive', 'flash', ... or 'auto', got 'x'", from the table */
    PyObject *names = PyUnicode_FromString("");
    for (int i = 0; names != NULL && i < IMPL_COUNT; i++)
        Py_SETREF(names, PyUnicode_FromFormat("%U'%s', ", names, gp_attn_impls[i].name));
    if (names == NULL)
        return -1;
    PyObject *listed = PyUnicode_Substring(names, 0, PyUnicode_GetLength(names) - 2);
    Py_DECREF(names);
    if (listed == NULL)
        return -1;
    PyErr_Format(PyExc_ValueError, "attention: impl must be %U or 'auto', got '%s'", listed, name);
    Py_DECREF(listed);
    return -1;
}

static int
supported(int impl, const gp_attn_params *p)
{
    return gp_attn_impls[impl].supports(p);
}

static int
explain_unsupported(int impl, const gp_attn_params *p)
{
    const char *name = gp_attn_impls[impl].name;
    const int tensor_cores = gp_attn_impls[impl].tensor_cores;
    if (tensor_cores && p->dtype == GP_ATTN_F32)
        PyErr_Format(PyExc_ValueError,
                     "attention: impl='%s' supports float16 and "
                     "bfloat16, got float32 (impl='flash' and 'naive' take float32)",
                     name);
    else if (impl != IMPL_NAIVE && p->head_dim != 64 && p->head_dim != 128)
        PyErr_Format(PyExc_ValueError,
                     "attention: impl='%s' supports head_dim 64 and 128, got "
                     "%d (impl='naive' takes any head_dim up to %d)",
                     name, p->head_dim, GP_ATTN_NAIVE_MAX_HEAD_DIM);
    else if (impl == IMPL_NAIVE && p->head_dim > GP_ATTN_NAIVE_MAX_HEAD_DIM)
        PyErr_Format(PyExc_ValueError,
                     "attention: head_dim %d is not supported: impl='naive' "
                     "takes up to %d, 'flash' and 'flash_tc' take 64 and 128",
                     p->head_dim, GP_ATTN_NAIVE_MAX_HEAD_DIM);
    else if (tensor_cores && !gp_attn_rows_aligned16(p))
        PyErr_Format(PyExc_ValueError,
                     "attention: impl='%s' needs 16-byte aligned rows: "
                     "data pointers and the batch, head and seq strides must be multiples of "
                     "8 elements (impl='flash' has no such need)",
                     name);
    else if (impl == IMPL_FLASH_WGMMA)
        PyErr_SetString(PyExc_ValueError,
                        "attention: impl='flash_wgmma' needs non-negative batch, head and seq "
                        "strides below 2**39 elements (TMA tensor maps)");
    else
        PyErr_Format(PyExc_ValueError,
                     "attention: impl='%s' cannot take shape (%d, %d, %d, %d): "
                     "seq is too long for its grid",
                     name, p->batch, p->heads, p->seq, p->head_dim);
    return -1;
}

/* The fastest implementation that takes these arguments, or the requested one if it can. */
int
gp_attn_choose_impl(int requested, const gp_attn_params *p, int *chosen)
{
    if (requested != IMPL_AUTO) {
        *chosen = requested;
        return supported(requested, p) ? 0 : explain_unsupported(requested, p);
    }
    static const int order[] = {IMPL_FLASH_TC, IMPL_FLASH, IMPL_NAIVE};
    for (int i = 0; i < 3; i++)
        if (supported(order[i], p)) {
            *chosen = order[i];
            return 0;
        }
    return explain_unsupported(IMPL_NAIVE, p);
}

/* impl="auto" on Hopper: flash_wgmma where flash_tc was chosen and the current device runs it
 * (called with the arrays' device current). */
void
gp_attn_prefer_wgmma(int requested, const gp_attn_params *p, int *impl)
{
    if (requested == IMPL_AUTO && *impl == IMPL_FLASH_TC && supported(IMPL_FLASH_WGMMA, p) &&
        gp_attn_flash_wgmma_runnable())
        *impl = IMPL_FLASH_WGMMA;
}

/* Why auto passed over `impl`: its check's message (less the "attention: " prefix), or, for an
 * entry that takes the arguments but does not run here, the devices it runs on. New reference,
 * NULL with an exception. */
static PyObject *
passed_over(int impl, const gp_attn_params *p, int on_device)
{
    if (supported(impl, p)) /* only flash_wgmma is passed over for the device */
        return PyUnicode_FromFormat("%s runs on %s, %s", gp_attn_impls[impl].name,
                                    gp_attn_impls[impl].devices,
                                    on_device ? "not on this device" : "and there is no device");
    (void)explain_unsupported(impl, p);
    PyObject *exc = gp_take_exception();
    PyObject *text = exc != NULL ? PyObject_Str(exc) : NULL;
    Py_XDECREF(exc);
    const char *utf8 = text != NULL ? PyUnicode_AsUTF8(text) : NULL;
    static const char prefix[] = "attention: ";
    if (utf8 == NULL || strncmp(utf8, prefix, sizeof prefix - 1) != 0)
        return text;
    PyObject *rest = PyUnicode_FromString(utf8 + sizeof prefix - 1);
    Py_DECREF(text);
    return rest;
}

/* Why impl="auto" takes `chosen` for these arguments: each entry ahead of it in auto's order
 * (flash_wgmma where the device runs it, then gp_attn_choose_impl's order) with the reason it was
 * passed over, then the one taken. `on_device`: whether the current device was asked (else the
 * choice is the one made without a device). New reference, NULL with an exception. */
PyObject *
gp_attn_auto_reason(const gp_attn_params *p, int chosen, int on_device)
{
    static const int order[] = {IMPL_FLASH_WGMMA, IMPL_FLASH_TC, IMPL_FLASH, IMPL_NAIVE};
    PyObject *reason = PyUnicode_FromString("");
    for (int i = 0; reason != NULL && i < 4 && order[i] != chosen; i++) {
        PyObject *why = passed_over(order[i], p, on_device);
        if (why == NULL)
            Py_CLEAR(reason);
        else
            Py_SETREF(reason, PyUnicode_FromFormat("%U%U; ", reason, why));
        Py_XDECREF(why);
    }
    if (reason == NULL)
        return NULL;
    Py_SETREF(reason, PyUnicode_FromFormat("%U%s is the first of flash_wgmma, flash_tc, flash, "
                                           "naive that takes these arguments %s",
                                           reason, gp_attn_impls[chosen].name,
                                           on_device ? "on this device" : "without a device"));
    return reason;
}

/* The SM count of the current device; -1 with an exception. */
int
gp_attn_current_sms(void)
{
    int sms = 0;
    const int device = gp_current_device();
    if (device < 0)
        return -1;
    GP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
error:
    return -1;
}

int
gp_attn_check_variant(int variant, int requested, const char *impl_name, const gp_attn_params *p)
{
    const int out = variant & (GP_ATTN_WGMMA_OUT_SMEM | GP_ATTN_WGMMA_OUT_REGS);
    const int schedule = variant & ~out;
    if (variant != 0 &&
        (requested != IMPL_FLASH_WGMMA || variant < 0 || schedule >= GP_ATTN_WGMMA_VARIANTS ||
         out == (GP_ATTN_WGMMA_OUT_SMEM | GP_ATTN_WGMMA_OUT_REGS))) {
        PyErr_Format(PyExc_ValueError,
                     "attention: _variant must be 0, or with impl='flash_wgmma' a schedule 0..%d "
                     "(1 persist, 2 bm128, 3 persist_bm128, 4 fixed, 5 persist_lookahead, "
                     "6 persist_lookahead_chained) plus "
                     "at most one of %d (O through shared memory) and %d (O from registers), got "
                     "%d with impl='%s'",
                     GP_ATTN_WGMMA_VARIANTS - 1, GP_ATTN_WGMMA_OUT_SMEM, GP_ATTN_WGMMA_OUT_REGS,
                     variant, impl_name);
        return -1;
    }
    /* two S tiles of 64 registers per consumer thread leave no room for head_dim 128's O */
    if ((schedule == GP_ATTN_WGMMA_PERSIST_LOOKAHEAD ||
         schedule == GP_ATTN_WGMMA_PERSIST_LOOKAHEAD_CHAINED) &&
        p->head_dim != 64) {
        PyErr_Format(PyExc_ValueError, "attention: _variant %d (%s) takes head_dim 64 only, got %d",
                     schedule, gp_attn_flash_wgmma_schedule_name(schedule), p->head_dim);
        return -1;
    }
    return 0;
}

/* A flash_wgmma schedule (GP_ATTN_WGMMA_*) at this head_dim, in words. */
static const char *
schedule_words(int schedule, int head_dim)
{
    switch (schedule) {
    case GP_ATTN_WGMMA_PERSIST:
        return head_dim == 64 ? "192-row blocks, persistent, items chained"
                              : "128-row blocks, persistent";
    case GP_ATTN_WGMMA_BM128:
        return "128-row blocks, one per query tile";
    case GP_ATTN_WGMMA_PERSIST_BM128:
        return "128-row blocks, persistent, items chained";
    case GP_ATTN_WGMMA_PERSIST_LOOKAHEAD:
        return "128-row blocks, persistent, two S tiles per consumer";
    case GP_ATTN_WGMMA_PERSIST_LOOKAHEAD_CHAINED:
        return "128-row blocks, persistent, two S tiles per consumer, items chained";
    default:
        return head_dim == 64 ? "192-row blocks, one per query tile"
                              : "128-row blocks, one per query tile";
    }
}

PyObject *
gp_attn_with_wgmma_schedule(PyObject *reason, const gp_attn_params *p)
{
    const int sms = gp_attn_current_sms();
    if (sms < 0)
        return NULL;
    const int schedule = gp_attn_flash_wgmma_schedule(p, sms);
    return PyUnicode_FromFormat("%U; its schedule for this shape (causal=%s, %d SMs): %s (%s)",
                                reason, p->causal ? "True" : "False", sms,
                                gp_attn_flash_wgmma_schedule_name(schedule),
                                schedule_words(schedule, p->head_dim));
}

PyObject *
gp_attn_impls_as_python(void)
{
    PyObject *table = PyTuple_New(IMPL_COUNT);
    for (int i = 0; table != NULL && i < IMPL_COUNT; i++) {
        const gp_attn_impl *m = &gp_attn_impls[i];
        PyObject *entry = Py_BuildValue("{s:s, s:s, s:s, s:z, s:O}", "name", m->name, "takes",
                                        m->takes, "devices", m->devices, "workspace",
                                        m->workspace, "tensor_cores",
                                        m->tensor_cores ? Py_True : Py_False);
        if (entry == NULL)
            Py_CLEAR(table);
        else
            PyTuple_SET_ITEM(table, i, entry);
    }
    return table;
}
