/* Timed code regions: `with gpuprofile.region(name):`, the decorator form, and their records.
 *
 * Enter takes an event pair from the pool (events.c), records the start event on the region's
 * stream and pushes an NVTX range; exit records the stop event and pops it. Nothing on exit waits
 * for the GPU: a record keeps its events until its elapsed time is read ("resolved"), which
 * happens when results are read or when the pool needs events back. Without a device, regions
 * time with the host clock and their records say so. */
#ifndef GP_REGIONS_H
#define GP_REGIONS_H

#include <Python.h>
#include <stdint.h>

/* The feature's interface for other features: the store's observers and records (store.h) and
 * the calling thread's innermost region (stacks.h). */
#include "stacks.h"
#include "store.h"

int gp_regions_init(PyObject *module);

/* Called whenever a region is created with `metrics` (-1 with an exception fails the creation):
 * the counters feature installs it (counters/region_metrics.c) and adds its observer on the
 * first call, so regions without metrics never pay for it. */
void gp_regions_set_metrics_hook(int (*hook)(void));

#endif
