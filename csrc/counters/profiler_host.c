/* _C.MetricsHost: one CUPTI profiler host object.
 *
 * Python equivalent (minus CUPTI):
 *
 *     class MetricsHost:
 *         def __init__(self, chip, kind="range", counter_availability=None): ...
 *         def properties(self, name) -> (description, hw_unit, dim_unit, type) | None
 *         def base_metrics(self) -> [(name, type), ...]
 *         def submetrics(self, base, type) -> [".sum", ...]
 *         def configure(self, names) -> (config_image, passes)   # once per host object
 *         def close(self): ...
 *
 * `type` is "counter", "ratio" or "throughput". Every call is host-only and quick (no GPU). */
#include "profiler_host.h"
#include "core/cupti_loader.h"
#include "core/errors.h"
#include "core/util.h"

#include <string.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    CUpti_Profiler_Host_Object *host;
    CUpti_ProfilerType kind;
    PyObject *chip;
    int configured;
} gp_host;

static PyTypeObject *HostType;

static const char *const type_names[] = {"counter", "ratio", "throughput"};

int
gp_metric_names_from(PyObject *obj, gp_metric_names *out)
{
    out->seq = NULL;
    out->names = NULL;
    out->n = 0;
    if (PyUnicode_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "metric names must be a sequence of str, not one str");
        return -1;
    }
    /* A tuple of our own, not the caller's list: the names point into its items, and they are
     * used while the user's fn runs, which may change that list. */
    PyObject *seq = PySequence_Tuple(obj);
    if (seq == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError))
            PyErr_SetString(PyExc_TypeError, "metric names must be a sequence of str");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    if (n == 0) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "no metric names given");
        return -1;
    }
    const char **names = PyMem_Calloc((size_t)n, sizeof *names);
    if (names == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = PyTuple_GET_ITEM(seq, k);
        names[k] = PyUnicode_Check(item) ? PyUnicode_AsUTF8(item) : NULL;
        if (names[k] == NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "metric names must be str, got %.100s",
                             Py_TYPE(item)->tp_name);
            PyMem_Free(names);
            Py_DECREF(seq);
            return -1;
        }
    }
    out->seq = seq;
    out->names = names;
    out->n = (size_t)n;
    return 0;
}

void
gp_metric_names_free(gp_metric_names *names)
{
    PyMem_Free(names->names);
    Py_CLEAR(names->seq);
    names->names = NULL;
    names->n = 0;
}

CUpti_Profiler_Host_Object *
gp_metrics_host_object(PyObject *obj, CUpti_ProfilerType kind)
{
    if (!PyObject_TypeCheck(obj, HostType)) {
        PyErr_Format(PyExc_TypeError, "expected a MetricsHost, got %.100s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    gp_host *self = (gp_host *)obj;
    if (self->host == NULL) {
        PyErr_SetString(PyExc_ValueError, "MetricsHost is closed");
        return NULL;
    }
    if (self->kind != kind) {
        PyErr_SetString(PyExc_ValueError, "MetricsHost is of the wrong kind (range vs pm)");
        return NULL;
    }
    return self->host;
}

CUptiResult
gp_metrics_host_evaluate_into(CUpti_Profiler_Host_Object *host, const uint8_t *image, size_t size,
                              size_t index, const gp_metric_names *names, double *values)
{
    CUpti_Profiler_Host_EvaluateToGpuValues_Params p = {
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    p.pHostObject = host;
    p.pCounterDataImage = image;
    p.counterDataImageSize = size;
    p.rangeIndex = index;
    p.ppMetricNames = names->names;
    p.numMetrics = names->n;
    p.pMetricValues = values;
    return gp_cupti.cuptiProfilerHostEvaluateToGpuValues(&p);
}

PyObject *
gp_metrics_host_evaluate(CUpti_Profiler_Host_Object *host, const uint8_t *image, size_t size,
                         size_t index, const gp_metric_names *names)
{
    double *values = PyMem_Calloc(names->n, sizeof *values);
    if (values == NULL)
        return PyErr_NoMemory();
    PyObject *out = NULL;
    CUptiResult res = gp_metrics_host_evaluate_into(host, image, size, index, names, values);
    if (res != CUPTI_SUCCESS) {
        gp_set_cupti_error(res, "cuptiProfilerHostEvaluateToGpuValues", __FILE__, __LINE__);
        goto error;
    }
    out = PyTuple_New((Py_ssize_t)names->n);
    for (size_t k = 0; out != NULL && k < names->n; k++) {
        PyObject *v = PyFloat_FromDouble(values[k]);
        if (v == NULL)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, (Py_ssize_t)k, v);
    }
error:
    PyMem_Free(values);
    return out;
}

/* ---- the type -------------------------------------------------------------------------------- */

static int
parse_kind(PyObject *obj, CUpti_ProfilerType *kind)
{
    const char *s = obj == NULL ? "range" : (PyUnicode_Check(obj) ? PyUnicode_AsUTF8(obj) : NULL);
    if (s != NULL && strcmp(s, "range") == 0)
        *kind = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    else if (s != NULL && strcmp(s, "pm") == 0)
        *kind = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    else {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError,
                        "kind must be 'range' (range profiler) or 'pm' (PM sampling)");
        return -1;
    }
    return 0;
}

static PyObject *
host_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"chip", "kind", "counter_availability", NULL};
    PyObject *chip, *kind_obj = NULL, *avail = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U|OO:MetricsHost", kwlist, &chip, &kind_obj,
                                     &avail))
        return NULL;
    CUpti_ProfilerType kind;
    if (parse_kind(kind_obj, &kind) < 0)
        return NULL;
    if (avail != Py_None && !PyBytes_Check(avail)) {
        PyErr_SetString(PyExc_TypeError, "counter_availability must be bytes or None");
        return NULL;
    }
    const char *chip_utf8 = PyUnicode_AsUTF8(chip);
    if (chip_utf8 == NULL || gp_cupti_load() < 0)
        return NULL;
    CUpti_Profiler_Host_Initialize_Params p = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    p.profilerType = kind;
    p.pChipName = chip_utf8;
    p.pCounterAvailabilityImage =
        avail == Py_None ? NULL : (const uint8_t *)PyBytes_AS_STRING(avail);
    CUptiResult res = gp_cupti.cuptiProfilerHostInitialize(&p);
    if (res == CUPTI_ERROR_INVALID_CHIP_NAME ||
        (res == CUPTI_ERROR_INVALID_PARAMETER && avail == Py_None)) {
        PyErr_Format(PyExc_ValueError, "CUPTI does not know the chip %R (see list_chips())", chip);
        return NULL;
    }
    if (res != CUPTI_SUCCESS)
        return gp_set_cupti_error(res, "cuptiProfilerHostInitialize", __FILE__, __LINE__);
    gp_host *self = PyObject_New(gp_host, type);
    if (self == NULL) {
        CUpti_Profiler_Host_Deinitialize_Params d = {
            CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
        d.pHostObject = p.pHostObject;
        (void)gp_cupti.cuptiProfilerHostDeinitialize(&d);
        return NULL;
    }
    self->host = p.pHostObject;
    self->kind = kind;
    self->chip = Py_NewRef(chip);
    self->configured = 0;
    return (PyObject *)self;
}

static int
host_close_impl(gp_host *self)
{
    if (self->host == NULL)
        return 0;
    CUpti_Profiler_Host_Deinitialize_Params p = {
        CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    p.pHostObject = self->host;
    self->host = NULL;
    GP_CUPTI_CHECK(gp_cupti.cuptiProfilerHostDeinitialize(&p));
    return 0;
error:
    return -1;
}

static void
host_dealloc(PyObject *op)
{
    gp_host *self = (gp_host *)op;
    GP_DEALLOC_TEARDOWN(op, host_close_impl(self));
    Py_XDECREF(self->chip);
    gp_free_heap_object(op);
}

static gp_host *
open_host(PyObject *op)
{
    gp_host *self = (gp_host *)op;
    if (self->host == NULL) {
        PyErr_SetString(PyExc_ValueError, "MetricsHost is closed");
        return NULL;
    }
    return self;
}

static PyObject *
host_close(PyObject *op, PyObject *unused)
{
    if (host_close_impl((gp_host *)op) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* properties(name) -> (description, hw_unit, dim_unit, type) or None for a name CUPTI rejects. */
static PyObject *
host_properties(PyObject *op, PyObject *name)
{
    gp_host *self = open_host(op);
    if (self == NULL)
        return NULL;
    const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (s == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "metric name must be a str");
        return NULL;
    }
    CUpti_Profiler_Host_GetMetricProperties_Params p = {
        CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE};
    p.pHostObject = self->host;
    p.pMetricName = s;
    CUptiResult res = gp_cupti.cuptiProfilerHostGetMetricProperties(&p);
    if (res == CUPTI_ERROR_INVALID_METRIC_NAME)
        Py_RETURN_NONE;
    if (res != CUPTI_SUCCESS)
        return gp_set_cupti_error(res, "cuptiProfilerHostGetMetricProperties", __FILE__, __LINE__);
    const char *type = (unsigned)p.metricType < 3 ? type_names[p.metricType] : "unknown";
    return Py_BuildValue("(ssss)", p.pDescription ? p.pDescription : "", p.pHwUnit ? p.pHwUnit : "",
                         p.pDimUnit ? p.pDimUnit : "", type);
}

/* base_metrics() -> [(name, type), ...] of every base metric of the chip. */
static PyObject *
host_base_metrics(PyObject *op, PyObject *unused)
{
    gp_host *self = open_host(op);
    if (self == NULL)
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    for (int t = 0; t < 3; t++) {
        CUpti_Profiler_Host_GetBaseMetrics_Params p = {
            CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE};
        p.pHostObject = self->host;
        p.metricType = (CUpti_MetricType)t;
        GP_CUPTI_CHECK(gp_cupti.cuptiProfilerHostGetBaseMetrics(&p));
        for (size_t k = 0; k < p.numMetrics; k++) {
            PyObject *item = Py_BuildValue("(ss)", p.ppMetricNames[k], type_names[t]);
            if (item == NULL || PyList_Append(out, item) < 0) {
                Py_XDECREF(item);
                goto error;
            }
            Py_DECREF(item);
        }
    }
    return out;
error:
    Py_DECREF(out);
    return NULL;
}

/* submetrics(name, type) -> [suffix, ...]: the rollups/submetrics a base metric accepts. */
static PyObject *
host_submetrics(PyObject *op, PyObject *args)
{
    gp_host *self = open_host(op);
    const char *name, *type;
    if (self == NULL || !PyArg_ParseTuple(args, "ss:submetrics", &name, &type))
        return NULL;
    int t = -1;
    for (int k = 0; k < 3; k++)
        if (strcmp(type, type_names[k]) == 0)
            t = k;
    if (t < 0)
        return PyErr_Format(PyExc_ValueError, "type must be counter, ratio or throughput, got %s",
                            type);
    CUpti_Profiler_Host_GetSubMetrics_Params p = {
        CUpti_Profiler_Host_GetSubMetrics_Params_STRUCT_SIZE};
    p.pHostObject = self->host;
    p.metricType = (CUpti_MetricType)t;
    p.pMetricName = name;
    CUptiResult res = gp_cupti.cuptiProfilerHostGetSubMetrics(&p);
    if (res == CUPTI_ERROR_INVALID_METRIC_NAME)
        return PyList_New(0);
    if (res != CUPTI_SUCCESS)
        return gp_set_cupti_error(res, "cuptiProfilerHostGetSubMetrics", __FILE__, __LINE__);
    PyObject *out = PyList_New((Py_ssize_t)p.numOfSubmetrics);
    for (size_t k = 0; out != NULL && k < p.numOfSubmetrics; k++) {
        PyObject *s = PyUnicode_FromString(p.ppSubMetrics[k]);
        if (s == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, (Py_ssize_t)k, s);
    }
    return out;
}

/* configure(names) -> (config_image: bytes, passes: int). The names must be valid full names
 * (validate with properties() first: CUPTI rejects the whole list for one bad name, and crashes
 * on a bare base name without a rollup). */
static PyObject *
host_configure(PyObject *op, PyObject *arg)
{
    gp_host *self = open_host(op);
    if (self == NULL)
        return NULL;
    if (self->configured) {
        PyErr_SetString(PyExc_ValueError, "a MetricsHost configures one metric list: CUPTI "
                                          "accumulates metrics, so use a new MetricsHost");
        return NULL;
    }
    gp_metric_names names;
    if (gp_metric_names_from(arg, &names) < 0)
        return NULL;
    PyObject *image = NULL;
    self->configured = 1;
    CUpti_Profiler_Host_ConfigAddMetrics_Params add = {
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    add.pHostObject = self->host;
    add.ppMetricNames = names.names;
    add.numMetrics = names.n;
    GP_CUPTI_CHECK(gp_cupti.cuptiProfilerHostConfigAddMetrics(&add));
    CUpti_Profiler_Host_GetConfigImageSize_Params size = {
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    size.pHostObject = self->host;
    GP_CUPTI_CHECK(gp_cupti.cuptiProfilerHostGetConfigImageSize(&size));
    image = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size.configImageSize);
    if (image == NULL)
        goto error;
    CUpti_Profiler_Host_GetConfigImage_Params get = {
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    get.pHostObject = self->host;
    get.configImageSize = size.configImageSize;
    get.pConfigImage = (uint8_t *)PyBytes_AS_STRING(image);
    GP_CUPTI_CHECK(gp_cupti.cuptiProfilerHostGetConfigImage(&get));
    CUpti_Profiler_Host_GetNumOfPasses_Params passes = {
        CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    passes.configImageSize = size.configImageSize;
    passes.pConfigImage = (uint8_t *)PyBytes_AS_STRING(image);
    GP_CUPTI_CHECK(gp_cupti.cuptiProfilerHostGetNumOfPasses(&passes));
    gp_metric_names_free(&names);
    return Py_BuildValue("(Nn)", image, (Py_ssize_t)passes.numOfPasses);
error:
    Py_XDECREF(image);
    gp_metric_names_free(&names);
    return NULL;
}

static PyObject *
host_repr(PyObject *op)
{
    gp_host *self = (gp_host *)op;
    return PyUnicode_FromFormat("MetricsHost(%R, kind='%s'%s)", self->chip,
                                self->kind == CUPTI_PROFILER_TYPE_PM_SAMPLING ? "pm" : "range",
                                self->host == NULL ? ", closed" : "");
}

/* _list_chips() -> [str]: the chips this CUPTI's host API knows. */
static PyObject *
list_chips(PyObject *module, PyObject *unused)
{
    if (gp_cupti_load() < 0)
        return NULL;
    CUpti_Profiler_Host_GetSupportedChips_Params p = {
        CUpti_Profiler_Host_GetSupportedChips_Params_STRUCT_SIZE};
    GP_CUPTI_CHECK(gp_cupti.cuptiProfilerHostGetSupportedChips(&p));
    PyObject *out = PyList_New((Py_ssize_t)p.numChips);
    for (size_t k = 0; out != NULL && k < p.numChips; k++) {
        PyObject *s = PyUnicode_FromString(p.ppChipNames[k]);
        if (s == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, (Py_ssize_t)k, s);
    }
    return out;
error:
    return NULL;
}

static PyMethodDef host_methods[] = {
    {"properties", host_properties, METH_O,
     "properties(name) -> (description, hw_unit, dim_unit, type) or None if CUPTI rejects it."},
    {"base_metrics", host_base_metrics, METH_NOARGS, "base_metrics() -> [(name, type), ...]"},
    {"submetrics", host_submetrics, METH_VARARGS, "submetrics(base, type) -> [suffix, ...]"},
    {"configure", host_configure, METH_O, "configure(names) -> (config_image, passes); once."},
    {"close", host_close, METH_NOARGS, "Deinitialize the CUPTI host object."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef host_members[] = {
    {"chip", T_OBJECT_EX, offsetof(gp_host, chip), READONLY, "The chip name."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot host_slots[] = {
    {Py_tp_new, host_new},
    {Py_tp_dealloc, host_dealloc},
    {Py_tp_repr, host_repr},
    {Py_tp_methods, host_methods},
    {Py_tp_members, host_members},
    {Py_tp_doc, (void *)"MetricsHost(chip, kind='range', counter_availability=None)\n--\n\n"
                        "A CUPTI profiler host object for `chip` (offline: no GPU needed)."},
    {0, NULL},
};

static PyType_Spec host_spec = {
    .name = "gpuprofile.MetricsHost",
    .basicsize = sizeof(gp_host),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = host_slots,
};

static PyMethodDef host_module_methods[] = {
    {"_list_chips", list_chips, METH_NOARGS, "Chips CUPTI's host API supports."},
    {NULL, NULL, 0, NULL},
};

int
gp_profiler_host_init(PyObject *module)
{
    HostType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &host_spec, NULL);
    if (HostType == NULL || PyModule_AddType(module, HostType) < 0)
        return -1;
    return PyModule_AddFunctions(module, host_module_methods);
}
