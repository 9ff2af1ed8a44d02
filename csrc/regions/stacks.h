/* Per-thread region stacks and the hot path: entering a region takes events, appends a record
 * and records the start event; exiting records the stop event and queues the record for lazy
 * resolution (store.h). Nothing here waits for the GPU. */
#ifndef GP_REGIONS_STACKS_H
#define GP_REGIONS_STACKS_H

#include <Python.h>
#include <cuda_runtime_api.h>
#include <stdint.h>

typedef struct {
    PyObject_HEAD
    PyObject *name;
    PyObject *stream_obj; /* kept alive while the region object is */
    const char *name_utf8;
    cudaStream_t stream;
    int device; /* the stream's device; -1: the current device at enter */
    int nvtx;
    PyObject *metrics; /* region(..., metrics=...), NULL for None: see region_metrics.c */
    int memory;        /* region(memory=True): track device memory while open (attribution.c) */
    PyObject *weakreflist;
} gp_region;

/* Enter / exit `region` on the calling thread. 0, or -1 with an exception (the enter is undone;
 * an exit still pops its frame). `raised`: the body raised. */
int gp_region_enter(gp_region *region);
int gp_region_exit(gp_region *region, int raised);

/* Index of the innermost open region record on the calling thread, or -1. Used to attribute
 * kernels and allocations to regions. */
int64_t gp_region_innermost(void);

/* The `metrics` argument (borrowed; NULL for None) of the innermost region frame on this thread:
 * during an observer's enter, the region being entered. For region_metrics.c. */
PyObject *gp_region_innermost_metrics(void);

/* Creates the thread-state key (once). 0 or -1 with OSError. */
int gp_region_stacks_init(void);

#endif
