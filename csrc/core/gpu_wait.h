/* The one way gpuprofile waits for the GPU from Python: without the GIL and without becoming
 * deaf to Ctrl-C. The wait runs on a helper thread while the caller polls for signals every
 * 50 ms; on a signal the caller returns with the handler's exception (KeyboardInterrupt) and the
 * helper, abandoned, finishes on its own (it holds copies of what it waits on, never the
 * caller's memory). Timed loops that wait between events of their own (the benchmark's batches,
 * the region store's lazy resolution) wait in place: they are short by construction. */
#ifndef GP_GPU_WAIT_H
#define GP_GPU_WAIT_H

#include <Python.h>
#include <cuda_runtime_api.h>

/* Synchronizes each device whose primary context is active (synchronizing another would create
 * a context). 0 when all finished; -1 with CudaError naming the device, or the signal's
 * exception. Used before flushing CUPTI's buffers, so that the records of running kernels
 * arrive. */
int gp_wait_devices(void);

/* Synchronizes the calling thread's current device; -1 with CudaError naming `what`, or the
 * signal's exception. */
int gp_wait_device(const char *what);

/* Waits for the work enqueued on `stream` so far (an event recorded on it now, so the stream may
 * be destroyed while the helper waits); -1 with CudaError naming `what`, or the signal's
 * exception. */
int gp_wait_stream(cudaStream_t stream, const char *what);

#endif
