/* NVTX push/pop/mark/start/end with domains, colors and categories. gpuprofile/nvtx.py is the
 * public face (color names, the range context manager); these take resolved values. */
#include "nvtx.h"

#include <nvtx3/nvToolsExt.h>

static int
parse_domain(PyObject *obj, nvtxDomainHandle_t *out)
{
    if (obj == NULL || obj == Py_None) {
        *out = NULL;
        return 0;
    }
    void *p = PyLong_AsVoidPtr(obj);
    if (p == NULL && PyErr_Occurred())
        return -1;
    *out = (nvtxDomainHandle_t)p;
    return 0;
}

static void
fill_attributes(nvtxEventAttributes_t *a, const char *message, long long color, unsigned category)
{
    memset(a, 0, sizeof *a);
    a->version = NVTX_VERSION;
    a->size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a->messageType = NVTX_MESSAGE_TYPE_ASCII;
    a->message.ascii = message;
    a->category = category;
    if (color >= 0) {
        a->colorType = NVTX_COLOR_ARGB;
        a->color = (uint32_t)color;
    }
}

/* The nvtx package's payload: an int (int64, or uint64 above its range) or a float (double). */
static int
fill_payload(nvtxEventAttributes_t *a, PyObject *payload)
{
    if (payload == Py_None)
        return 0;
    if (PyFloat_Check(payload)) {
        a->payloadType = NVTX_PAYLOAD_TYPE_DOUBLE;
        a->payload.dValue = PyFloat_AS_DOUBLE(payload);
        return 0;
    }
    if (!PyLong_Check(payload) || PyBool_Check(payload)) {
        PyErr_Format(PyExc_TypeError, "NVTX payload must be an int or a float, got %s",
                     Py_TYPE(payload)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(payload, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow == 0) {
        a->payloadType = NVTX_PAYLOAD_TYPE_INT64;
        a->payload.llValue = v;
        return 0;
    }
    unsigned long long u = overflow > 0 ? PyLong_AsUnsignedLongLong(payload) : 0;
    if (overflow < 0 || (u == (unsigned long long)-1 && PyErr_Occurred())) {
        PyErr_Clear();
        PyErr_SetString(PyExc_OverflowError, "NVTX payload int must fit in 64 bits");
        return -1;
    }
    a->payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a->payload.ullValue = u;
    return 0;
}

/* A message NVTX can take: a str, UTF-8 without a null character (C would cut it there). */
static const char *
event_message(PyObject *obj)
{
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "NVTX message must be a str, got %s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    Py_ssize_t size;
    const char *message = PyUnicode_AsUTF8AndSize(obj, &size);
    if (message != NULL && strlen(message) != (size_t)size) {
        PyErr_SetString(PyExc_ValueError, "NVTX message must not contain a null character");
        return NULL;
    }
    return message;
}

/* A category or a range id: an int (as PyArg's "K": no __index__, wrapped modulo 2**64; a
 * category is then checked against its range by the caller). */
static int
event_uint(PyObject *obj, const char *what, unsigned long long *out)
{
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "NVTX %s must be an int, got %s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = PyLong_AsUnsignedLongLongMask(obj);
    return *out == (unsigned long long)-1 && PyErr_Occurred() ? -1 : 0;
}

/* Shared argument parsing: (message, color=-1, domain=None, category=0, payload=None), by hand
 * (METH_FASTCALL): PyArg_ParseTuple's format and the argument tuple were most of these calls'
 * cost with a tool attached. The category is checked here (a large or negative one would
 * otherwise wrap silently). */
static int
parse_event(PyObject *const *args, Py_ssize_t nargs, nvtxEventAttributes_t *a,
            nvtxDomainHandle_t *domain)
{
    if (nargs < 1 || nargs > 5) {
        PyErr_Format(PyExc_TypeError,
                     "NVTX events take (message, color, domain, category, payload): 1 to 5 "
                     "arguments, got %zd",
                     nargs);
        return -1;
    }
    const char *message = event_message(args[0]);
    if (message == NULL)
        return -1;
    long long color = nargs > 1 ? PyLong_AsLongLong(args[1]) : -1;
    if (color == -1 && PyErr_Occurred())
        return -1;
    unsigned long long category = 0;
    if (nargs > 3 && event_uint(args[3], "category", &category) < 0)
        return -1;
    if (category > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "NVTX category must be in [0, 2**32)");
        return -1;
    }
    if (parse_domain(nargs > 2 ? args[2] : NULL, domain) < 0)
        return -1;
    fill_attributes(a, message, color, (unsigned)category);
    return fill_payload(a, nargs > 4 ? args[4] : Py_None);
}

static PyObject *
nvtx_push(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    nvtxEventAttributes_t a;
    nvtxDomainHandle_t domain;
    if (parse_event(args, nargs, &a, &domain) < 0)
        return NULL;
    int depth = domain ? nvtxDomainRangePushEx(domain, &a) : nvtxRangePushEx(&a);
    return PyLong_FromLong(depth);
}

static PyObject *
nvtx_pop(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    nvtxDomainHandle_t domain;
    if (nargs > 1)
        return PyErr_Format(PyExc_TypeError, "_nvtx_pop takes (domain=None), got %zd arguments",
                            nargs);
    if (parse_domain(nargs ? args[0] : NULL, &domain) < 0)
        return NULL;
    int depth = domain ? nvtxDomainRangePop(domain) : nvtxRangePop();
    return PyLong_FromLong(depth);
}

static PyObject *
nvtx_mark(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    nvtxEventAttributes_t a;
    nvtxDomainHandle_t domain;
    if (parse_event(args, nargs, &a, &domain) < 0)
        return NULL;
    if (domain)
        nvtxDomainMarkEx(domain, &a);
    else
        nvtxMarkEx(&a);
    Py_RETURN_NONE;
}

static PyObject *
nvtx_start(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    nvtxEventAttributes_t a;
    nvtxDomainHandle_t domain;
    if (parse_event(args, nargs, &a, &domain) < 0)
        return NULL;
    nvtxRangeId_t id = domain ? nvtxDomainRangeStartEx(domain, &a) : nvtxRangeStartEx(&a);
    return PyLong_FromUnsignedLongLong(id);
}

static PyObject *
nvtx_end(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    unsigned long long id;
    nvtxDomainHandle_t domain;
    if (nargs < 1 || nargs > 2)
        return PyErr_Format(PyExc_TypeError,
                            "_nvtx_end takes (range id, domain=None), got %zd arguments", nargs);
    if (event_uint(args[0], "range id", &id) < 0 ||
        parse_domain(nargs > 1 ? args[1] : NULL, &domain) < 0)
        return NULL;
    if (domain)
        nvtxDomainRangeEnd(domain, id);
    else
        nvtxRangeEnd(id);
    Py_RETURN_NONE;
}

static PyObject *
nvtx_domain_create(PyObject *self, PyObject *args)
{
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name))
        return NULL;
    nvtxDomainHandle_t h = nvtxDomainCreateA(name);
    /* With no tool attached NVTX hands out NULL; keep a non-zero token so the domain is kept. */
    return h ? PyLong_FromVoidPtr(h) : PyLong_FromLong(0);
}

/* A category's name in Nsight (the nvtx package's category="name"): nvtxDomainNameCategoryA in a
 * domain, nvtxNameCategoryA in the default one; a no-op without a tool attached. */
static PyObject *
nvtx_name_category(PyObject *self, PyObject *args)
{
    unsigned int category;
    const char *name;
    PyObject *domain_obj = Py_None;
    nvtxDomainHandle_t domain;
    if (!PyArg_ParseTuple(args, "Is|O", &category, &name, &domain_obj) ||
        parse_domain(domain_obj, &domain) < 0)
        return NULL;
    if (domain)
        nvtxDomainNameCategoryA(domain, category, name);
    else
        nvtxNameCategoryA(category, name);
    Py_RETURN_NONE;
}

/* NvtxEventAttributes and NvtxDomain: the C halves of gpuprofile.nvtx's EventAttributes and
 * Domain (the nvtx package's hot path: attributes made once, then domain.push_range(attributes)
 * and pop_range per use). Python checks and resolves the attributes once (color names, category
 * names); their C half keeps the filled nvtxEventAttributes_t, so a push is one type check and
 * one NVTX call, with a tool attached or not: without one NVTX returns at once (a null function
 * pointer), so no flag of ours is needed to stay exact. Any other call form (keywords, a
 * message) goes to the Python method of the same name with a leading underscore. */
typedef struct {
    PyObject_HEAD
    nvtxEventAttributes_t a;
    PyObject *message; /* the str whose UTF-8 buffer a.message.ascii points into; NULL: not set */
} AttrObject;

typedef struct {
    PyObject_HEAD
    nvtxDomainHandle_t handle; /* NULL: NVTX's default domain */
} DomainObject;

static PyTypeObject *AttrType;
/* the Python methods that take every other call form; interned once (module init) */
static PyObject *slow_push, *slow_start, *slow_end, *slow_mark;

static void
attr_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    Py_CLEAR(((AttrObject *)self)->message);
    tp->tp_free(self);
    Py_DECREF(tp); /* a heap type: each instance holds a reference to it */
}

/* (message, color, domain, category[, payload]): the resolved arguments of _C._nvtx_push. The
 * domain is checked but not kept: the Domain that pushes the attributes gives it. */
static int
attr_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "NvtxEventAttributes takes positional arguments only");
        return -1;
    }
    nvtxEventAttributes_t a;
    nvtxDomainHandle_t unused;
    if (parse_event(PySequence_Fast_ITEMS(args), PyTuple_GET_SIZE(args), &a, &unused) < 0)
        return -1;
    AttrObject *o = (AttrObject *)self;
    /* "s" took item 0 as a str: hold it, the buffer lives as long as the str */
    Py_XSETREF(o->message, Py_NewRef(PyTuple_GET_ITEM(args, 0)));
    o->a = a;
    return 0;
}

/* The pre-made attributes when the call is exactly f(attributes), else NULL: with an exception
 * set when the attributes were never filled (a subclass that skipped __init__), without one when
 * the call takes the Python path. */
static const nvtxEventAttributes_t *
given_attributes(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs != 1 || kwnames != NULL || !PyObject_TypeCheck(args[0], AttrType))
        return NULL;
    AttrObject *o = (AttrObject *)args[0];
    if (o->message == NULL) {
        PyErr_SetString(PyExc_TypeError, "NVTX event attributes were never initialized (a "
                                         "subclass's __init__ must call EventAttributes.__init__)");
        return NULL;
    }
    return &o->a;
}

static PyObject *
slow_path(PyObject *self, PyObject *name, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    PyObject *method = PyObject_GetAttr(self, name);
    if (method == NULL)
        return NULL;
    PyObject *out = PyObject_Vectorcall(method, args, (size_t)nargs, kwnames);
    Py_DECREF(method);
    return out;
}

static PyObject *
domain_push_range(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    const nvtxEventAttributes_t *a = given_attributes(args, nargs, kwnames);
    if (a == NULL)
        return PyErr_Occurred() ? NULL : slow_path(self, slow_push, args, nargs, kwnames);
    nvtxDomainHandle_t h = ((DomainObject *)self)->handle;
    return PyLong_FromLong(h ? nvtxDomainRangePushEx(h, a) : nvtxRangePushEx(a));
}

/* METH_FASTCALL rather than METH_NOARGS: CPython 3.11 specializes calls of a bound builtin
 * method for the former only (pop = domain.pop_range; pop() is the habit of nvtx's users). */
static PyObject *
domain_pop_range(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 0)
        return PyErr_Format(PyExc_TypeError, "pop_range() takes no arguments (%zd given)", nargs);
    nvtxDomainHandle_t h = ((DomainObject *)self)->handle;
    return PyLong_FromLong(h ? nvtxDomainRangePop(h) : nvtxRangePop());
}

static PyObject *
domain_start_range(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    const nvtxEventAttributes_t *a = given_attributes(args, nargs, kwnames);
    if (a == NULL)
        return PyErr_Occurred() ? NULL : slow_path(self, slow_start, args, nargs, kwnames);
    nvtxDomainHandle_t h = ((DomainObject *)self)->handle;
    return PyLong_FromUnsignedLongLong(h ? nvtxDomainRangeStartEx(h, a) : nvtxRangeStartEx(a));
}

static PyObject *
domain_mark(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    const nvtxEventAttributes_t *a = given_attributes(args, nargs, kwnames);
    if (a == NULL)
        return PyErr_Occurred() ? NULL : slow_path(self, slow_mark, args, nargs, kwnames);
    nvtxDomainHandle_t h = ((DomainObject *)self)->handle;
    if (h)
        nvtxDomainMarkEx(h, a);
    else
        nvtxMarkEx(a);
    Py_RETURN_NONE;
}

/* end_range(range_id): an id from start_range, an int in [0, 2**64) (a bool or a float is no
 * id); a keyword goes to the Python method. */
static PyObject *
domain_end_range(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs != 1 || kwnames != NULL)
        return slow_path(self, slow_end, args, nargs, kwnames);
    if (!PyLong_Check(args[0]) || PyBool_Check(args[0]))
        return PyErr_Format(PyExc_TypeError,
                            "NVTX range_id must be an int (from start_range), got %s",
                            Py_TYPE(args[0])->tp_name);
    unsigned long long id = PyLong_AsUnsignedLongLong(args[0]);
    if (id == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_SetString(PyExc_OverflowError, "NVTX range_id must be in [0, 2**64)");
        return NULL;
    }
    nvtxDomainHandle_t h = ((DomainObject *)self)->handle;
    if (h)
        nvtxDomainRangeEnd(h, id);
    else
        nvtxRangeEnd(id);
    Py_RETURN_NONE;
}

static PyObject *
domain_get_handle(PyObject *self, void *closure)
{
    nvtxDomainHandle_t h = ((DomainObject *)self)->handle;
    return h ? PyLong_FromVoidPtr(h) : Py_NewRef(Py_None);
}

/* _handle: None (NVTX's default domain) or what _nvtx_domain_create returned */
static int
domain_set_handle(PyObject *self, PyObject *value, void *closure)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "an NVTX domain's _handle cannot be deleted");
        return -1;
    }
    if (value != Py_None && (!PyLong_Check(value) || PyBool_Check(value))) {
        PyErr_Format(PyExc_TypeError, "an NVTX domain's _handle must be None or an int, got %s",
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    return parse_domain(value, &((DomainObject *)self)->handle);
}

static void
domain_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *domain_init_subclass(PyObject *cls, PyObject *args, PyObject *kwds);

#define EVENT_SIGNATURE                                                                            \
    "($self, attributes=None, message=None, color=None, category=None, payload=None)"
static PyMethodDef domain_methods[] = {
    {"push_range", (PyCFunction)(void (*)(void))domain_push_range, METH_FASTCALL | METH_KEYWORDS,
     "push_range" EVENT_SIGNATURE "\n--\n\nOpen a nested range: push_range(event_attributes) or "
     "push_range(message=..., color=...); returns its depth (negative without a tool)."},
    {"pop_range", (PyCFunction)(void (*)(void))domain_pop_range, METH_FASTCALL,
     "pop_range($self, /)\n--\n\nClose this thread's innermost range of this domain."},
    {"start_range", (PyCFunction)(void (*)(void))domain_start_range, METH_FASTCALL | METH_KEYWORDS,
     "start_range" EVENT_SIGNATURE "\n--\n\nOpen a range that may end on another thread; returns "
     "the id to pass to end_range (0 without a tool)."},
    {"end_range", (PyCFunction)(void (*)(void))domain_end_range, METH_FASTCALL | METH_KEYWORDS,
     "end_range($self, range_id)\n--\n\nClose a range opened with start_range."},
    {"mark", (PyCFunction)(void (*)(void))domain_mark, METH_FASTCALL | METH_KEYWORDS,
     "mark" EVENT_SIGNATURE "\n--\n\nAn instantaneous marker."},
    {"__init_subclass__", (PyCFunction)(void (*)(void))domain_init_subclass,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, "Give the subclass its own C method descriptors."},
    {NULL, NULL, 0, NULL},
};
#undef EVENT_SIGNATURE

/* Each subclass (gpuprofile.nvtx.Domain) gets its own descriptors of the C methods: CPython
 * 3.11-3.13 run a C method call specialized only when the instance's type is exactly the
 * method's type, so the inherited ones cost a generic call, ~25 ns more per call. */
static PyObject *
domain_init_subclass(PyObject *cls, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "NvtxDomain subclasses take no class arguments");
        return NULL;
    }
    PyObject *own = ((PyTypeObject *)cls)->tp_dict;
    for (PyMethodDef *m = domain_methods; m->ml_name != NULL; m++) {
        if ((m->ml_flags & METH_CLASS) || PyDict_GetItemString(own, m->ml_name) != NULL)
            continue; /* the subclass's own definition wins */
        PyObject *descr = PyDescr_NewMethod((PyTypeObject *)cls, m);
        int rc = descr == NULL ? -1 : PyObject_SetAttrString(cls, m->ml_name, descr);
        Py_XDECREF(descr);
        if (rc < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

static PyGetSetDef domain_getset[] = {
    {"_handle", domain_get_handle, domain_set_handle, "the NVTX domain handle (None: default)",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot attr_slots[] = {
    {Py_tp_doc, "The C half of gpuprofile.nvtx.EventAttributes: the filled NVTX event "
                "attributes. Made with the resolved (message, color, domain, category[, "
                "payload])."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, attr_init},
    {Py_tp_dealloc, attr_dealloc},
    {0, NULL},
};

static PyType_Spec attr_spec = {
    .name = "gpuprofile._C.NvtxEventAttributes",
    .basicsize = sizeof(AttrObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = attr_slots,
};

static PyType_Slot domain_slots[] = {
    {Py_tp_doc, "The C half of gpuprofile.nvtx.Domain: its handle and the per-call methods."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, domain_dealloc},
    {Py_tp_methods, domain_methods},
    {Py_tp_getset, domain_getset},
    {0, NULL},
};

static PyType_Spec domain_spec = {
    .name = "gpuprofile._C.NvtxDomain",
    .basicsize = sizeof(DomainObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = domain_slots,
};

static int
add_types(PyObject *module)
{
    AttrType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &attr_spec, NULL);
    if (AttrType == NULL || PyModule_AddType(module, AttrType) < 0)
        return -1;
    PyTypeObject *domain_type =
        (PyTypeObject *)PyType_FromModuleAndSpec(module, &domain_spec, NULL);
    int rc = domain_type == NULL ? -1 : PyModule_AddType(module, domain_type);
    Py_XDECREF(domain_type); /* the module holds it */
    if (rc < 0)
        return -1;
    /* interned once per process (kept, as the type pointer is) */
    PyObject **names[] = {&slow_push, &slow_start, &slow_end, &slow_mark};
    const char *texts[] = {"_push_range", "_start_range", "_end_range", "_mark"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (*names[i] == NULL && (*names[i] = PyUnicode_InternFromString(texts[i])) == NULL)
            return -1;
    return 0;
}

static PyMethodDef nvtx_methods[] = {
    {"_nvtx_name_category", nvtx_name_category, METH_VARARGS, "(category, name, domain)"},
    {"_nvtx_push", (PyCFunction)(void (*)(void))nvtx_push, METH_FASTCALL,
     "(message, color, domain, category, payload) -> depth"},
    {"_nvtx_pop", (PyCFunction)(void (*)(void))nvtx_pop, METH_FASTCALL, "(domain) -> depth"},
    {"_nvtx_mark", (PyCFunction)(void (*)(void))nvtx_mark, METH_FASTCALL,
     "(message, color, domain, category, payload)"},
    {"_nvtx_start", (PyCFunction)(void (*)(void))nvtx_start, METH_FASTCALL,
     "(message, color, domain, category, payload) -> range id"},
    {"_nvtx_end", (PyCFunction)(void (*)(void))nvtx_end, METH_FASTCALL, "(range id, domain)"},
    {"_nvtx_domain_create", nvtx_domain_create, METH_VARARGS, "(name) -> handle"},
    {NULL, NULL, 0, NULL},
};

int
gp_nvtx_init(PyObject *module)
{
    return PyModule_AddFunctions(module, nvtx_methods) < 0 ? -1 : add_types(module);
}
