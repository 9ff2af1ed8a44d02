/* Device memory: free/total bytes (gpuprofile.memory.info()) and raw cudaMalloc/cudaFree
 * helpers that let tests allocate without torch or CuPy. The allocation timeline itself comes
 * from CUPTI (activity.c). */
#ifndef GP_MEMORY_H
#define GP_MEMORY_H

#include <Python.h>

int gp_device_memory_init(PyObject *module);

#endif
