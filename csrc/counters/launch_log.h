/* The names of kernels launched while a counter collection runs, in launch order. The range
 * profiler's auto ranges are numbered, not named ("0", "1", ...); this log names them. It uses
 * CUPTI launch callbacks on gpuprofile's one subscriber (cupti_loader.c), enabled only while
 * the log is on and restored to their previous state afterwards. With _launch_log_flush(True) the
 * log also flushes L2 before each launch, outside every kernel's range (cache_control="all"). */
#ifndef GP_LAUNCH_LOG_H
#define GP_LAUNCH_LOG_H

#include <Python.h>

/* The name the log gives the L2 flush it launches before each kernel (cache_control="all"), so
 * Python can drop the flush's own ranges. */
#define GP_L2_FLUSH_KERNEL "gp_l2_flush_kernel"

int gp_launch_log_init(PyObject *module);

#endif
