/* Raw device memory owned by Python objects (gpuprofile.kernels.DeviceBuffer) and the read workload
 * over a buffer (the L2 flush buffer is core/l2_flush.h). Framework-free, so benchmarks and GPU
 * tests need neither torch nor CuPy. */
#ifndef GP_DEVBUF_H
#define GP_DEVBUF_H

#include <Python.h>

#include "harness/bench_kernels.h"

/* The L2 flush read of `device` (core/l2_flush.h's buffer) as the flush kernel's parameters. 0, or
 * -1 with CudaError. */
int gp_l2_flush_buffer(int device, gp_read_params *out);

int gp_devbuf_init(PyObject *module);

#endif
