/* The CUPTI region clock's switch and fill (cupti_clock.h). GIL held throughout. */
#include "cupti_clock.h"
#include "store.h"
#include "core/errors.h"

#include <math.h>
#include <stdio.h>

int gp_regions_cupti_clock;

/* _regions_set_cupti_clock(on) -> the store's generation. gpuprofile.profile() turns the CUPTI
 * region clock on once its tracing runs and off first thing in stop(); the generation it gets
 * back then tells _regions_fill_cupti whether reset() ran since (a reset after the clock went
 * off leaves no record to fill: every record entered since has events). */
static PyObject *
regions_set_cupti_clock(PyObject *module, PyObject *arg)
{
    int on = PyObject_IsTrue(arg); /* may run Python: nothing of the store is held */
    if (on < 0)
        return NULL;
    __atomic_store_n(&gp_regions_cupti_clock, on, __ATOMIC_RELAXED);
    return PyLong_FromUnsignedLongLong(gp_store.generation);
}

/* A C-contiguous buffer of `n` 8-byte items of format `code` ('q' or 'd'), or -1 with TypeError
 * naming `what`. The view is the caller's to release. */
static int
get_column(PyObject *obj, Py_buffer *view, char code, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    int ok = view->itemsize == 8 && view->ndim <= 1 &&
             (f[0] == code || (code == 'q' && f[0] == 'l')) && f[1] == '\0';
    if (!ok) {
        PyErr_Format(PyExc_TypeError,
                     "_regions_fill_cupti: %s must be a 1-D array of %s, got format '%s' "
                     "(item size %zd)",
                     what, code == 'q' ? "int64" : "float64", view->format ? view->format : "B",
                     view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* _regions_fill_cupti(generation, records, ms, rest_failed=False) -> records filled.
 *
 * Gives the CUPTI-clock records of a stopped profile their GPU time: records[k] gets ms[k] (the
 * span of the traced work attributed to it and to the regions inside it), or is failed when
 * ms[k] is NaN (the profile's stop cut it: its trace is incomplete). Every other CUPTI-clock
 * record not filled yet had no traced GPU work: no GPU time (gpu_ms stays NaN), never a 0; or,
 * with `rest_failed` (the trace or the records could not be read), is failed. A record still
 * open is failed too. Refused while the clock is on (the records are not final);
 * nothing happens when `generation` is not the store's (reset() ran: the records are gone). */
static PyObject *
regions_fill_cupti(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 && nargs != 4) {
        PyErr_SetString(PyExc_TypeError,
                        "_regions_fill_cupti(generation, records, ms, rest_failed=False)");
        return NULL;
    }
    unsigned long long generation = PyLong_AsUnsignedLongLong(args[0]);
    if (generation == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    int rest_failed = nargs == 4 ? PyObject_IsTrue(args[3]) : 0; /* may run Python: before */
    if (rest_failed < 0)
        return NULL;
    Py_buffer rv, mv;
    if (get_column(args[1], &rv, 'q', "records") < 0)
        return NULL;
    if (get_column(args[2], &mv, 'd', "ms") < 0) {
        PyBuffer_Release(&rv);
        return NULL;
    }
    PyObject *result = NULL;
    /* Both views are ours; from here on nothing runs Python, so the store holds still. */
    const Py_ssize_t n = rv.len / 8;
    const int64_t *rec = rv.buf;
    const double *ms = mv.buf;
    if (mv.len / 8 != n) {
        PyErr_Format(PyExc_ValueError, "_regions_fill_cupti: %zd records but %zd times", n,
                     mv.len / 8);
        goto done;
    }
    if (gp_regions_cupti_clock) {
        PyErr_SetString(gp_GpuProfileError,
                        "_regions_fill_cupti: the CUPTI region clock is still on (stop the "
                        "profile first)");
        goto done;
    }
    if (generation != gp_store.generation) {
        result = PyLong_FromLong(0);
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        if (rec[k] < 0 || (uint64_t)rec[k] >= gp_store.n) {
            PyErr_Format(PyExc_ValueError,
                         "_regions_fill_cupti: record %lld out of range (%zu records)",
                         (long long)rec[k], gp_store.n);
            goto done;
        }
        if (!isnan(ms[k]) && !(isfinite(ms[k]) && ms[k] >= 0.0)) {
            char text[64];
            snprintf(text, sizeof text, "%g", ms[k]);
            PyErr_Format(PyExc_ValueError,
                         "_regions_fill_cupti: the time of record %lld is %s ms (not a finite, "
                         "non-negative time)",
                         (long long)rec[k], text);
            goto done;
        }
    }
    long filled = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        gp_record *r = &gp_store.recs[rec[k]];
        if ((r->flags & (REC_CUPTI | REC_FILLED)) != REC_CUPTI)
            continue;
        r->flags |= REC_FILLED;
        if (isnan(ms[k]) || r->state == REC_OPEN || (r->flags & REC_FAILED))
            r->flags |= REC_FAILED;
        else
            r->gpu_ms = ms[k];
        filled++;
    }
    for (size_t k = 0; k < gp_store.n; k++) {
        gp_record *r = &gp_store.recs[k];
        if ((r->flags & (REC_CUPTI | REC_FILLED)) != REC_CUPTI)
            continue;
        r->flags |= REC_FILLED;
        if (!(r->flags & REC_FAILED)) /* failed already: its thread ended inside it */
            r->flags |= r->state == REC_OPEN || rest_failed ? REC_FAILED : REC_NO_WORK;
        filled++;
    }
    result = PyLong_FromLong(filled);
done:
    PyBuffer_Release(&rv);
    PyBuffer_Release(&mv);
    return result;
}

static PyMethodDef clock_methods[] = {
    {"_regions_set_cupti_clock", regions_set_cupti_clock, METH_O,
     "Regions take their GPU time from the running profile's trace (True) or from events."},
    {"_regions_fill_cupti", (PyCFunction)(void (*)(void))regions_fill_cupti, METH_FASTCALL,
     "Fill in the GPU time of the CUPTI-clock records of a stopped profile."},
    {NULL, NULL, 0, NULL},
};

int
gp_region_cupti_clock_init(PyObject *module)
{
    return PyModule_AddFunctions(module, clock_methods);
}
