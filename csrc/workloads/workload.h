/* _C.Workload: the calibration workloads of kernels/harness/workloads.h with their buffers, for the
 * counter tests, the ceilings and the benchmarks: Workload("copy" | "ffma" | "mma" | "chase").
 * Each knows its exact analytic counts (bytes, FFMAs, mma instructions, FLOPs). */
#ifndef GP_WORKLOAD_H
#define GP_WORKLOAD_H

#include <Python.h>

int gp_workload_init(PyObject *module);

#endif
