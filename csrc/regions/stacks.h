/* Region stacks and the hot path: entering a region takes events, appends a record and records
 * the start event; exiting records the stop event and queues the record for lazy resolution
 * (store.h). Nothing here waits for the GPU.
 *
 * Each Python context (contextvars: every asyncio task, trio task, greenlet, or thread) has its
 * own stack of open regions, so tasks that interleave on one thread nest their regions correctly
 * and may close them in any order. Each thread also keeps the list of regions it opened: an exit
 * closes the innermost open region of that name in the current context, else the newest one the
 * thread opened elsewhere (a region entered in one callback and exited in another), and a
 * thread that ends leaves its open regions to be closed as failed (see store.h). */
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
    Py_ssize_t entered_disabled; /* enters while regions were disabled, not exited yet */
    PyObject *weakreflist;
} gp_region;

/* Enter / exit `region` in the calling context. 0, or -1 with an exception (the enter is
 * undone; an exit still closes its record). `raised`: the body raised. */
int gp_region_enter(gp_region *region);
int gp_region_exit(gp_region *region, int raised);

/* Index of the innermost open region record in the calling context, or -1. Used to attribute
 * kernels and allocations to regions. GIL held. */
int64_t gp_region_innermost(void);

/* The `metrics` argument (borrowed; NULL for None) of the innermost open region in the calling
 * context: during an observer's enter, the region being entered. For region_metrics.c. */
PyObject *gp_region_innermost_metrics(void);

/* The frame type, the context variable and the thread-state key (once). 0 or -1. */
int gp_region_stacks_init(PyObject *module);

#endif
