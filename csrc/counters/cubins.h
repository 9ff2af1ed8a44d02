/* Cubins of loaded CUDA modules, captured by a CUPTI module-load callback on gpuprofile's one
 * subscriber, so PC-sampling records (which name a cubin by CRC) can be mapped to source lines
 * with cuptiGetSassToSourceCorrelation. Only modules loaded after capture starts are seen; with
 * CUDA's lazy loading (the default) a module loads when its first kernel launches. */
#ifndef GP_CUBINS_H
#define GP_CUBINS_H

#include <Python.h>
#include <stddef.h>
#include <stdint.h>

/* Starts capturing (idempotent; on until released, cubins.c). -1 with CuptiError. */
int gp_cubins_capture_start(void);

/* The captured cubin with this CRC (valid until process exit): 1 found, 0 not captured. */
int gp_cubins_find(uint64_t crc, const void **cubin, size_t *size);

int gp_cubins_init(PyObject *module);

#endif
