/* Pools of CUDA timing events, one per device. Regions and benchmarks take events from here and
 * give them back once their elapsed time is read, so steady-state timing creates no events. The
 * pool never waits for the GPU itself: when it is empty the caller decides whether to resolve
 * finished work, grow the pool, or wait (see regions.c). */
#ifndef GP_EVENTS_H
#define GP_EVENTS_H

#include <Python.h>
#include <cuda_runtime_api.h>

#define GP_MAX_DEVICES 64

/* Takes `n` events for `device`: 1 if the pool held fewer than n (nothing taken), 0 on success. */
int gp_event_pool_take(int device, int n, cudaEvent_t *out);
/* Returns events to the pool of `device`. Never fails (the pool grows its free list). */
void gp_event_pool_give(int device, int n, const cudaEvent_t *events);
/* Creates `n` more events on `device` (switching device and back); -1 with CudaError set. */
int gp_event_pool_grow(int device, int n);
/* Events ever created for `device` (in use or free). */
size_t gp_event_pool_created(int device);
size_t gp_event_pool_free(int device);

/* Current device of the calling thread (the one torch/CuPy made current); -1 with CudaError. */
int gp_current_device(void);

#endif
