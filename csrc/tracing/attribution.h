/* Attributing GPU work to gpuprofile regions, through one region observer:
 * - while kernels are traced with regions, every region enter pushes a CUPTI external
 *   correlation id (the region's record index + 1) on its thread and exit pops it, so that CUPTI
 *   writes EXTERNAL_CORRELATION records tying each launch to the innermost region open at launch;
 * - a region(name, memory=True) keeps device-memory tracking (MEMORY2) enabled while it is open,
 *   so that its peak can be computed from the allocation timeline. */
#ifndef GP_ATTRIBUTION_H
#define GP_ATTRIBUTION_H

#include <Python.h>
#include <cupti.h>

/* Starts/stops pushing ids at region enter. Starting also pushes the calling thread's innermost
 * open region, so work inside an already-open region is attributed; stopping pops every id this
 * thread pushed. GIL held; -1 with CuptiError when the push fails. */
int gp_attribution_set_tracing(int on);

int gp_attribution_init(PyObject *module);

#endif
