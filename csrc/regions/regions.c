/* Regions: the Region type and the decorator type (RegionFunction).
 *
 * Python equivalent (minus the speed):
 *
 *     class region:
 *         def __init__(self, name, stream=None, nvtx=True): ...
 *         def __enter__(self):  # start event on stream, NVTX push, push frame
 *         def __exit__(self, *exc):  # stop event, NVTX pop, pop frame; never syncs
 *         def __call__(self, fn):  # decorator
 *
 * This file holds the two Python types; the hot path and the per-thread stacks are in stacks.c,
 * the record store and lazy resolution in store.c. */
#include "regions.h"
#include "cupti_clock.h"
#include "core/streams.h"
#include "core/util.h"

#include <structmember.h>

static PyTypeObject *RegionType;
static PyTypeObject *RegionCallType;
static int (*metrics_hook)(void);   /* see gp_regions_set_metrics_hook */
static PyObject *coroutine_wrapper; /* see _set_coroutine_wrapper */

void
gp_regions_set_metrics_hook(int (*hook)(void))
{
    metrics_hook = hook;
}

static PyObject *
region_enter(PyObject *op, PyObject *unused)
{
    if (gp_region_enter((gp_region *)op) < 0)
        return NULL;
    return Py_NewRef(op);
}

static PyObject *
region_exit(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    int raised = nargs > 0 && args[0] != Py_None;
    if (gp_region_exit((gp_region *)op, raised) < 0) {
        if (!raised)
            return NULL;
        /* Never replace the body's exception; the record is already marked failed. */
        PyErr_Clear();
    }
    Py_RETURN_FALSE;
}

static const char *const region_kwlist[] = {"name", "stream", "nvtx", "memory", "metrics", NULL};
#define REGION_NARGS 5
#define REGION_NPOSITIONAL 3 /* memory and metrics are keyword-only */

/* Shared region objects for the default stream, by name, one dict per nvtx flag. */
#define GP_REGION_CACHE_MAX 4096
static PyObject *region_cache[2];

static PyObject *region_bare_decorator(PyTypeObject *type, PyObject *fn);
static PyObject *region_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames);

static PyObject *
region_make(PyTypeObject *type, PyObject *const *vals)
{
    PyObject *name = vals[0];
    if (name == NULL) {
        PyErr_SetString(PyExc_TypeError, "region() missing required argument 'name'");
        return NULL;
    }
    if (!PyUnicode_Check(name)) {
        /* `@region` without a call: nvtx's `@annotate()` habit, the function names the region. */
        if (vals[1] == NULL && vals[2] == NULL && vals[3] == NULL && vals[4] == NULL &&
            PyCallable_Check(name))
            return region_bare_decorator(type, name);
        PyErr_Format(PyExc_TypeError, "region name must be a str, got %.100s",
                     Py_TYPE(name)->tp_name);
        return NULL;
    }
    const char *utf8 = PyUnicode_AsUTF8(name);
    if (utf8 == NULL)
        return NULL;
    cudaStream_t stream;
    if (gp_stream_from_object(vals[1], &stream) < 0)
        return NULL;
    int nvtx = vals[2] == NULL ? 1 : PyObject_IsTrue(vals[2]);
    if (nvtx < 0)
        return NULL;
    int memory = vals[3] == NULL ? 0 : PyObject_IsTrue(vals[3]);
    if (memory < 0)
        return NULL;
    PyObject *metrics = vals[4] == Py_None ? NULL : vals[4];
    if (metrics != NULL && metrics_hook != NULL && metrics_hook() < 0)
        return NULL;
    gp_region *self = PyObject_New(gp_region, type);
    if (self == NULL)
        return NULL;
    self->name = Py_NewRef(name);
    self->name_utf8 = utf8;
    self->stream_obj = Py_NewRef(vals[1] ? vals[1] : Py_None);
    self->stream = stream;
    self->device = -1;
    self->nvtx = nvtx;
    self->metrics = Py_XNewRef(metrics);
    self->memory = memory;
    self->entered_disabled = 0;
    self->weakreflist = NULL;
    return (PyObject *)self;
}

/* region(name, stream=None, nvtx=True, *, metrics=None) through vectorcall: the construction cost
 * is part of every `with gpuprofile.region(...)`, so arguments are matched by hand. */
static PyObject *
region_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *vals[REGION_NARGS] = {NULL, NULL, NULL, NULL, NULL};
    if (nargs > REGION_NPOSITIONAL) {
        PyErr_Format(PyExc_TypeError, "region() takes at most %d positional arguments (%zd given)",
                     REGION_NPOSITIONAL, nargs);
        return NULL;
    }
    for (Py_ssize_t k = 0; k < nargs; k++)
        vals[k] = args[k];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int slot = -1;
        for (int j = 0; j < REGION_NARGS && slot < 0; j++)
            if (PyUnicode_CompareWithASCIIString(key, region_kwlist[j]) == 0)
                slot = j;
        if (slot < 0) {
            PyErr_Format(PyExc_TypeError, "region() got an unexpected keyword argument '%U'", key);
            return NULL;
        }
        if (vals[slot] != NULL) {
            PyErr_Format(PyExc_TypeError, "region() got multiple values for argument '%s'",
                         region_kwlist[slot]);
            return NULL;
        }
        vals[slot] = args[nargs + k];
    }
    /* Regions are immutable and keep no per-activation state (that lives in the thread's frames),
     * so `region("x")` on the default stream can hand out one shared object per name: a dict
     * lookup instead of an allocation on every `with gpuprofile.region("x"):`. */
    if ((vals[1] == NULL || vals[1] == Py_None) && vals[3] == NULL &&
        (vals[4] == NULL || vals[4] == Py_None) && vals[0] != NULL &&
        PyUnicode_CheckExact(vals[0])) {
        int nvtx = vals[2] == NULL ? 1 : PyObject_IsTrue(vals[2]);
        if (nvtx < 0)
            return NULL;
        PyObject *cache = region_cache[nvtx];
        PyObject *hit = PyDict_GetItemWithError(cache, vals[0]);
        if (hit != NULL)
            return Py_NewRef(hit);
        if (PyErr_Occurred())
            return NULL;
        PyObject *made = region_make((PyTypeObject *)type, vals);
        if (made != NULL && PyDict_GET_SIZE(cache) < GP_REGION_CACHE_MAX &&
            PyDict_SetItem(cache, vals[0], made) < 0)
            Py_CLEAR(made);
        return made;
    }
    return region_make((PyTypeObject *)type, vals);
}

static PyObject *
region_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *vals[REGION_NARGS] = {NULL, NULL, NULL, NULL, NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOO$OO:region", (char **)region_kwlist,
                                     &vals[0], &vals[1], &vals[2], &vals[3], &vals[4]))
        return NULL;
    return region_make(type, vals);
}

static void
region_dealloc(PyObject *op)
{
    gp_region *self = (gp_region *)op;
    PyTypeObject *tp = Py_TYPE(op);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs(op);
    Py_DECREF(self->name);
    Py_DECREF(self->stream_obj);
    Py_XDECREF(self->metrics);
    PyObject_Free(op);
    Py_DECREF(tp);
}

static PyObject *
region_repr(PyObject *op)
{
    gp_region *self = (gp_region *)op;
    if (self->metrics != NULL)
        return PyUnicode_FromFormat("region(%R, stream=%R, nvtx=%s%s, metrics=%R)", self->name,
                                    self->stream_obj, self->nvtx ? "True" : "False",
                                    self->memory ? ", memory=True" : "", self->metrics);
    return PyUnicode_FromFormat("region(%R, stream=%R, nvtx=%s%s)", self->name, self->stream_obj,
                                self->nvtx ? "True" : "False", self->memory ? ", memory=True" : "");
}

/* ---- the decorator: region(...)(fn) -------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    gp_region *region;
    PyObject *fn;
    PyObject *dict;
    vectorcallfunc vectorcall;
} gp_regioncall;

static PyObject *
regioncall_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    gp_regioncall *self = (gp_regioncall *)op;
    if (gp_region_enter(self->region) < 0)
        return NULL;
    PyObject *result = PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    if (result == NULL) {
        gp_exc_state saved;
        gp_exc_save(&saved);
        if (gp_region_exit(self->region, 1) < 0)
            PyErr_Clear();
        gp_exc_restore(&saved);
        return NULL;
    }
    if (gp_region_exit(self->region, 0) < 0) {
        Py_DECREF(result);
        return NULL;
    }
    return result;
}

/* An `async def` function (or a method of one): calling it only makes the coroutine, so the
 * region must be around its awaiting, which the Python wrapper does. */
static int
is_coroutine_function(PyObject *fn)
{
    if (PyMethod_Check(fn))
        fn = PyMethod_GET_FUNCTION(fn);
    return PyFunction_Check(fn) &&
           (((PyCodeObject *)PyFunction_GET_CODE(fn))->co_flags & CO_COROUTINE) != 0;
}

/* _set_coroutine_wrapper(wrap): wrap(region, fn) decorates `async def` functions; installed by
 * gpuprofile/__init__.py at import (C never imports Python by name). */
static PyObject *
set_coroutine_wrapper(PyObject *module, PyObject *wrap)
{
    if (!PyCallable_Check(wrap)) {
        PyErr_SetString(PyExc_TypeError, "the coroutine wrapper must be callable");
        return NULL;
    }
    Py_XSETREF(coroutine_wrapper, Py_NewRef(wrap));
    Py_RETURN_NONE;
}

static PyMethodDef regions_methods[] = {
    {"_set_coroutine_wrapper", set_coroutine_wrapper, METH_O,
     "Install the decorator of `async def` functions: wrap(region, fn)."},
    {NULL, NULL, 0, NULL},
};

/* region(...)(fn): a RegionFunction, or the coroutine wrapper's function for `async def`. */
static PyObject *
region_decorate(PyObject *op, PyObject *fn)
{
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "region(...) decorates a callable, got %.100s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    if (coroutine_wrapper != NULL && is_coroutine_function(fn))
        return PyObject_CallFunctionObjArgs(coroutine_wrapper, op, fn, NULL);
    gp_regioncall *w = PyObject_GC_New(gp_regioncall, RegionCallType);
    if (w == NULL)
        return NULL;
    w->region = (gp_region *)Py_NewRef(op);
    w->fn = Py_NewRef(fn);
    w->dict = NULL;
    w->vectorcall = regioncall_vectorcall;
    PyObject_GC_Track(w);
    PyObject *functools = PyImport_ImportModule("functools");
    PyObject *done =
        functools ? PyObject_CallMethod(functools, "update_wrapper", "OO", w, fn) : NULL;
    Py_XDECREF(functools);
    if (done == NULL) {
        Py_DECREF(w);
        return NULL;
    }
    Py_DECREF(done);
    return (PyObject *)w;
}

static PyObject *
region_call(PyObject *op, PyObject *args, PyObject *kwargs)
{
    PyObject *fn;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) > 0) {
        PyErr_SetString(PyExc_TypeError, "region(...) as a decorator takes one function");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O:region decorator", &fn))
        return NULL;
    return region_decorate(op, fn);
}

/* A name attribute of fn as a new reference: NULL without an exception when fn has none. */
static PyObject *
name_attribute(PyObject *fn, const char *attr)
{
    PyObject *name = PyObject_GetAttrString(fn, attr);
    if (name == NULL && PyErr_ExceptionMatches(PyExc_AttributeError))
        PyErr_Clear();
    return name;
}

/* region(fn): fn decorated by a region named after its __qualname__ (else __name__). */
static PyObject *
region_bare_decorator(PyTypeObject *type, PyObject *fn)
{
    Py_INCREF(fn); /* the attribute lookups run Python code */
    PyObject *name = name_attribute(fn, "__qualname__");
    if (name == NULL && !PyErr_Occurred())
        name = name_attribute(fn, "__name__");
    PyObject *result = NULL;
    if (name == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError,
                         "region() needs a name: %.100s has no __qualname__ or __name__ to take "
                         "one from; use @region(\"name\")",
                         Py_TYPE(fn)->tp_name);
    } else if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError,
                     "region(): the function's __qualname__ is a %.100s, not a str",
                     Py_TYPE(name)->tp_name);
    } else {
        /* through the constructor, so `f.region is region(f.__qualname__)` as with a name */
        PyObject *region = region_vectorcall((PyObject *)type, &name, 1, NULL);
        if (region != NULL) {
            result = region_decorate(region, fn);
            Py_DECREF(region);
        }
    }
    Py_XDECREF(name);
    Py_DECREF(fn);
    return result;
}

static int
regioncall_traverse(PyObject *op, visitproc visit, void *arg)
{
    gp_regioncall *self = (gp_regioncall *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(self->region);
    Py_VISIT(self->fn);
    Py_VISIT(self->dict);
    return 0;
}

static int
regioncall_clear(PyObject *op)
{
    gp_regioncall *self = (gp_regioncall *)op;
    Py_CLEAR(self->region);
    Py_CLEAR(self->fn);
    Py_CLEAR(self->dict);
    return 0;
}

static void
regioncall_dealloc(PyObject *op)
{
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    regioncall_clear(op);
    PyObject_GC_Del(op);
    Py_DECREF(tp);
}

static PyObject *
regioncall_get(PyObject *op, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(op);
    return PyMethod_New(op, obj);
}

static PyObject *
regioncall_repr(PyObject *op)
{
    gp_regioncall *self = (gp_regioncall *)op;
    return PyUnicode_FromFormat("<%R decorating %R>", self->region, self->fn);
}

static PyMethodDef region_methods[] = {
    {"__enter__", region_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))region_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef region_members[] = {
    {"name", T_OBJECT_EX, offsetof(gp_region, name), READONLY, "The region's name."},
    {"stream", T_OBJECT_EX, offsetof(gp_region, stream_obj), READONLY, "The stream as given."},
    {"metrics", T_OBJECT, offsetof(gp_region, metrics), READONLY, "Counters collected, or None."},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(gp_region, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(region_doc,
             "region(name, stream=None, nvtx=True, *, memory=False, metrics=None)\n--\n\n"
             "Time a block of code on the GPU: `with region(name):` or `@region(name)`.\n\n"
             "Records CUDA events on `stream` around the body and pushes an NVTX range; exit\n"
             "never waits for the GPU (times are resolved when results are read). `stream` is\n"
             "None (the legacy default stream), an int handle, or an object with\n"
             "__cuda_stream__ or .cuda_stream. Without a device the host clock is used.\n"
             "On an `async def` function the region spans each awaited call.\n"
             "metrics: hardware counters for the block (a set name such as 'sol', or metric\n"
             "names); read them with gpuprofile.region_metrics(name). See docs/counters.md.\n"
             "memory=True tracks device allocations while the region is open, for its peak\n"
             "(gpuprofile.memory.region_peaks()).");

static PyType_Slot region_slots[] = {
    {Py_tp_new, region_new},         {Py_tp_dealloc, region_dealloc},
    {Py_tp_repr, region_repr},       {Py_tp_call, region_call},
    {Py_tp_methods, region_methods}, {Py_tp_members, region_members},
    {Py_tp_doc, (void *)region_doc}, {0, NULL},
};

static PyType_Spec region_spec = {
    .name = "gpuprofile.region",
    .basicsize = sizeof(gp_region),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = region_slots,
};

static PyMemberDef regioncall_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(gp_regioncall, dict), READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(gp_regioncall, vectorcall), READONLY, NULL},
    {"region", T_OBJECT_EX, offsetof(gp_regioncall, region), READONLY, "The region it times."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef regioncall_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot regioncall_slots[] = {
    {Py_tp_getset, regioncall_getset},
    {Py_tp_dealloc, regioncall_dealloc},
    {Py_tp_traverse, regioncall_traverse},
    {Py_tp_clear, regioncall_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, regioncall_get},
    {Py_tp_repr, regioncall_repr},
    {Py_tp_members, regioncall_members},
    {0, NULL},
};

static PyType_Spec regioncall_spec = {
    .name = "gpuprofile.RegionFunction",
    .basicsize = sizeof(gp_regioncall),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
             Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = regioncall_slots,
};
int
gp_regions_init(PyObject *module)
{
    if (gp_region_stacks_init(module) < 0 || gp_region_store_init(module) < 0 ||
        gp_region_cupti_clock_init(module) < 0)
        return -1;
    RegionType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &region_spec, NULL);
    if (RegionType == NULL)
        return -1;
    RegionType->tp_vectorcall = region_vectorcall;
    for (int k = 0; k < 2; k++)
        if (region_cache[k] == NULL && (region_cache[k] = PyDict_New()) == NULL)
            return -1;
    RegionCallType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &regioncall_spec, NULL);
    if (RegionCallType == NULL)
        return -1;
    if (PyModule_AddType(module, RegionType) < 0 || PyModule_AddType(module, RegionCallType) < 0 ||
        PyModule_AddFunctions(module, regions_methods) < 0)
        return -1;
    return 0;
}
