/* The region record store: records in order of entry, the per-device queues of pending
 * records, lazy resolution of their elapsed times, and the observers told of every enter and
 * exit. Other features reach it through regions.h.
 *
 * Concurrency: every entry point holds the GIL, which serializes the store. Code that waits for
 * the GPU releases the GIL and therefore keeps no pointer into the store across the wait (the
 * store may grow or be reset meanwhile); `generation` tells it whether a reset happened. */
#ifndef GP_REGIONS_STORE_H
#define GP_REGIONS_STORE_H

#include <Python.h>
#include <cuda_runtime_api.h>
#include <stdint.h>

enum { REC_OPEN, REC_PENDING, REC_DONE, REC_HOST };
/* REC_CUPTI: entered while a profile traced with the CUPTI region clock (no events; its GPU
 * time is filled in when the profile stops: REC_FILLED, with REC_NO_WORK when no traced work was
 * attributed to it, REC_FAILED when the stop cut it). */
enum {
    REC_RAISED = 1,
    REC_FAILED = 2,
    REC_MEMORY = 4,
    REC_CUPTI = 8,
    REC_FILLED = 16,
    REC_NO_WORK = 32
};

typedef struct {
    PyObject *name; /* strong reference */
    int64_t host_start_ns, host_end_ns;
    double gpu_ms; /* NaN until resolved */
    int64_t parent;
    uint64_t thread;
    cudaEvent_t ev[2];   /* unused by REC_CUPTI records */
    cudaStream_t stream; /* where the events are recorded (valid while the region is open) */
    int32_t depth;
    int16_t device; /* -1: host clock */
    uint8_t state;
    uint8_t flags;
} gp_record;

typedef struct {
    gp_record *recs;
    size_t n, cap;
    size_t open;         /* records in REC_OPEN */
    uint64_t generation; /* bumped by reset() */
} gp_record_store;

extern gp_record_store gp_store;
extern int gp_regions_enabled; /* enable() / disable() */
extern int gp_regions_n_observers;
/* Set by a running gpuprofile.profile() that attributes work to regions (cupti_clock.c):
 * regions entered meanwhile record no events (REC_CUPTI), except regions with metrics, which
 * keep them. */
extern int gp_regions_cupti_clock;

/* A new record at the end of the store (uninitialized); -1 with MemoryError. */
int64_t gp_store_append(void);
/* Queue record `rec` (its stop event recorded) for resolution on `device`. 0 or -1. */
int gp_store_pending_push(int device, int64_t rec);
/* Two events for a region on `device`, reclaiming or resolving pending records if the pool is
 * empty (see events.h). 0 or -1 with an exception. */
int gp_store_acquire_events(int device, cudaEvent_t ev[2]);

/* Tell the observers about record `i`: enter in order (on failure, the ones already told are
 * exited), exit in reverse order. */
int gp_store_notify_enter(int64_t i);
void gp_store_notify_exit(int64_t i);

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

/* Whether record `index` is of a region(memory=True); 0 if out of range. */
int gp_region_record_memory(int64_t index);

/* The device and stream of record `index`'s events: 0, or -1 for a host-clock or unknown record.
 * The stream handle is meaningful only while the region is open. */
int gp_region_record_stream(int64_t index, int *device, cudaStream_t *stream);

/* Closes open record `rec` as failed (no GPU time, not open, its events back in the pool): a
 * region whose thread ended inside it. GIL held. */
void gp_store_close_failed(int64_t rec);

/* Installed by stacks.c: closes the regions of threads that ended inside them (with
 * gp_store_close_failed); records() and reset() call it first. */
void gp_store_set_dead_threads_hook(void (*hook)(void));

/* Whether record `index` takes its GPU time from the trace (REC_CUPTI); 0 if out of range. */
int gp_region_record_cupti(int64_t index);

/* Name of record `index` (borrowed), or NULL if out of range. */
PyObject *gp_region_record_name(int64_t index);

/* _records, reset, enable, disable, is_enabled, _pool_stats. */
int gp_region_store_init(PyObject *module);

#endif
