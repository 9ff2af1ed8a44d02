/* _C.RangeProfiler.
 *
 * Python equivalent of one collection (gpuprofile/counters/metrics.py drives it):
 *
 *     rp = RangeProfiler(config_image, names, range="user", replay="user", max_ranges=1)
 *     try:
 *         while True:
 *             rp.start(); rp.push("fn"); fn(); rp.pop()
 *             if rp.stop(): break            # True once every pass is submitted
 *         rp.decode()                         # waits for the GPU; returns dropped ranges
 *         ranges = rp.evaluate(host)          # [(range name, (values...)), ...]
 *     finally:
 *         rp.close()                          # pops, stops, disables: no CUPTI state left
 */
#include "range_profiler.h"
#include "core/context.h"
#include "core/cupti_loader.h"
#include "core/errors.h"
#include "profiler_host.h"
#include "profiler_target.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>
#include <structmember.h>

/* Ranges per collection: counter data grows by ~1 MB per range for a SOL-sized set. */
#define GP_MAX_RANGES 65536

typedef struct {
    PyObject_HEAD
    CUpti_RangeProfiler_Object *obj;
    uint8_t *image;
    size_t image_size;
    gp_metric_names names;
    PyObject *config; /* bytes, kept alive for CUPTI */
    int user_range;
    int started;
    int depth;
    int busy; /* a call is in flight with the GIL released */
    gp_counter_session session;
    Py_ssize_t passes;
} gp_range;

static PyTypeObject *RangeType;

static int
enable(gp_range *self, CUcontext ctx)
{
    CUpti_RangeProfiler_Enable_Params p = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    p.ctx = ctx;
    GP_CUPTI_CHECK(gp_cupti.cuptiRangeProfilerEnable(&p));
    self->obj = p.pRangeProfilerObject;
    return 0;
error:
    return -1;
}

static int
make_counter_data(gp_range *self, size_t max_ranges)
{
    CUpti_RangeProfiler_GetCounterDataSize_Params size = {
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    size.pRangeProfilerObject = self->obj;
    size.pMetricNames = self->names.names;
    size.numMetrics = self->names.n;
    size.maxNumOfRanges = max_ranges;
    size.maxNumRangeTreeNodes = (uint32_t)max_ranges;
    GP_CUPTI_CHECK(gp_cupti.cuptiRangeProfilerGetCounterDataSize(&size));
    self->image = calloc(1, size.counterDataSize);
    if (self->image == NULL) {
        PyErr_Format(PyExc_MemoryError, "counter data image of %zu bytes", size.counterDataSize);
        return -1;
    }
    self->image_size = size.counterDataSize;
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params init = {
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    init.pRangeProfilerObject = self->obj;
    init.counterDataSize = self->image_size;
    init.pCounterData = self->image;
    GP_CUPTI_CHECK(gp_cupti.cuptiRangeProfilerCounterDataImageInitialize(&init));
    return 0;
error:
    return -1;
}

static int
set_config(gp_range *self, int kernel_replay, size_t max_ranges)
{
    CUpti_RangeProfiler_SetConfig_Params p = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = self->obj;
    p.configSize = (size_t)PyBytes_GET_SIZE(self->config);
    p.pConfig = (const uint8_t *)PyBytes_AS_STRING(self->config);
    p.counterDataImageSize = self->image_size;
    p.pCounterDataImage = self->image;
    p.range = self->user_range ? CUPTI_UserRange : CUPTI_AutoRange;
    p.replayMode = kernel_replay ? CUPTI_KernelReplay : CUPTI_UserReplay;
    p.maxRangesPerPass = max_ranges;
    p.numNestingLevels = 1;
    p.minNestingLevel = 1;
    p.passIndex = 0;
    p.targetNestingLevel = 1;
    GP_CUPTI_CHECK(gp_cupti.cuptiRangeProfilerSetConfig(&p));
    return 0;
error:
    return -1;
}

/* Undoes whatever is active, in order; keeps the first error (if none was set before). */
static int
teardown(gp_range *self)
{
    int failed = 0;
    CUptiResult res;
    while (self->obj != NULL && self->depth > 0) {
        CUpti_RangeProfiler_PopRange_Params p = {CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
        p.pRangeProfilerObject = self->obj;
        self->depth--;
        if ((res = gp_cupti.cuptiRangeProfilerPopRange(&p)) != CUPTI_SUCCESS && !failed++)
            gp_set_cupti_error(res, "cuptiRangeProfilerPopRange (cleanup)", __FILE__, __LINE__);
    }
    if (self->obj != NULL && self->started) {
        CUpti_RangeProfiler_Stop_Params p = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
        p.pRangeProfilerObject = self->obj;
        self->started = 0;
        if ((res = gp_cupti.cuptiRangeProfilerStop(&p)) != CUPTI_SUCCESS && !failed++)
            gp_set_cupti_error(res, "cuptiRangeProfilerStop (cleanup)", __FILE__, __LINE__);
    }
    if (self->obj != NULL) {
        CUpti_RangeProfiler_Disable_Params p = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
        p.pRangeProfilerObject = self->obj;
        self->obj = NULL;
        if ((res = gp_cupti.cuptiRangeProfilerDisable(&p)) != CUPTI_SUCCESS && !failed++)
            gp_set_cupti_error(res, "cuptiRangeProfilerDisable", __FILE__, __LINE__);
    }
    free(self->image);
    self->image = NULL;
    self->image_size = 0;
    gp_counter_session_end(&self->session);
    return failed ? -1 : 0;
}

static int
parse_choice(PyObject *obj, const char *what, const char *a, const char *b, int *is_b)
{
    const char *s = obj == NULL ? a : (PyUnicode_Check(obj) ? PyUnicode_AsUTF8(obj) : NULL);
    if (s != NULL && (strcmp(s, a) == 0 || strcmp(s, b) == 0)) {
        *is_b = strcmp(s, b) == 0;
        return 0;
    }
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "%s must be '%s' or '%s'", what, a, b);
    return -1;
}

static PyObject *
range_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"config", "names", "range", "replay", "max_ranges", NULL};
    PyObject *config, *names, *range_obj = NULL, *replay_obj = NULL;
    Py_ssize_t max_ranges = 1;
    int auto_range, kernel_replay;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "SO|OOn:RangeProfiler", kwlist, &config, &names,
                                     &range_obj, &replay_obj, &max_ranges) ||
        parse_choice(range_obj, "range", "user", "auto", &auto_range) < 0 ||
        parse_choice(replay_obj, "replay", "user", "kernel", &kernel_replay) < 0)
        return NULL;
    if (!auto_range && kernel_replay) {
        PyErr_SetString(PyExc_ValueError, "user ranges cannot use kernel replay (CUPTI refuses "
                                          "it by design): use range='auto' or replay='user'");
        return NULL;
    }
    if (max_ranges < 1 || max_ranges > GP_MAX_RANGES)
        return PyErr_Format(PyExc_ValueError, "max_ranges must be in [1, %d], got %zd",
                            GP_MAX_RANGES, max_ranges);
    gp_range *self = PyObject_New(gp_range, type);
    if (self == NULL)
        return NULL;
    memset((char *)self + sizeof(PyObject), 0, sizeof *self - sizeof(PyObject));
    self->config = Py_NewRef(config);
    self->user_range = !auto_range;
    if (gp_metric_names_from(names, &self->names) < 0 ||
        gp_counter_session_begin(&self->session, "the range profiler",
                                 CUPTI_PROFILER_RANGE_PROFILING, "range profiling") < 0 ||
        enable(self, self->session.ctx) < 0 || make_counter_data(self, (size_t)max_ranges) < 0 ||
        set_config(self, kernel_replay, (size_t)max_ranges) < 0)
        goto error;
    return (PyObject *)self;
error:
    Py_DECREF(self); /* dealloc tears down what was set up, keeping this exception */
    return NULL;
}

static gp_range *
ready(PyObject *op)
{
    gp_range *self = (gp_range *)op;
    if (self->obj == NULL) {
        PyErr_SetString(gp_GpuProfileError, "the RangeProfiler is closed");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(gp_GpuProfileError, "the RangeProfiler is in use by another thread");
        return NULL;
    }
    return self;
}

static PyObject *
range_start(PyObject *op, PyObject *unused)
{
    gp_range *self = ready(op);
    if (self == NULL)
        return NULL;
    if (self->started)
        return PyErr_Format(gp_GpuProfileError, "RangeProfiler.start(): already started");
    CUpti_RangeProfiler_Start_Params p = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = self->obj;
    GP_CUPTI_CHECK(gp_cupti.cuptiRangeProfilerStart(&p));
    self->started = 1;
    Py_RETURN_NONE;
error:
    return NULL;
}

static PyObject *
range_push(PyObject *op, PyObject *name)
{
    gp_range *self = ready(op);
    if (self == NULL)
        return NULL;
    const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (s == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "range name must be a str");
        return NULL;
    }
    if (!self->user_range || !self->started || self->depth > 0)
        return PyErr_Format(gp_GpuProfileError, "RangeProfiler.push(): needs user ranges, a "
                                                "started pass and no open range");
    CUpti_RangeProfiler_PushRange_Params p = {CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = self->obj;
    p.pRangeName = s;
    GP_CUPTI_CHECK(gp_cupti.cuptiRangeProfilerPushRange(&p));
    self->depth++;
    Py_RETURN_NONE;
error:
    return NULL;
}

static PyObject *
range_pop(PyObject *op, PyObject *unused)
{
    gp_range *self = ready(op);
    if (self == NULL)
        return NULL;
    if (self->depth == 0)
        return PyErr_Format(gp_GpuProfileError, "RangeProfiler.pop(): no open range");
    CUpti_RangeProfiler_PopRange_Params p = {CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = self->obj;
    self->depth--; /* popped or not, never pop it again */
    GP_CUPTI_CHECK(gp_cupti.cuptiRangeProfilerPopRange(&p));
    Py_RETURN_NONE;
error:
    return NULL;
}

/* stop() -> True once every pass has been submitted. */
static PyObject *
range_stop(PyObject *op, PyObject *unused)
{
    gp_range *self = ready(op);
    if (self == NULL)
        return NULL;
    if (!self->started || self->depth > 0)
        return PyErr_Format(gp_GpuProfileError, "RangeProfiler.stop(): needs a started pass with "
                                                "no open range");
    CUpti_RangeProfiler_Stop_Params p = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = self->obj;
    CUptiResult res;
    self->started = 0;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    res = gp_cupti.cuptiRangeProfilerStop(&p);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (res != CUPTI_SUCCESS)
        return gp_set_cupti_error(res, "cuptiRangeProfilerStop", __FILE__, __LINE__);
    self->passes++;
    return PyBool_FromLong(p.isAllPassSubmitted);
}

/* decode() -> ranges dropped (counter data image too small). Waits for the GPU. */
static PyObject *
range_decode(PyObject *op, PyObject *unused)
{
    gp_range *self = ready(op);
    if (self == NULL)
        return NULL;
    if (self->started)
        return PyErr_Format(gp_GpuProfileError, "RangeProfiler.decode(): stop() the pass first");
    CUpti_RangeProfiler_DecodeData_Params p = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = self->obj;
    CUptiResult res;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    res = gp_cupti.cuptiRangeProfilerDecodeData(&p);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (res != CUPTI_SUCCESS)
        return gp_set_cupti_error(res, "cuptiRangeProfilerDecodeData", __FILE__, __LINE__);
    return PyLong_FromSize_t(p.numOfRangeDropped);
}

static PyObject *
evaluate_range(gp_range *self, CUpti_Profiler_Host_Object *host, size_t index)
{
    CUpti_RangeProfiler_CounterData_GetRangeInfo_Params info = {
        CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE};
    info.pCounterDataImage = self->image;
    info.counterDataImageSize = self->image_size;
    info.rangeIndex = index;
    info.rangeDelimiter = "/";
    GP_CUPTI_CHECK(gp_cupti.cuptiRangeProfilerCounterDataGetRangeInfo(&info));
    PyObject *values =
        gp_metrics_host_evaluate(host, self->image, self->image_size, index, &self->names);
    if (values == NULL)
        return NULL;
    return Py_BuildValue("(sN)", info.rangeName ? info.rangeName : "", values);
error:
    return NULL;
}

/* evaluate(host) -> [(range name, (value per metric...)), ...] for every decoded range. */
static PyObject *
range_evaluate(PyObject *op, PyObject *host_obj)
{
    gp_range *self = ready(op);
    if (self == NULL)
        return NULL;
    CUpti_Profiler_Host_Object *host =
        gp_metrics_host_object(host_obj, CUPTI_PROFILER_TYPE_RANGE_PROFILER);
    if (host == NULL)
        return NULL;
    CUpti_RangeProfiler_GetCounterDataInfo_Params info = {
        CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
    info.pCounterDataImage = self->image;
    info.counterDataImageSize = self->image_size;
    GP_CUPTI_CHECK(gp_cupti.cuptiRangeProfilerGetCounterDataInfo(&info));
    PyObject *out = PyList_New((Py_ssize_t)info.numTotalRanges);
    for (size_t k = 0; out != NULL && k < info.numTotalRanges; k++) {
        PyObject *item = evaluate_range(self, host, k);
        if (item == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, (Py_ssize_t)k, item);
    }
    return out;
error:
    return NULL;
}

static PyObject *
range_close(PyObject *op, PyObject *unused)
{
    gp_range *self = (gp_range *)op;
    if (self->busy)
        return PyErr_Format(gp_GpuProfileError, "the RangeProfiler is in use by another thread");
    if (teardown(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static void
range_dealloc(PyObject *op)
{
    gp_range *self = (gp_range *)op;
    GP_DEALLOC_TEARDOWN(op, teardown(self));
    gp_metric_names_free(&self->names);
    Py_XDECREF(self->config);
    gp_free_heap_object(op);
}

static PyMethodDef range_methods[] = {
    {"start", range_start, METH_NOARGS, "Start a pass (cuptiRangeProfilerStart)."},
    {"push", range_push, METH_O, "push(name): open a user range."},
    {"pop", range_pop, METH_NOARGS, "Close the user range."},
    {"stop", range_stop, METH_NOARGS, "End the pass; True once all passes are submitted."},
    {"decode", range_decode, METH_NOARGS,
     "Decode counter data (waits for the GPU); dropped ranges."},
    {"evaluate", range_evaluate, METH_O, "evaluate(host) -> [(range name, values), ...]"},
    {"close", range_close, METH_NOARGS, "Pop, stop and disable: leaves no CUPTI state behind."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef range_members[] = {
    {"passes", T_PYSSIZET, offsetof(gp_range, passes), READONLY, "Passes stopped so far."},
    {"counter_data_bytes", T_PYSSIZET, offsetof(gp_range, image_size), READONLY,
     "Size of the counter data image."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot range_slots[] = {
    {Py_tp_new, range_new},
    {Py_tp_dealloc, range_dealloc},
    {Py_tp_methods, range_methods},
    {Py_tp_members, range_members},
    {Py_tp_doc, (void *)"RangeProfiler(config, names, range='user', replay='user', max_ranges=1)"
                        "\n--\n\nOne range-profiler collection on the current device."},
    {0, NULL},
};

static PyType_Spec range_spec = {
    .name = "gpuprofile.RangeProfiler",
    .basicsize = sizeof(gp_range),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = range_slots,
};

int
gp_range_profiler_init(PyObject *module)
{
    RangeType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &range_spec, NULL);
    if (RangeType == NULL)
        return -1;
    return PyModule_AddType(module, RangeType);
}
