/* _C.PCSampler.
 *
 * Python equivalent of one collection (gpuprofile/counters/stalls.py drives it):
 *
 *     s = PCSampler(period=None, max_pcs=4096)   # enable + configure on the current device
 *     try:
 *         s.start(); fn(); s.stop()              # stop() waits for the GPU, then harvests
 *         s.reasons      # [stall reason name, ...]
 *         s.pcs          # {(crc, function index, pc offset): [mangled name, [count per reason]]}
 *         s.totals       # dict: total, dropped, non-user samples; hardware buffer full
 *     finally:
 *         s.close()                              # disable (flushes the rest) and free
 *
 * Function names in records are allocated by CUPTI and may be shared with Activity records of
 * the tracing feature, so they are copied and never freed here (one string per function). */
#include "pcsampling.h"
#include "core/context.h"
#include "core/gpu_wait.h"
#include "cubins.h"
#include "core/cupti_loader.h"
#include "core/errors.h"
#include "profiler_target.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    int enabled, started;
    gp_counter_session session;
    size_t n_reasons;
    uint32_t *reason_index;
    char **reason_names;
    CUpti_PCSamplingData configured, fetched;
    PyObject *reasons; /* list of str */
    PyObject *pcs;     /* dict */
    unsigned long long total, dropped, non_user;
    int buffer_full;
} gp_pcs;

static PyTypeObject *PCSType;

static int
alloc_buffer(CUpti_PCSamplingData *d, size_t max_pcs, size_t n_reasons)
{
    memset(d, 0, sizeof *d);
    d->size = sizeof *d;
    d->collectNumPcs = max_pcs;
    d->pPcData = calloc(max_pcs, sizeof *d->pPcData);
    if (d->pPcData == NULL)
        return -1;
    for (size_t k = 0; k < max_pcs; k++) {
        d->pPcData[k].size = sizeof d->pPcData[k];
        d->pPcData[k].stallReason = calloc(n_reasons, sizeof(CUpti_PCSamplingStallReason));
        if (d->pPcData[k].stallReason == NULL)
            return -1;
    }
    return 0;
}

static void
free_buffer(CUpti_PCSamplingData *d)
{
    for (size_t k = 0; d->pPcData != NULL && k < d->collectNumPcs; k++)
        free(d->pPcData[k].stallReason);
    free(d->pPcData);
    d->pPcData = NULL;
}

static int
read_stall_reasons(gp_pcs *self)
{
    CUpti_PCSamplingGetNumStallReasonsParams num = {CUpti_PCSamplingGetNumStallReasonsParamsSize};
    num.ctx = self->session.ctx;
    num.numStallReasons = &self->n_reasons;
    GP_CUPTI_CHECK(gp_cupti.cuptiPCSamplingGetNumStallReasons(&num));
    self->reason_index = calloc(self->n_reasons, sizeof *self->reason_index);
    self->reason_names = calloc(self->n_reasons, sizeof *self->reason_names);
    if (self->reason_index == NULL || self->reason_names == NULL)
        goto nomem;
    for (size_t k = 0; k < self->n_reasons; k++)
        if ((self->reason_names[k] = calloc(1, CUPTI_STALL_REASON_STRING_SIZE)) == NULL)
            goto nomem;
    CUpti_PCSamplingGetStallReasonsParams get = {CUpti_PCSamplingGetStallReasonsParamsSize};
    get.ctx = self->session.ctx;
    get.numStallReasons = self->n_reasons;
    get.stallReasonIndex = self->reason_index;
    get.stallReasons = self->reason_names;
    GP_CUPTI_CHECK(gp_cupti.cuptiPCSamplingGetStallReasons(&get));
    self->reasons = PyList_New((Py_ssize_t)self->n_reasons);
    for (size_t k = 0; self->reasons != NULL && k < self->n_reasons; k++) {
        PyObject *s = PyUnicode_FromString(self->reason_names[k]);
        if (s == NULL)
            return -1;
        PyList_SET_ITEM(self->reasons, (Py_ssize_t)k, s);
    }
    return self->reasons == NULL ? -1 : 0;
nomem:
    PyErr_NoMemory();
error:
    return -1;
}

static int
configure(gp_pcs *self, int period)
{
    CUpti_PCSamplingConfigurationInfo attrs[5];
    memset(attrs, 0, sizeof attrs);
    size_t n = 0;
    attrs[n].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
    attrs[n++].attributeData.samplingDataBufferData.samplingDataBuffer = &self->configured;
    attrs[n].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
    attrs[n++].attributeData.collectionModeData.collectionMode =
        CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
    attrs[n].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL;
    attrs[n++].attributeData.enableStartStopControlData.enableStartStopControl = 1;
    attrs[n].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
    attrs[n].attributeData.stallReasonData.stallReasonCount = self->n_reasons;
    attrs[n++].attributeData.stallReasonData.pStallReasonIndex = self->reason_index;
    if (period > 0) {
        attrs[n].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
        attrs[n++].attributeData.samplingPeriodData.samplingPeriod = (uint32_t)period;
    }
    CUpti_PCSamplingConfigurationInfoParams p = {CUpti_PCSamplingConfigurationInfoParamsSize};
    p.ctx = self->session.ctx;
    p.numAttributes = n;
    p.pPCSamplingConfigurationInfo = attrs;
    GP_CUPTI_CHECK(gp_cupti.cuptiPCSamplingSetConfigurationAttribute(&p));
    return 0;
error:
    return -1;
}

static Py_ssize_t
reason_position(gp_pcs *self, uint32_t index)
{
    for (size_t k = 0; k < self->n_reasons; k++)
        if (self->reason_index[k] == index)
            return (Py_ssize_t)k;
    return -1;
}

/* Adds one PC record's counts to self->pcs. */
static int
add_record(gp_pcs *self, const CUpti_PCSamplingPCData *pc)
{
    PyObject *key = Py_BuildValue("(KIK)", (unsigned long long)pc->cubinCrc, pc->functionIndex,
                                  (unsigned long long)pc->pcOffset);
    if (key == NULL)
        return -1;
    PyObject *entry = PyDict_GetItemWithError(self->pcs, key); /* borrowed */
    if (entry == NULL && !PyErr_Occurred()) {
        PyObject *counts = PyList_New((Py_ssize_t)self->n_reasons);
        for (size_t k = 0; counts != NULL && k < self->n_reasons; k++)
            PyList_SET_ITEM(counts, (Py_ssize_t)k, PyLong_FromLong(0));
        entry = counts ? Py_BuildValue("[sN]", pc->functionName ? pc->functionName : "?", counts)
                       : NULL;
        if (entry == NULL || PyDict_SetItem(self->pcs, key, entry) < 0) {
            Py_XDECREF(entry);
            Py_DECREF(key);
            return -1;
        }
        Py_DECREF(entry); /* the dict holds it */
    }
    Py_DECREF(key);
    if (entry == NULL)
        return -1;
    PyObject *counts = PyList_GET_ITEM(entry, 1);
    for (size_t k = 0; k < pc->stallReasonCount; k++) {
        Py_ssize_t pos = reason_position(self, pc->stallReason[k].pcSamplingStallReasonIndex);
        if (pos < 0 || pc->stallReason[k].samples == 0)
            continue;
        long long old = PyLong_AsLongLong(PyList_GET_ITEM(counts, pos));
        PyObject *v = PyLong_FromLongLong(old + (long long)pc->stallReason[k].samples);
        if (v == NULL)
            return -1;
        PyList_SetItem(counts, pos, v);
    }
    return 0;
}

/* Reads what CUPTI put in `d`, then marks it consumed. */
static int
harvest(gp_pcs *self, CUpti_PCSamplingData *d)
{
    for (size_t k = 0; k < d->totalNumPcs && k < d->collectNumPcs; k++)
        if (add_record(self, &d->pPcData[k]) < 0)
            return -1;
    self->total += d->totalSamples;
    self->dropped += d->droppedSamples;
    self->non_user += d->nonUsrKernelsTotalSamples;
    self->buffer_full |= d->hardwareBufferFull;
    d->totalNumPcs = 0;
    d->totalSamples = d->droppedSamples = d->nonUsrKernelsTotalSamples = 0;
    return 0;
}

static int
fetch_remaining(gp_pcs *self, size_t remaining)
{
    while (remaining > 0) {
        CUpti_PCSamplingGetDataParams p = {CUpti_PCSamplingGetDataParamsSize};
        p.ctx = self->session.ctx;
        p.pcSamplingData = &self->fetched;
        CUptiResult res = gp_cupti.cuptiPCSamplingGetData(&p);
        if (res == CUPTI_ERROR_OUT_OF_MEMORY) {
            PyErr_SetString(gp_CuptiError, "PC sampling: the hardware buffer filled up and samples "
                                           "were lost; sample less often (a larger period)");
            return -1;
        }
        if (res != CUPTI_SUCCESS) {
            gp_set_cupti_error(res, "cuptiPCSamplingGetData", __FILE__, __LINE__);
            return -1;
        }
        remaining = self->fetched.remainingNumPcs;
        if (self->fetched.totalNumPcs == 0 && remaining > 0) {
            PyErr_SetString(gp_CuptiError,
                            "cuptiPCSamplingGetData returned no PCs with PCs remaining");
            return -1;
        }
        if (harvest(self, &self->fetched) < 0)
            return -1;
    }
    return 0;
}

static int
teardown(gp_pcs *self)
{
    int rc = 0;
    if (self->started) {
        CUpti_PCSamplingStopParams p = {CUpti_PCSamplingStopParamsSize};
        p.ctx = self->session.ctx;
        self->started = 0;
        CUptiResult res = gp_cupti.cuptiPCSamplingStop(&p);
        if (res != CUPTI_SUCCESS && rc++ == 0)
            gp_set_cupti_error(res, "cuptiPCSamplingStop (cleanup)", __FILE__, __LINE__);
    }
    if (self->enabled) {
        CUpti_PCSamplingDisableParams p = {CUpti_PCSamplingDisableParamsSize};
        p.ctx = self->session.ctx;
        self->enabled = 0;
        CUptiResult res = gp_cupti.cuptiPCSamplingDisable(&p);
        if (res != CUPTI_SUCCESS && rc++ == 0)
            gp_set_cupti_error(res, "cuptiPCSamplingDisable", __FILE__, __LINE__);
        else if (res == CUPTI_SUCCESS && self->pcs != NULL && harvest(self, &self->configured) < 0)
            rc++;
    }
    free_buffer(&self->configured);
    free_buffer(&self->fetched);
    for (size_t k = 0; self->reason_names != NULL && k < self->n_reasons; k++)
        free(self->reason_names[k]);
    free(self->reason_names);
    free(self->reason_index);
    self->reason_names = NULL;
    self->reason_index = NULL;
    gp_counter_session_end(&self->session);
    return rc ? -1 : 0;
}

static PyObject *
pcs_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"period", "max_pcs", NULL};
    int period = 0;
    Py_ssize_t max_pcs = 4096;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|in:PCSampler", kwlist, &period, &max_pcs))
        return NULL;
    if (period != 0 && (period < 5 || period > 31))
        return PyErr_Format(PyExc_ValueError,
                            "period is log2 of the sampling interval in cycles: "
                            "5..31 (or 0 for CUPTI's default), got %d",
                            period);
    if (max_pcs < 1 || max_pcs > (1 << 20))
        return PyErr_Format(PyExc_ValueError, "max_pcs must be in [1, 1048576], got %zd", max_pcs);
    gp_pcs *self = PyObject_New(gp_pcs, type);
    if (self == NULL)
        return NULL;
    memset((char *)self + sizeof(PyObject), 0, sizeof *self - sizeof(PyObject));
    if ((self->pcs = PyDict_New()) == NULL ||
        gp_counter_session_begin(&self->session, "PC sampling", CUPTI_PROFILER_PC_SAMPLING,
                                 "PC sampling") < 0)
        goto error;
    CUpti_PCSamplingEnableParams en = {CUpti_PCSamplingEnableParamsSize};
    en.ctx = self->session.ctx;
    GP_CUPTI_CHECK(gp_cupti.cuptiPCSamplingEnable(&en));
    self->enabled = 1;
    if (read_stall_reasons(self) < 0)
        goto error;
    if (alloc_buffer(&self->configured, (size_t)max_pcs, self->n_reasons) < 0 ||
        alloc_buffer(&self->fetched, (size_t)max_pcs, self->n_reasons) < 0) {
        PyErr_NoMemory();
        goto error;
    }
    if (configure(self, period) < 0)
        goto error;
    return (PyObject *)self;
error:
    Py_DECREF(self);
    return NULL;
}

static PyObject *
pcs_start(PyObject *op, PyObject *unused)
{
    gp_pcs *self = (gp_pcs *)op;
    if (!self->enabled || self->started)
        return PyErr_Format(gp_GpuProfileError, "PCSampler.start(): closed or already started");
    CUpti_PCSamplingStartParams p = {CUpti_PCSamplingStartParamsSize};
    p.ctx = self->session.ctx;
    GP_CUPTI_CHECK(gp_cupti.cuptiPCSamplingStart(&p));
    self->started = 1;
    Py_RETURN_NONE;
error:
    return NULL;
}

/* stop(): wait for the GPU, stop sampling, harvest every record of the range. */
static PyObject *
pcs_stop(PyObject *op, PyObject *unused)
{
    gp_pcs *self = (gp_pcs *)op;
    if (!self->started)
        return PyErr_Format(gp_GpuProfileError, "PCSampler.stop(): not started");
    if (gp_wait_device("cudaDeviceSynchronize (before cuptiPCSamplingStop)") < 0)
        return NULL;
    CUpti_PCSamplingStopParams p = {CUpti_PCSamplingStopParamsSize};
    p.ctx = self->session.ctx;
    self->started = 0;
    GP_CUPTI_CHECK(gp_cupti.cuptiPCSamplingStop(&p));
    size_t remaining = self->configured.remainingNumPcs;
    if (harvest(self, &self->configured) < 0 || fetch_remaining(self, remaining) < 0)
        return NULL;
    Py_RETURN_NONE;
error:
    return NULL;
}

static PyObject *
pcs_totals(PyObject *op, void *closure)
{
    gp_pcs *self = (gp_pcs *)op;
    return Py_BuildValue("{s:K,s:K,s:K,s:O}", "total_samples", self->total, "dropped_samples",
                         self->dropped, "non_user_samples", self->non_user, "hardware_buffer_full",
                         self->buffer_full ? Py_True : Py_False);
}

static PyObject *
pcs_close(PyObject *op, PyObject *unused)
{
    if (teardown((gp_pcs *)op) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static void
pcs_dealloc(PyObject *op)
{
    gp_pcs *self = (gp_pcs *)op;
    GP_DEALLOC_TEARDOWN(op, teardown(self));
    Py_XDECREF(self->reasons);
    Py_XDECREF(self->pcs);
    gp_free_heap_object(op);
}

/* _sass_to_source(crc, mangled_function, pc_offset) -> (file, dir, line) or None. */
static PyObject *
sass_to_source(PyObject *module, PyObject *args)
{
    unsigned long long crc, offset;
    const char *function;
    if (!PyArg_ParseTuple(args, "KsK:_sass_to_source", &crc, &function, &offset))
        return NULL;
    const void *cubin;
    size_t size;
    if (!gp_cubins_find(crc, &cubin, &size))
        Py_RETURN_NONE;
    CUpti_GetSassToSourceCorrelationParams p = {CUpti_GetSassToSourceCorrelationParamsSize};
    p.cubin = cubin;
    p.cubinSize = size;
    p.functionName = function;
    p.pcOffset = offset;
    CUptiResult res = gp_cupti.cuptiGetSassToSourceCorrelation(&p);
    if (res != CUPTI_SUCCESS) /* no line info for this PC (built without -lineinfo) */
        Py_RETURN_NONE;
    PyObject *out = Py_BuildValue("(ssI)", p.fileName ? p.fileName : "", p.dirName ? p.dirName : "",
                                  p.lineNumber);
    free(p.fileName);
    free(p.dirName);
    return out;
}

static PyMethodDef pcs_methods[] = {
    {"start", pcs_start, METH_NOARGS, "Start sampling (cuptiPCSamplingStart)."},
    {"stop", pcs_stop, METH_NOARGS, "Wait for the GPU, stop, and collect the records."},
    {"close", pcs_close, METH_NOARGS, "Disable PC sampling and free the buffers."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef pcs_members[] = {
    {"reasons", T_OBJECT, offsetof(gp_pcs, reasons), READONLY, "Stall reason names."},
    {"pcs", T_OBJECT, offsetof(gp_pcs, pcs), READONLY,
     "{(cubin crc, function index, pc offset): [mangled function name, [count per reason]]}"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef pcs_getset[] = {
    {"totals", pcs_totals, NULL, "Sample totals reported by CUPTI.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot pcs_slots[] = {
    {Py_tp_new, pcs_new},
    {Py_tp_dealloc, pcs_dealloc},
    {Py_tp_methods, pcs_methods},
    {Py_tp_members, pcs_members},
    {Py_tp_getset, pcs_getset},
    {Py_tp_doc,
     (void *)"PCSampler(period=0, max_pcs=4096)\n--\n\nPC sampling on the current device."},
    {0, NULL},
};

static PyType_Spec pcs_spec = {
    .name = "gpuprofile.PCSampler",
    .basicsize = sizeof(gp_pcs),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = pcs_slots,
};

static PyMethodDef module_methods[] = {
    {"_sass_to_source", sass_to_source, METH_VARARGS, "Source line of a PC, if known."},
    {NULL, NULL, 0, NULL},
};

int
gp_pcsampling_init(PyObject *module)
{
    PCSType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &pcs_spec, NULL);
    if (PCSType == NULL || PyModule_AddType(module, PCSType) < 0)
        return -1;
    return PyModule_AddFunctions(module, module_methods);
}
