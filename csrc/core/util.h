/* Small helpers shared by the C files: argument conversion and the host clock. */
#ifndef GP_UTIL_H
#define GP_UTIL_H

#include <Python.h>
#include <stdint.h>
#include <time.h>

/* Host clock for regions and benchmarks: CLOCK_MONOTONIC in ns (same clock as time.monotonic_ns).
 */
static inline int64_t
gp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Checked size arithmetic. A size that comes from outside (a shape, a count, a producer's
 * strides) is multiplied only through these: a plain `*` wraps silently, and a wrapped size is a
 * small buffer that is then written past (docs/architecture.md, "Callbacks and sizes"). */

/* a * b into *out: 0, or 1 when it does not fit (no exception: the caller names the problem). */
static inline int
gp_mul_i64(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_mul_overflow(a, b, out) ? 1 : 0;
}

/* a * b bytes into *out: 0, or -1 with MemoryError (no allocation can be that large). */
static inline int
gp_mul_size(size_t a, size_t b, size_t *out)
{
    if (__builtin_mul_overflow(a, b, out)) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* int(obj) into an int with a range check; -1 with an exception set on failure. */
static inline int
gp_as_int(PyObject *obj, const char *what, int *out)
{
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, got %.100s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    long v = PyLong_AsLong(obj);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < INT32_MIN || v > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "%s out of range: %ld", what, v);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* getattr(obj, name, None) without masking errors other than AttributeError:
 * 1 and a new reference, 0 and NULL when absent, -1 with an exception set. */
static inline int
gp_optional_attr(PyObject *obj, const char *name, PyObject **out)
{
    *out = PyObject_GetAttrString(obj, name);
    if (*out != NULL)
        return 1;
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

/* Stash the exception in flight while cleanup code that may itself fail runs, then put it back:
 * cleanup never replaces the user's exception. */
typedef struct {
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc;
#else
    PyObject *type, *value, *tb;
#endif
} gp_exc_state;

static inline void
gp_exc_save(gp_exc_state *s)
{
#if PY_VERSION_HEX >= 0x030C0000
    s->exc = PyErr_GetRaisedException();
#else
    PyErr_Fetch(&s->type, &s->value, &s->tb);
#endif
}

static inline void
gp_exc_restore(gp_exc_state *s)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(s->exc);
#else
    PyErr_Restore(s->type, s->value, s->tb);
#endif
}

/* A dealloc's teardown `call` (an int expression: 0, or -1 with an exception), which may fail
 * (CUPTI, NVPW): it runs with the exception in flight stashed, and a failure of its own is
 * reported as unraisable, since a dealloc can raise nothing. One definition for every type that
 * closes something on the way out. */
#define GP_DEALLOC_TEARDOWN(op, call)                                                              \
    do {                                                                                           \
        gp_exc_state gp_saved_;                                                                    \
        gp_exc_save(&gp_saved_);                                                                   \
        if ((call) < 0)                                                                            \
            PyErr_WriteUnraisable(op);                                                             \
        gp_exc_restore(&gp_saved_);                                                                \
    } while (0)

/* The end of a heap type's dealloc: frees the object, then drops its reference to the type. */
static inline void
gp_free_heap_object(PyObject *op)
{
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_Free(op);
    Py_DECREF(tp);
}

/* Takes the exception in flight as one object (new reference), clearing it; NULL if none. */
static inline PyObject *
gp_take_exception(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (type == NULL)
        return NULL;
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL)
        PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
#endif
}

#endif
