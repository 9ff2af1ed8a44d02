/* Which attention kernel runs (attention_choice.h): the names, what each takes, "auto". */
#include <Python.h>

#include "attention_choice.h"
#include <string.h>

const char *const gp_attn_impl_names[IMPL_COUNT] = {"naive", "flash", "flash_tc", "flash_wgmma",
                                                    "auto"};

int
gp_attn_parse_impl(const char *name, int *out)
{
    for (int i = 0; i < IMPL_COUNT; i++)
        if (strcmp(name, gp_attn_impl_names[i]) == 0) {
            *out = i;
            return 0;
        }
    PyErr_Format(PyExc_ValueError,
                 "attention: impl must be 'naive', 'flash', 'flash_tc', 'flash_wgmma' or "
                 "'auto', got '%s'",
                 name);
    return -1;
}

int
gp_attn_supported(int impl, const gp_attn_params *p)
{
    switch (impl) {
    case IMPL_NAIVE:
        return gp_attn_naive_supports(p);
    case IMPL_FLASH:
        return gp_attn_flash_supports(p);
    case IMPL_FLASH_WGMMA:
        return gp_attn_flash_wgmma_supports(p);
    default:
        return gp_attn_flash_tc_supports(p);
    }
}

static int
explain_unsupported(int impl, const gp_attn_params *p)
{
    const char *name = gp_attn_impl_names[impl];
    const int tensor_cores = impl == IMPL_FLASH_TC || impl == IMPL_FLASH_WGMMA;
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
    else if (impl == IMPL_FLASH_WGMMA && gp_attn_flash_wgmma_variant_wrong_head_dim(p))
        PyErr_Format(PyExc_ValueError,
                     "attention: impl='flash_wgmma' variant %d (192-row blocks) takes head_dim 64 "
                     "only, got %d (variants 0 and 1 take 64 and 128)",
                     p->variant, p->head_dim);
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
        return gp_attn_supported(requested, p) ? 0 : explain_unsupported(requested, p);
    }
    static const int order[] = {IMPL_FLASH_TC, IMPL_FLASH, IMPL_NAIVE};
    for (int i = 0; i < 3; i++)
        if (gp_attn_supported(order[i], p)) {
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
    if (requested == IMPL_AUTO && *impl == IMPL_FLASH_TC && gp_attn_supported(IMPL_FLASH_WGMMA, p) &&
        gp_attn_flash_wgmma_runnable())
        *impl = IMPL_FLASH_WGMMA;
}

