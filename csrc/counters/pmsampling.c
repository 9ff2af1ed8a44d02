/* _C.PmSampler.
 *
 * Python equivalent of one collection (gpuprofile/counters/sample.py drives it):
 *
 *     s = PmSampler(config, names, host, interval_ns=20000, max_samples=2000)
 *     try:
 *         s.start(); fn(); s.stop()       # stop() waits for the GPU, decodes and evaluates
 *         times, values, info = s.samples()  # bytes: uint64 (start, end) pairs; float64 rows
 *     finally:
 *         s.close()
 */
#include "pmsampling.h"
#include "core/context.h"
#include "core/gpu_wait.h"
#include "core/cupti_loader.h"
#include "core/errors.h"
#include "profiler_host.h"
#include "profiler_target.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    CUpti_PmSampling_Object *obj;
    PyObject *host_obj;               /* the MetricsHost (pm) that evaluates samples */
    CUpti_Profiler_Host_Object *host; /* its CUPTI object, looked up before each decode */
    PyObject *config;                 /* bytes, kept alive for CUPTI */
    gp_metric_names names;
    uint8_t *image;
    size_t image_size;
    int started;
    gp_counter_session session;
    uint64_t start_ts;
    /* decoded samples */
    uint64_t *times; /* 2 per sample */
    double *values;  /* names.n per sample */
    size_t n, cap;
    size_t dropped_before_start;
    int overflow;
} gp_pms;

static PyTypeObject *PMSType;

static int
image_init(gp_pms *self)
{
    CUpti_PmSampling_CounterDataImage_Initialize_Params p = {
        CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    p.pPmSamplingObject = self->obj;
    p.counterDataSize = self->image_size;
    p.pCounterData = self->image;
    return gp_cupti.cuptiPmSamplingCounterDataImageInitialize(&p) == CUPTI_SUCCESS ? 0 : -1;
}

static int
setup(gp_pms *self, int device, uint64_t interval_ns, size_t max_samples, size_t hw_buffer)
{
    CUpti_PmSampling_Enable_Params en = {CUpti_PmSampling_Enable_Params_STRUCT_SIZE};
    en.deviceIndex = (size_t)device;
    GP_CUPTI_CHECK(gp_cupti.cuptiPmSamplingEnable(&en));
    self->obj = en.pPmSamplingObject;
    CUpti_PmSampling_SetConfig_Params cfg = {CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE};
    cfg.pPmSamplingObject = self->obj;
    cfg.configSize = (size_t)PyBytes_GET_SIZE(self->config);
    cfg.pConfig = (const uint8_t *)PyBytes_AS_STRING(self->config);
    cfg.hardwareBufferSize = hw_buffer;
    cfg.samplingInterval = interval_ns;
    cfg.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
    cfg.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
    GP_CUPTI_CHECK(gp_cupti.cuptiPmSamplingSetConfig(&cfg));
    CUpti_PmSampling_GetCounterDataSize_Params size = {
        CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE};
    size.pPmSamplingObject = self->obj;
    size.pMetricNames = self->names.names;
    size.numMetrics = self->names.n;
    size.maxSamples = (uint32_t)max_samples;
    GP_CUPTI_CHECK(gp_cupti.cuptiPmSamplingGetCounterDataSize(&size));
    self->image = calloc(1, size.counterDataSize);
    if (self->image == NULL) {
        PyErr_Format(PyExc_MemoryError, "PM sampling counter data image of %zu bytes",
                     size.counterDataSize);
        return -1;
    }
    self->image_size = size.counterDataSize;
    if (image_init(self) < 0) {
        PyErr_SetString(gp_CuptiError, "cuptiPmSamplingCounterDataImageInitialize failed");
        return -1;
    }
    return 0;
error:
    return -1;
}

static int
teardown(gp_pms *self)
{
    int rc = 0;
    CUptiResult res;
    if (self->obj != NULL && self->started) {
        CUpti_PmSampling_Stop_Params p = {CUpti_PmSampling_Stop_Params_STRUCT_SIZE};
        p.pPmSamplingObject = self->obj;
        self->started = 0;
        if ((res = gp_cupti.cuptiPmSamplingStop(&p)) != CUPTI_SUCCESS && rc++ == 0)
            gp_set_cupti_error(res, "cuptiPmSamplingStop (cleanup)", __FILE__, __LINE__);
    }
    if (self->obj != NULL) {
        CUpti_PmSampling_Disable_Params p = {CUpti_PmSampling_Disable_Params_STRUCT_SIZE};
        p.pPmSamplingObject = self->obj;
        self->obj = NULL;
        if ((res = gp_cupti.cuptiPmSamplingDisable(&p)) != CUPTI_SUCCESS && rc++ == 0)
            gp_set_cupti_error(res, "cuptiPmSamplingDisable", __FILE__, __LINE__);
    }
    free(self->image);
    self->image = NULL;
    gp_counter_session_end(&self->session);
    return rc ? -1 : 0;
}

static PyObject *
pms_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"config",      "names",           "host", "interval_ns",
                             "max_samples", "hw_buffer_bytes", NULL};
    PyObject *config, *names, *host;
    unsigned long long interval = 20000;
    Py_ssize_t max_samples = 2000, hw_buffer = (Py_ssize_t)512 << 20;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "SOO|Knn:PmSampler", kwlist, &config, &names,
                                     &host, &interval, &max_samples, &hw_buffer))
        return NULL;
    if (interval < 1000)
        return PyErr_Format(PyExc_ValueError, "interval_ns must be at least 1000, got %llu",
                            interval);
    if (max_samples < 1 || max_samples > 1000000 || hw_buffer < (1 << 20))
        return PyErr_Format(PyExc_ValueError, "max_samples must be in [1, 1000000] and "
                                              "hw_buffer_bytes at least 1 MiB");
    if (gp_metrics_host_object(host, CUPTI_PROFILER_TYPE_PM_SAMPLING) == NULL)
        return NULL;
    gp_pms *self = PyObject_New(gp_pms, type);
    if (self == NULL)
        return NULL;
    memset((char *)self + sizeof(PyObject), 0, sizeof *self - sizeof(PyObject));
    self->config = Py_NewRef(config);
    self->host_obj = Py_NewRef(host);
    if (gp_metric_names_from(names, &self->names) < 0 ||
        gp_counter_session_begin(&self->session, "PM sampling", CUPTI_PROFILER_PM_SAMPLING,
                                 "PM sampling") < 0 ||
        setup(self, self->session.device, interval, (size_t)max_samples, (size_t)hw_buffer) < 0)
        goto error;
    return (PyObject *)self;
error:
    Py_DECREF(self);
    return NULL;
}

static PyObject *
pms_start(PyObject *op, PyObject *unused)
{
    gp_pms *self = (gp_pms *)op;
    if (self->obj == NULL || self->started)
        return PyErr_Format(gp_GpuProfileError, "PmSampler.start(): closed or already started");
    GP_CUPTI_CHECK(gp_cupti.cuptiGetTimestamp(&self->start_ts));
    CUpti_PmSampling_Start_Params p = {CUpti_PmSampling_Start_Params_STRUCT_SIZE};
    p.pPmSamplingObject = self->obj;
    GP_CUPTI_CHECK(gp_cupti.cuptiPmSamplingStart(&p));
    self->started = 1;
    Py_RETURN_NONE;
error:
    return NULL;
}

static int
grow(gp_pms *self, size_t need)
{
    if (self->n + need <= self->cap)
        return 0;
    size_t cap = self->cap ? self->cap : 1024;
    while (cap < self->n + need)
        cap *= 2;
    uint64_t *t = realloc(self->times, 2 * cap * sizeof *t);
    if (t != NULL)
        self->times = t;
    double *v = realloc(self->values, cap * self->names.n * sizeof *v);
    if (v != NULL)
        self->values = v;
    if (t == NULL || v == NULL)
        return -1;
    self->cap = cap;
    return 0;
}

/* The failing call of a decode round run without the GIL. */
typedef struct {
    CUptiResult res;
    const char *call;
    int nomem;
} decode_status;

/* Appends the completed samples of the image; without the GIL. */
static int
collect(gp_pms *self, decode_status *st)
{
    CUpti_PmSampling_GetCounterDataInfo_Params info = {
        CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE};
    info.pCounterDataImage = self->image;
    info.counterDataImageSize = self->image_size;
    if ((st->res = gp_cupti.cuptiPmSamplingGetCounterDataInfo(&info)) != CUPTI_SUCCESS) {
        st->call = "cuptiPmSamplingGetCounterDataInfo";
        return -1;
    }
    if (grow(self, info.numCompletedSamples) < 0) {
        st->nomem = 1;
        return -1;
    }
    for (size_t k = 0; k < info.numCompletedSamples; k++) {
        CUpti_PmSampling_CounterData_GetSampleInfo_Params s = {
            CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE};
        s.pPmSamplingObject = self->obj;
        s.pCounterDataImage = self->image;
        s.counterDataImageSize = self->image_size;
        s.sampleIndex = k;
        if ((st->res = gp_cupti.cuptiPmSamplingCounterDataGetSampleInfo(&s)) != CUPTI_SUCCESS) {
            st->call = "cuptiPmSamplingCounterDataGetSampleInfo";
            return -1;
        }
        if (s.startTimestamp < self->start_ts) {
            self->dropped_before_start++;
            continue;
        }
        double *row = self->values + self->n * self->names.n;
        st->res = gp_metrics_host_evaluate_into(self->host, self->image, self->image_size, k,
                                                &self->names, row);
        if (st->res != CUPTI_SUCCESS) {
            st->call = "cuptiProfilerHostEvaluateToGpuValues";
            return -1;
        }
        self->times[2 * self->n] = s.startTimestamp;
        self->times[2 * self->n + 1] = s.endTimestamp;
        self->n++;
    }
    return 0;
}

/* Decodes until the end of the records, evaluating and reinitializing a full image; without
 * the GIL. */
static int
decode_all(gp_pms *self, decode_status *st)
{
    for (;;) {
        CUpti_PmSampling_DecodeData_Params p = {CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE};
        p.pPmSamplingObject = self->obj;
        p.pCounterDataImage = self->image;
        p.counterDataImageSize = self->image_size;
        if ((st->res = gp_cupti.cuptiPmSamplingDecodeData(&p)) != CUPTI_SUCCESS) {
            st->call = "cuptiPmSamplingDecodeData";
            return -1;
        }
        self->overflow |= p.overflow;
        if (collect(self, st) < 0)
            return -1;
        if (p.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL)
            return 0;
        if (image_init(self) < 0) {
            st->res = CUPTI_ERROR_UNKNOWN;
            st->call = "cuptiPmSamplingCounterDataImageInitialize";
            return -1;
        }
    }
}

/* stop(): wait for the GPU, stop sampling, decode and evaluate every sample. */
static PyObject *
pms_stop(PyObject *op, PyObject *unused)
{
    gp_pms *self = (gp_pms *)op;
    if (!self->started)
        return PyErr_Format(gp_GpuProfileError, "PmSampler.stop(): not started");
    if (gp_wait_device("cudaDeviceSynchronize (before cuptiPmSamplingStop)") < 0)
        return NULL;
    CUpti_PmSampling_Stop_Params p = {CUpti_PmSampling_Stop_Params_STRUCT_SIZE};
    p.pPmSamplingObject = self->obj;
    self->started = 0;
    GP_CUPTI_CHECK(gp_cupti.cuptiPmSamplingStop(&p));
    self->host = gp_metrics_host_object(self->host_obj, CUPTI_PROFILER_TYPE_PM_SAMPLING);
    if (self->host == NULL)
        return NULL;
    decode_status st = {CUPTI_SUCCESS, NULL, 0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = decode_all(self, &st);
    Py_END_ALLOW_THREADS
    if (rc == 0)
        Py_RETURN_NONE;
    if (st.nomem)
        return PyErr_NoMemory();
    if (st.res == CUPTI_ERROR_OUT_OF_MEMORY && strcmp(st.call, "cuptiPmSamplingDecodeData") == 0)
        return PyErr_Format(gp_CuptiError,
                            "PM sampling: the hardware buffer overflowed (samples "
                            "came faster than it holds); use a longer interval_us, a shorter fn, "
                            "or a larger hw_buffer_mb");
    return gp_set_cupti_error(st.res, st.call, __FILE__, __LINE__);
error:
    return NULL;
}

/* samples() -> (times: bytes of uint64 (start, end) pairs, values: bytes of float64 rows,
 *               info: dict with dropped_before_start, overflow, start_timestamp). */
static PyObject *
pms_samples(PyObject *op, PyObject *unused)
{
    gp_pms *self = (gp_pms *)op;
    return Py_BuildValue(
        "(y#y#{s:n,s:O,s:K})", (const char *)self->times,
        (Py_ssize_t)(2 * self->n * sizeof *self->times), (const char *)self->values,
        (Py_ssize_t)(self->n * self->names.n * sizeof *self->values), "dropped_before_start",
        (Py_ssize_t)self->dropped_before_start, "overflow", self->overflow ? Py_True : Py_False,
        "start_timestamp", (unsigned long long)self->start_ts);
}

static PyObject *
pms_close(PyObject *op, PyObject *unused)
{
    if (teardown((gp_pms *)op) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static void
pms_dealloc(PyObject *op)
{
    gp_pms *self = (gp_pms *)op;
    GP_DEALLOC_TEARDOWN(op, teardown(self));
    gp_metric_names_free(&self->names);
    free(self->times);
    free(self->values);
    Py_XDECREF(self->config);
    Py_XDECREF(self->host_obj);
    gp_free_heap_object(op);
}

static PyMethodDef pms_methods[] = {
    {"start", pms_start, METH_NOARGS, "Start sampling (cuptiPmSamplingStart)."},
    {"stop", pms_stop, METH_NOARGS, "Wait for the GPU, stop, decode and evaluate the samples."},
    {"samples", pms_samples, METH_NOARGS, "(times bytes, values bytes, info dict)"},
    {"close", pms_close, METH_NOARGS, "Disable PM sampling and free the image."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot pms_slots[] = {
    {Py_tp_new, pms_new},
    {Py_tp_dealloc, pms_dealloc},
    {Py_tp_methods, pms_methods},
    {Py_tp_doc, (void *)"PmSampler(config, names, host, interval_ns=20000, max_samples=2000, "
                        "hw_buffer_bytes=512 MiB)\n--\n\nPM sampling on the current device."},
    {0, NULL},
};

static PyType_Spec pms_spec = {
    .name = "gpuprofile.PmSampler",
    .basicsize = sizeof(gp_pms),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = pms_slots,
};

int
gp_pmsampling_init(PyObject *module)
{
    PMSType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &pms_spec, NULL);
    if (PMSType == NULL)
        return -1;
    return PyModule_AddType(module, PMSType);
}
