/* The names of kernels launched while a counter collection runs, in launch order. The range
 * profiler's auto ranges are numbered, not named ("0", "1", ...); this log names them. It uses
 * CUPTI launch callbacks on gpuprofile's one subscriber (cupti_loader.c), enabled only while
 * the log is on and restored to their previous state afterwards. */
#ifndef GP_LAUNCH_LOG_H
#define GP_LAUNCH_LOG_H

#include <Python.h>

int gp_launch_log_init(PyObject *module);

#endif
