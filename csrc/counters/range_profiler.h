/* The CUPTI range profiler (cupti_range_profiler.h, CUDA 13 API) as the Python type
 * _C.RangeProfiler: enable on the current device's primary context, counter data image, set
 * config, then a pass loop driven from Python (start / push / work / pop / stop until all
 * passes are submitted), decode, and evaluate every range through a MetricsHost.
 *
 * User ranges name what Python pushes; auto ranges are one per kernel ("0", "1", ... in launch
 * order). User range with kernel replay is refused by CUPTI by design, so it is refused here
 * before CUPTI sees it. close() always leaves no CUPTI state behind (pops, stops, disables), so
 * a failure in pass k leaves the profiler usable. */
#ifndef GP_RANGE_PROFILER_H
#define GP_RANGE_PROFILER_H

#include <Python.h>

int gp_range_profiler_init(PyObject *module);

#endif
