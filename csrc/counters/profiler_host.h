/* The CUPTI profiler host API (cupti_profiler_host.h) as the Python type _C.MetricsHost: metric
 * enumeration, properties and validation, config images and pass counts, and evaluation of
 * counter data into metric values. Works offline for a chip name ("GH100"), without a GPU or
 * driver. CUPTI accumulates metrics in a host object, so each configuration uses a fresh one. */
#ifndef GP_PROFILER_HOST_H
#define GP_PROFILER_HOST_H

#include <Python.h>
#include <cupti_profiler_host.h>
#include <stddef.h>
#include <stdint.h>

/* Metric names borrowed from a Python sequence of str (kept alive here) as a C array. */
typedef struct {
    PyObject *seq;
    const char **names;
    size_t n;
} gp_metric_names;

/* 0 on success; -1 with TypeError/ValueError (not a sequence of str, or empty). */
int gp_metric_names_from(PyObject *obj, gp_metric_names *out);
void gp_metric_names_free(gp_metric_names *names);

/* The CUPTI host object of a MetricsHost; NULL with TypeError/ValueError if `obj` is not an
 * open MetricsHost. `kind` is CUPTI_PROFILER_TYPE_RANGE_PROFILER or _PM_SAMPLING. */
CUpti_Profiler_Host_Object *gp_metrics_host_object(PyObject *obj, CUpti_ProfilerType kind);

/* Evaluates range/sample `index` of a decoded counter data image into values[names->n].
 * Does not touch Python (callable without the GIL): returns the CUPTI result. */
CUptiResult gp_metrics_host_evaluate_into(CUpti_Profiler_Host_Object *host, const uint8_t *image,
                                          size_t size, size_t index, const gp_metric_names *names,
                                          double *values);

/* Evaluates range/sample `index` of a decoded counter data image into a new tuple of floats. */
PyObject *gp_metrics_host_evaluate(CUpti_Profiler_Host_Object *host, const uint8_t *image,
                                   size_t size, size_t index, const gp_metric_names *names);

int gp_profiler_host_init(PyObject *module);

#endif
