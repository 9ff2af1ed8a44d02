/* Private launchers for the probe kernels (kernels/harness/probe.cu), for tests and benchmarks of
 * tracing: _C._testing.probe_launch, probe_attributes, probe_occupancy, launch_empty. */
#ifndef GP_PROBES_H
#define GP_PROBES_H

#include <Python.h>

int gp_probes_init(PyObject *module);

#endif
