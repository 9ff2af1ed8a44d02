/* Waiting for every device this process uses to finish its work, without the GIL and without
 * becoming deaf to Ctrl-C: the wait runs on a helper thread while the caller polls for signals.
 * Used before flushing CUPTI's buffers, so that the records of kernels still running arrive. */
#ifndef GP_GPU_WAIT_H
#define GP_GPU_WAIT_H

#include <Python.h>

/* Synchronizes each device whose primary context is active. 0 when all finished; -1 with
 * CudaError (naming the device) or with the signal handler's exception (KeyboardInterrupt), in
 * which case the helper thread is abandoned and finishes on its own. */
int gp_wait_devices(void);

#endif
