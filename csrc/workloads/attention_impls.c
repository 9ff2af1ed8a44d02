/* The attention implementations (attention_impls.h): the table, its names, "auto". */
#include "attention_impls.h"
#include "attention/flash_wgmma/schedules.h"
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
                    "any CUDA device", "the seq x seq scores of every (batch, head) in fp32", 0, 4,
                    NULL, gp_attn_naive_supports, gp_attn_naive_workspace_bytes, launch_naive},
    [IMPL_FLASH] = {"flash", "float32, float16, bfloat16 (fp32 arithmetic); head_dim 64 or 128",
                    "any CUDA device", NULL, 0, 3, NULL, gp_attn_flash_supports, NULL,
                    launch_flash},
    [IMPL_FLASH_TC] = {"flash_tc", "float16, bfloat16; head_dim 64 or 128; 16-byte aligned rows",
                       "compute capability 8.0 or newer", NULL, 1, 2, NULL,
                       gp_attn_flash_tc_supports, NULL, launch_flash_tc},
    [IMPL_FLASH_WGMMA] = {"flash_wgmma",
                          "float16, bfloat16; head_dim 64 or 128; 16-byte aligned rows; "
                          "non-negative strides below 2**39 elements",
                          "compute capability 9.0 (Hopper), a build with sm_90a code", NULL, 1, 1,
                          gp_attn_flash_wgmma_runnable, gp_attn_flash_wgmma_supports, NULL,
                          launch_flash_wgmma},
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

/* The entry of auto's place `rank` (0 first): the table by priority. */
static int
by_priority(int rank)
{
    for (int i = 0; i < IMPL_COUNT; i++)
        if (gp_attn_impls[i].priority == rank + 1)
            return i;
    return -1; /* not reached: the priorities are 1..IMPL_COUNT (tests/kernels) */
}

/* auto's order, "flash_wgmma, flash_tc, flash, naive", from the table. New reference. */
static PyObject *
auto_order_text(void)
{
    PyObject *text = PyUnicode_FromString(gp_attn_impls[by_priority(0)].name);
    for (int rank = 1; text != NULL && rank < IMPL_COUNT; rank++)
        Py_SETREF(text,
                  PyUnicode_FromFormat("%U, %s", text, gp_attn_impls[by_priority(rank)].name));
    return text;
}

/* The fastest implementation that takes these arguments, or the requested one if it can. */
int
gp_attn_choose_impl(int requested, const gp_attn_params *p, int *chosen)
{
    if (requested != IMPL_AUTO) {
        *chosen = requested;
        return supported(requested, p) ? 0 : explain_unsupported(requested, p);
    }
    for (int rank = 0; rank < IMPL_COUNT; rank++) {
        const int impl = by_priority(rank);
        if (gp_attn_impls[impl].runnable == NULL && supported(impl, p)) {
            *chosen = impl;
            return 0;
        }
    }
    return explain_unsupported(by_priority(IMPL_COUNT - 1), p);
}

void
gp_attn_prefer_runnable(int requested, const gp_attn_params *p, int *impl)
{
    if (requested != IMPL_AUTO)
        return;
    for (int rank = 0; rank < gp_attn_impls[*impl].priority - 1; rank++) {
        const int ahead = by_priority(rank);
        if (gp_attn_impls[ahead].runnable != NULL && supported(ahead, p) &&
            gp_attn_impls[ahead].runnable()) {
            *impl = ahead;
            return;
        }
    }
}

/* Why auto passed over `impl`: its check's message (less the "attention: " prefix), or, for an
 * entry that takes the arguments but does not run here, the devices it runs on. New reference,
 * NULL with an exception. */
static PyObject *
passed_over(int impl, const gp_attn_params *p, int on_device)
{
    if (supported(impl, p)) /* only an entry with a runnable check is passed over for the device */
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
 * (the table by priority) with the reason it was passed over, then the one taken. `on_device`:
 * whether the current device was asked (else the choice is the one made without a device). New
 * reference, NULL with an exception. */
PyObject *
gp_attn_auto_reason(const gp_attn_params *p, int chosen, int on_device)
{
    PyObject *reason = PyUnicode_FromString("");
    for (int rank = 0; reason != NULL && by_priority(rank) != chosen; rank++) {
        PyObject *why = passed_over(by_priority(rank), p, on_device);
        if (why == NULL)
            Py_CLEAR(reason);
        else
            Py_SETREF(reason, PyUnicode_FromFormat("%U%U; ", reason, why));
        Py_XDECREF(why);
    }
    PyObject *order = reason != NULL ? auto_order_text() : NULL;
    if (order == NULL) {
        Py_XDECREF(reason);
        return NULL;
    }
    Py_SETREF(reason, PyUnicode_FromFormat("%U%s is the first of %U that takes these arguments %s",
                                           reason, gp_attn_impls[chosen].name, order,
                                           on_device ? "on this device" : "without a device"));
    Py_DECREF(order);
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

PyObject *
gp_attn_wgmma_schedule_names(int which)
{
    PyObject *names = PyUnicode_FromString(which == GP_ATTN_NAMES_PER_SHAPE ? "per_shape" : "");
    for (int i = 0; names != NULL && i < GP_ATTN_WGMMA_SCHEDULES; i++) {
        const gp_attn_wgmma_schedule_row *row = &gp_attn_wgmma_schedules[i];
        if (which == GP_ATTN_NAMES_PERSISTENT && !row->at[0].persistent)
            continue;
        Py_SETREF(names, PyUnicode_FromFormat(PyUnicode_GetLength(names) ? "%U, %s" : "%U%s", names,
                                              row->name));
    }
    return names;
}

int
gp_attn_wgmma_schedule_by_name(const char *name, const char *query, int per_shape)
{
    if (per_shape && strcmp(name, "per_shape") == 0)
        return GP_ATTN_WGMMA_PER_SHAPE;
    for (int i = 0; i < GP_ATTN_WGMMA_SCHEDULES; i++)
        if (strcmp(name, gp_attn_wgmma_schedules[i].name) == 0)
            return gp_attn_wgmma_schedules[i].number;
    PyObject *names =
        gp_attn_wgmma_schedule_names(per_shape ? GP_ATTN_NAMES_PER_SHAPE : GP_ATTN_NAMES_ALL);
    if (names != NULL)
        PyErr_Format(PyExc_ValueError, "%s: unknown schedule '%s' (%U)", query, name, names);
    Py_XDECREF(names);
    return -1;
}

int
gp_attn_wgmma_forced(int schedule, int out, const gp_attn_params *p)
{
    const int lab = gp_attn_flash_wgmma_lab();
    const char *store = out == GP_ATTN_WGMMA_OUT_SMEM ? "through shared memory" : "from registers";
    if (schedule == GP_ATTN_WGMMA_PER_SHAPE) {
        /* the rule's schedule depends on the device's SM count, unknown here: every schedule it
         * can pick would need that store */
        if (out != 0 && !lab) {
            PyErr_Format(PyExc_ValueError,
                         "attention: O %s under the per-shape schedule needs a build with "
                         "GPUPROFILE_ATTN_LAB=1 (this build has the configurations the rule runs)",
                         store);
            return -1;
        }
        return out;
    }
    const gp_attn_wgmma_schedule_row *row = gp_attn_wgmma_row(schedule);
    const gp_attn_wgmma_config *config = gp_attn_wgmma_config_at(schedule, p->head_dim);
    if (config == NULL) {
        PyErr_Format(PyExc_ValueError, "attention: schedule '%s' takes head_dim %s, got %d",
                     row->name, row->at[1].consumers != 0 ? "64 and 128" : "64", p->head_dim);
        return -1;
    }
    const int out_smem =
        out != 0 ? out == GP_ATTN_WGMMA_OUT_SMEM : gp_attn_flash_wgmma_out_smem(p, schedule) != 0;
    if (!gp_attn_wgmma_built(config, out_smem, lab)) {
        PyErr_Format(PyExc_ValueError,
                     "attention: schedule '%s' at head_dim %d with O %s is not in this build: it "
                     "has the configurations the per-shape rule runs (ATTENTION_WGMMA_SCHEDULES, "
                     "ships); a build with GPUPROFILE_ATTN_LAB=1 has every one",
                     row->name, p->head_dim, out_smem ? "through shared memory" : "from registers");
        return -1;
    }
    return schedule | out;
}

PyObject *
gp_attn_with_wgmma_schedule(PyObject *reason, const gp_attn_params *p)
{
    const int sms = gp_attn_current_sms();
    if (sms < 0)
        return NULL;
    const int schedule = gp_attn_flash_wgmma_schedule(p, sms);
    const gp_attn_wgmma_config *config = gp_attn_wgmma_config_at(schedule, p->head_dim);
    return PyUnicode_FromFormat("%U; its schedule for this shape (causal=%s, %d SMs): %s (%s)",
                                reason, p->causal ? "True" : "False", sms,
                                gp_attn_flash_wgmma_schedule_name(schedule),
                                config != NULL ? config->words : "?");
}

PyObject *
gp_attn_impls_as_python(void)
{
    PyObject *table = PyTuple_New(IMPL_COUNT);
    for (int i = 0; table != NULL && i < IMPL_COUNT; i++) {
        const gp_attn_impl *m = &gp_attn_impls[i];
        PyObject *entry =
            Py_BuildValue("{s:s, s:s, s:s, s:z, s:O, s:i}", "name", m->name, "takes", m->takes,
                          "devices", m->devices, "workspace", m->workspace, "tensor_cores",
                          m->tensor_cores ? Py_True : Py_False, "priority", m->priority);
        if (entry == NULL)
            Py_CLEAR(table);
        else
            PyTuple_SET_ITEM(table, i, entry);
    }
    return table;
}

/* One configuration as a dict, or None where the row does not take that head_dim. */
static PyObject *
config_as_python(const gp_attn_wgmma_config *c)
{
    static const char *const orders[] = {"sequential", "overlapped", "lookahead"};
    if (c->consumers == 0)
        Py_RETURN_NONE;
    const int regs = c->ships & GP_ATTN_WGMMA_SHIPS_REGS,
              smem = c->ships & GP_ATTN_WGMMA_SHIPS_SMEM;
    PyObject *ships = regs && smem ? Py_BuildValue("(ss)", "regs", "smem")
                      : regs       ? Py_BuildValue("(s)", "regs")
                      : smem       ? Py_BuildValue("(s)", "smem")
                                   : PyTuple_New(0);
    if (ships == NULL)
        return NULL;
    return Py_BuildValue("{s:i, s:i, s:s, s:O, s:O, s:N, s:s}", "consumers", c->consumers, "rows",
                         64 * c->consumers, "order", orders[c->order], "persistent",
                         c->persistent ? Py_True : Py_False, "chained",
                         c->chained ? Py_True : Py_False, "ships", ships, "words", c->words);
}

PyObject *
gp_attn_wgmma_schedules_as_python(void)
{
    PyObject *table = PyTuple_New(GP_ATTN_WGMMA_SCHEDULES);
    for (int i = 0; table != NULL && i < GP_ATTN_WGMMA_SCHEDULES; i++) {
        const gp_attn_wgmma_schedule_row *row = &gp_attn_wgmma_schedules[i];
        PyObject *at64 = config_as_python(&row->at[0]);
        PyObject *at128 = at64 != NULL ? config_as_python(&row->at[1]) : NULL;
        PyObject *entry = NULL;
        if (at128 != NULL)
            entry = Py_BuildValue("{s:s, s:i, s:N, s:{i:O, i:O}}", "name", row->name, "number",
                                  row->number, "head_dims",
                                  row->at[1].consumers != 0 ? Py_BuildValue("(ii)", 64, 128)
                                                            : Py_BuildValue("(i)", 64),
                                  "configs", 64, at64, 128, at128);
        Py_XDECREF(at64);
        Py_XDECREF(at128);
        if (entry == NULL)
            Py_CLEAR(table);
        else
            PyTuple_SET_ITEM(table, i, entry);
    }
    return table;
}
