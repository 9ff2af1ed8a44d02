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

/* Shared argument parsing: (message, color=-1, domain=None, category=0, payload=None). The
 * category is checked here (PyArg's "I" would wrap a large or negative one silently). */
static int
parse_event(PyObject *args, nvtxEventAttributes_t *a, nvtxDomainHandle_t *domain)
{
    const char *message;
    long long color = -1;
    unsigned long long category = 0;
    PyObject *domain_obj = Py_None, *payload = Py_None;
    if (!PyArg_ParseTuple(args, "s|LOKO", &message, &color, &domain_obj, &category, &payload))
        return -1;
    if (category > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "NVTX category must be in [0, 2**32)");
        return -1;
    }
    if (parse_domain(domain_obj, domain) < 0)
        return -1;
    fill_attributes(a, message, color, (unsigned)category);
    return fill_payload(a, payload);
}

static PyObject *
nvtx_push(PyObject *self, PyObject *args)
{
    nvtxEventAttributes_t a;
    nvtxDomainHandle_t domain;
    if (parse_event(args, &a, &domain) < 0)
        return NULL;
    int depth = domain ? nvtxDomainRangePushEx(domain, &a) : nvtxRangePushEx(&a);
    return PyLong_FromLong(depth);
}

static PyObject *
nvtx_pop(PyObject *self, PyObject *args)
{
    PyObject *domain_obj = Py_None;
    nvtxDomainHandle_t domain;
    if (!PyArg_ParseTuple(args, "|O", &domain_obj) || parse_domain(domain_obj, &domain) < 0)
        return NULL;
    int depth = domain ? nvtxDomainRangePop(domain) : nvtxRangePop();
    return PyLong_FromLong(depth);
}

static PyObject *
nvtx_mark(PyObject *self, PyObject *args)
{
    nvtxEventAttributes_t a;
    nvtxDomainHandle_t domain;
    if (parse_event(args, &a, &domain) < 0)
        return NULL;
    if (domain)
        nvtxDomainMarkEx(domain, &a);
    else
        nvtxMarkEx(&a);
    Py_RETURN_NONE;
}

static PyObject *
nvtx_start(PyObject *self, PyObject *args)
{
    nvtxEventAttributes_t a;
    nvtxDomainHandle_t domain;
    if (parse_event(args, &a, &domain) < 0)
        return NULL;
    nvtxRangeId_t id = domain ? nvtxDomainRangeStartEx(domain, &a) : nvtxRangeStartEx(&a);
    return PyLong_FromUnsignedLongLong(id);
}

static PyObject *
nvtx_end(PyObject *self, PyObject *args)
{
    unsigned long long id;
    PyObject *domain_obj = Py_None;
    nvtxDomainHandle_t domain;
    if (!PyArg_ParseTuple(args, "K|O", &id, &domain_obj) || parse_domain(domain_obj, &domain) < 0)
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

static PyMethodDef nvtx_methods[] = {
    {"_nvtx_name_category", nvtx_name_category, METH_VARARGS, "(category, name, domain)"},
    {"_nvtx_push", nvtx_push, METH_VARARGS, "(message, color, domain, category, payload) -> depth"},
    {"_nvtx_pop", nvtx_pop, METH_VARARGS, "(domain) -> depth"},
    {"_nvtx_mark", nvtx_mark, METH_VARARGS, "(message, color, domain, category, payload)"},
    {"_nvtx_start", nvtx_start, METH_VARARGS, "(message, color, domain, category, payload) -> range id"},
    {"_nvtx_end", nvtx_end, METH_VARARGS, "(range id, domain)"},
    {"_nvtx_domain_create", nvtx_domain_create, METH_VARARGS, "(name) -> handle"},
    {NULL, NULL, 0, NULL},
};

int
gp_nvtx_init(PyObject *module)
{
    return PyModule_AddFunctions(module, nvtx_methods);
}
