/* `gpuprofile.region(name, metrics=...)`: a region observer (regions.h) that hands regions
 * created with `metrics` to Python hooks in gpuprofile/counters/metrics.py, which open a counter
 * collection at enter and close it at exit. The observer is added when the first region with
 * `metrics` is created (regions.h's metrics hook); before that, regions pay nothing. */
#ifndef GP_REGION_METRICS_H
#define GP_REGION_METRICS_H

#include <Python.h>

int gp_region_metrics_init(PyObject *module);

#endif
