/* Raw device memory owned by Python objects (gpuprofile.kernels.DeviceBuffer), the read workload
 * over a buffer and the L2 flush buffer. Framework-free, so benchmarks and GPU tests need neither
 * torch nor CuPy. */
#ifndef GP_DEVBUF_H
#define GP_DEVBUF_H

#include <Python.h>

#include "harness/bench_kernels.h"

/* Grid size that keeps every SM of the current device busy with the read kernel; -1 with
 * CudaError set. */
int gp_read_blocks(int device);

/* The L2 flush read of `device`: a buffer of twice its L2 (allocated on first use, kept for the
 * process) and the grid to read it. 0, or -1 with CudaError. */
int gp_l2_flush_buffer(int device, gp_read_params *out);

int gp_devbuf_init(PyObject *module);

#endif
