/* The CUPTI range profiler (cupti_range_profiler.h, CUDA 13 API) as the Python type
 * _C.RangeProfiler: enable on the current device's primary context, counter data image, set
 * config, then a pass loop driven from Python (start / push / work / pop / stop until all
 * passes are submitted), decode, and evaluate every range through a MetricsHost.
 *
 * User ranges name what Python pushes; auto ranges are one per kernel ("0", "1", ... in launch
 * order). User range with kernel replay is refused by CUPTI by design, so it is refused here
 * before CUPTI sees it. close() leaves no collection behind (pops, stops), so a failure in pass k
 * leaves the profiler usable; after a collection that completed cleanly the range profiler stays
 * enabled on its context for the next one (enabling it again costs CUPTI about 130 ms), until
 * another counter feature or process exit disables it. */
#ifndef GP_RANGE_PROFILER_H
#define GP_RANGE_PROFILER_H

#include <Python.h>

int gp_range_profiler_init(PyObject *module);

/* Disables the range profiler kept enabled after the last collection, if any: call before
 * another counter feature (PC or PM sampling) takes the GPU's counters. */
int gp_range_profiler_unpark(void);

#endif
