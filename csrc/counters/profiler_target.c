/* Device-side preconditions of the counter APIs, and the chip name / counter availability
 * queries that make host-side (profiler_host.c) configurations match the device. */
#include "profiler_target.h"
#include "core/context.h"
#include "core/cupti_loader.h"
#include "core/errors.h"

#include <stdlib.h>
#include <string.h>

static int initialized;
static const char *holder; /* guarded by the GIL */

static int
counters_claim(const char *who)
{
    if (holder != NULL) {
        PyErr_Format(
            gp_GpuProfileError,
            "cannot start %s: gpuprofile is already collecting counters (%s). Counter "
            "collections cannot nest or overlap: gpuprofile.metrics(), region(metrics=...), "
            "stalls() and sample() each need the GPU's counters alone.",
            who, holder);
        return -1;
    }
    holder = who;
    return 0;
}

int
gp_counter_session_begin(gp_counter_session *s, const char *who, CUpti_Profiler_API api,
                         const char *feature)
{
    if (counters_claim(who) < 0)
        return -1;
    s->claimed = 1;
    if (gp_current_context(&s->ctx, &s->device, &s->dev) < 0 || gp_profiler_initialize() < 0 ||
        gp_profiler_require_support(s->dev, api, feature) < 0)
        return -1;
    return 0;
}

void
gp_counter_session_end(gp_counter_session *s)
{
    if (s->claimed) {
        holder = NULL;
        s->claimed = 0;
    }
}

int
gp_profiler_initialize(void)
{
    if (initialized)
        return 0;
    if (gp_cupti_load() < 0)
        return -1;
    CUpti_Profiler_Initialize_Params p = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    GP_CUPTI_CHECK(gp_cupti.cuptiProfilerInitialize(&p));
    initialized = 1;
    return 0;
error:
    return -1;
}

static const char *
level_name(CUpti_Profiler_Support_Level level)
{
    switch (level) {
    case CUPTI_PROFILER_CONFIGURATION_SUPPORTED:
        return "supported";
    case CUPTI_PROFILER_CONFIGURATION_DISABLED:
        return "disabled by the system";
    case CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED:
        return "unsupported";
    default:
        return "unknown";
    }
}

int
gp_profiler_require_support(CUdevice device, CUpti_Profiler_API api, const char *feature)
{
    CUpti_Profiler_DeviceSupported_Params p = {CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE};
    p.cuDevice = device;
    p.api = api;
    GP_CUPTI_CHECK(gp_cupti.cuptiProfilerDeviceSupported(&p));
    if (p.isSupported == CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
        return 0;
    const struct {
        const char *what;
        CUpti_Profiler_Support_Level level;
    } parts[] = {
        {"GPU architecture (needs compute capability 7.0 or newer)", p.architecture},
        {"virtual GPU (the host must enable profiling for it)", p.vGpu},
        {"confidential computing mode", p.confidentialCompute},
        {"SLI", p.sli},
        {"crypto-mining processor", p.cmp},
        {"WSL", p.wsl},
    };
    char why[1024] = "";
    for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++)
        if (parts[k].level != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
            size_t used = strlen(why);
            snprintf(why + used, sizeof why - used, "%s%s: %s", used ? "; " : "", parts[k].what,
                     level_name(parts[k].level));
        }
    PyErr_Format(gp_CuptiError, "%s is not supported on this device: %s", feature,
                 why[0] ? why : level_name(p.isSupported));
    return -1;
error:
    return -1;
}

/* _chip_name() -> str: CUPTI's chip name of the current device ("GH100" on H100/H200). */
static PyObject *
chip_name(PyObject *module, PyObject *unused)
{
    CUcontext ctx;
    CUdevice dev;
    int device;
    if (gp_current_context(&ctx, &device, &dev) < 0 || gp_profiler_initialize() < 0)
        return NULL;
    CUpti_Device_GetChipName_Params p = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    p.deviceIndex = (size_t)device;
    GP_CUPTI_CHECK(gp_cupti.cuptiDeviceGetChipName(&p));
    return PyUnicode_FromString(p.pChipName);
error:
    return NULL;
}

static PyObject *
range_availability(CUcontext ctx)
{
    CUpti_Profiler_GetCounterAvailability_Params p = {
        CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
    p.ctx = ctx;
    GP_CUPTI_CHECK(gp_cupti.cuptiProfilerGetCounterAvailability(&p));
    PyObject *image = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)p.counterAvailabilityImageSize);
    if (image == NULL)
        return NULL;
    p.pCounterAvailabilityImage = (uint8_t *)PyBytes_AS_STRING(image);
    CUptiResult res = gp_cupti.cuptiProfilerGetCounterAvailability(&p);
    if (res != CUPTI_SUCCESS) {
        Py_DECREF(image);
        return gp_set_cupti_error(res, "cuptiProfilerGetCounterAvailability", __FILE__, __LINE__);
    }
    return image;
error:
    return NULL;
}

static PyObject *
pm_availability(int device)
{
    CUpti_PmSampling_GetCounterAvailability_Params p = {
        CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE};
    p.deviceIndex = (size_t)device;
    GP_CUPTI_CHECK(gp_cupti.cuptiPmSamplingGetCounterAvailability(&p));
    PyObject *image = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)p.counterAvailabilityImageSize);
    if (image == NULL)
        return NULL;
    p.pCounterAvailabilityImage = (uint8_t *)PyBytes_AS_STRING(image);
    CUptiResult res = gp_cupti.cuptiPmSamplingGetCounterAvailability(&p);
    if (res != CUPTI_SUCCESS) {
        Py_DECREF(image);
        return gp_set_cupti_error(res, "cuptiPmSamplingGetCounterAvailability", __FILE__, __LINE__);
    }
    return image;
error:
    return NULL;
}

/* _counter_availability(kind) -> bytes: which counters the current device can collect now, for
 * MetricsHost(chip, kind, counter_availability=...). kind is "range" or "pm". */
static PyObject *
counter_availability(PyObject *module, PyObject *arg)
{
    const char *kind = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (kind == NULL || (strcmp(kind, "range") != 0 && strcmp(kind, "pm") != 0)) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "kind must be 'range' or 'pm'");
        return NULL;
    }
    CUcontext ctx;
    CUdevice dev;
    int device;
    if (gp_current_context(&ctx, &device, &dev) < 0 || gp_profiler_initialize() < 0)
        return NULL;
    if (kind[0] == 'r') {
        if (gp_profiler_require_support(dev, CUPTI_PROFILER_RANGE_PROFILING, "range profiling") < 0)
            return NULL;
        return range_availability(ctx);
    }
    if (gp_profiler_require_support(dev, CUPTI_PROFILER_PM_SAMPLING, "PM sampling") < 0)
        return NULL;
    return pm_availability(device);
}

/* _counters_holder() -> str or None: which counter collection runs now (the claim above). */
static PyObject *
counters_holder(PyObject *module, PyObject *unused)
{
    if (holder == NULL)
        Py_RETURN_NONE;
    return PyUnicode_FromString(holder);
}

static PyMethodDef target_methods[] = {
    {"_counters_holder", counters_holder, METH_NOARGS,
     "The counter collection running now, or None."},
    {"_chip_name", chip_name, METH_NOARGS, "CUPTI's chip name of the current device."},
    {"_counter_availability", counter_availability, METH_O,
     "Counter availability image of the current device for 'range' or 'pm'."},
    {NULL, NULL, 0, NULL},
};

int
gp_profiler_target_init(PyObject *module)
{
    return PyModule_AddFunctions(module, target_methods);
}
