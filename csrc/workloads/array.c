/* gp_array and its element types (array.h). */
#include "array.h"
#include "dlpack.h"
#include "core/util.h"

#include <string.h>

static const char *const dtype_names[] = {"float32", "float16", "bfloat16"};

const char *
gp_dtype_name(gp_dtype dtype)
{
    return dtype >= GP_DTYPE_F32 && dtype <= GP_DTYPE_BF16 ? dtype_names[dtype] : "unknown";
}

int
gp_dtype_size(gp_dtype dtype)
{
    return dtype == GP_DTYPE_F32 ? 4 : 2;
}

int
gp_dtype_from_name(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(name, dtype_names[i]) == 0)
            return i;
    return -1;
}

int
gp_dtype_from_object(PyObject *name_obj, gp_dtype *out)
{
    const char *name = PyUnicode_Check(name_obj) ? PyUnicode_AsUTF8(name_obj) : NULL;
    int d = name ? gp_dtype_from_name(name) : -1;
    if (d < 0) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError,
                         "dtype must be 'float32', 'float16' or 'bfloat16', "
                         "got %R",
                         name_obj);
        return -1;
    }
    *out = (gp_dtype)d;
    return 0;
}

/* NumPy has no bfloat16: its values widen exactly to float32. */
void
gp_bf16_to_f32(const uint16_t *src, float *dst, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        uint32_t bits = (uint32_t)src[i] << 16;
        memcpy(dst + i, &bits, sizeof bits);
    }
}

void
gp_array_extent(const gp_array *a, uintptr_t *lo, uintptr_t *hi)
{
    const int64_t item = a->dtype == GP_DTYPE_OTHER ? 1 : gp_dtype_size(a->dtype);
    int64_t low = 0, high = 0;
    for (int i = 0; i < a->ndim; i++) {
        const int64_t span = (a->shape[i] - 1) * a->strides[i];
        if (span < 0)
            low += span;
        else
            high += span;
    }
    *lo = (uintptr_t)a->data + (uintptr_t)(low * item);
    *hi = (uintptr_t)a->data + (uintptr_t)((high + 1) * item);
}

void
gp_array_release(gp_array *a)
{
    /* Deleters and buffer releases may run Python code (a producer's own cleanup), which must
     * not see the exception this call may be raising. */
    gp_exc_state saved;
    gp_exc_save(&saved);
    if (a->has_view) {
        PyBuffer_Release(&a->view);
        a->has_view = 0;
    }
    if (a->dl_managed != NULL) {
        if (a->dl_versioned) {
            gp_dl_managed_versioned *m = a->dl_managed;
            if (m->deleter)
                m->deleter(m);
        } else {
            gp_dl_managed *m = a->dl_managed;
            if (m->deleter)
                m->deleter(m);
        }
        a->dl_managed = NULL;
    }
    Py_CLEAR(a->owner);
    gp_exc_restore(&saved);
}
