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

int gp_regions_init(PyObject *module);

/* Index of the innermost open region record on the calling thread, or -1. Used to attribute
 * kernels and allocations to regions. */
int64_t gp_region_innermost(void);

/* The `metrics` argument (borrowed; NULL for None) of the innermost region frame on this thread:
 * during an observer's enter, the region being entered. For region_metrics.c. */
PyObject *gp_region_innermost_metrics(void);

/* Whether record `index` is of a region(memory=True); 0 if out of range. */
int gp_region_record_memory(int64_t index);

/* Name of record `index` (borrowed), or NULL if out of range. */
PyObject *gp_region_record_name(int64_t index);

/* An observer of region enter/exit, for features that attribute work to regions (CUPTI
 * external correlation, memory peaks). Called with the GIL held, after the start event is
 * recorded and before the stop event; must be cheap. enter returning -1 (exception set) aborts
 * the enter. Up to 4 observers; they are called in the order they were added. */
typedef struct {
    int (*enter)(int64_t record, void *userdata);
    void (*exit)(int64_t record, void *userdata);
    void *userdata;
} gp_region_observer;

int gp_regions_add_observer(const gp_region_observer *observer); /* -1 when full */
void gp_regions_remove_observer(const gp_region_observer *observer);

/* Called whenever a region is created with `metrics` (-1 with an exception fails the creation):
 * the counters feature installs it (counters/region_metrics.c) and adds its observer on the
 * first call, so regions without metrics never pay for it. */
void gp_regions_set_metrics_hook(int (*hook)(void));

#endif
