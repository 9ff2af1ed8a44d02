/* `gpuprofile.region(name, metrics=...)`: a region observer (regions.h) that hands regions
 * created with `metrics` to Python hooks in gpuprofile/counters.py, which open a counter
 * collection at enter and close it at exit. Regions without `metrics` cost one pointer check. */
#ifndef GP_REGION_METRICS_H
#define GP_REGION_METRICS_H

#include <Python.h>

/* Registers the observer (once); called when a region is created with metrics. -1 on error. */
int gp_region_metrics_enable(void);

int gp_region_metrics_init(PyObject *module);

#endif
