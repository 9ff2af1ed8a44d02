/* The SM clock of a device, so benchmark results can show throttling: NVML (libnvidia-ml.so.1,
 * loaded lazily with dlopen and optional) when it answers, else a probe kernel that counts SM
 * cycles against the GPU's global timer. */
#ifndef GP_CLOCKS_H
#define GP_CLOCKS_H

#include <Python.h>

int gp_clocks_init(PyObject *module);

#endif
