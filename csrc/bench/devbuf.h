/* Raw device memory and streams owned by Python objects (gpuprofile.kernels.DeviceBuffer,
 * gpuprofile.Stream), and the read workload over a buffer. Framework-free, so benchmarks and GPU
 * tests need neither torch nor CuPy. */
#ifndef GP_DEVBUF_H
#define GP_DEVBUF_H

#include <Python.h>

/* Grid size that keeps every SM of the current device busy with the read kernel; -1 with
 * CudaError set. */
int gp_read_blocks(int device);

int gp_devbuf_init(PyObject *module);

#endif
