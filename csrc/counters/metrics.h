/* Hardware counters, the feature: adds the types and functions of profiler_host.c,
 * profiler_target.c, range_profiler.c, launch_log.c, region_metrics.c, pcsampling.c,
 * cubins.c, pmsampling.c, demangle.c, workload.c and context.c to the module.
 * gpuprofile/counters.py, pcsampling.py, pmsampling.py and roofline.py are their Python side. */
#ifndef GP_METRICS_H
#define GP_METRICS_H

#include <Python.h>

int gp_metrics_init(PyObject *module);

#endif
