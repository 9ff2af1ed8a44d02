/* Python entry points that launch the bundled kernels (gpuprofile.kernels). */
#ifndef GP_LAUNCH_H
#define GP_LAUNCH_H

#include <Python.h>

int gp_launch_init(PyObject *module);

#endif
