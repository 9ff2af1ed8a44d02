/* Device discovery and the one rule every GPU call obeys: a usable device, in this process.
 * The device count is asked once; a process forked after CUDA was initialized cannot use CUDA
 * (the driver does not survive fork), so GPU calls there raise instead of hanging. */
#ifndef GP_DEVICE_H
#define GP_DEVICE_H

#include <Python.h>

/* Number of CUDA devices; 0 without a driver or device. Never raises. In a child forked after
 * CUDA was used it still reports the devices; gp_require_device() then raises. */
int gp_device_count(void);

/* 0 when a device is usable; otherwise sets NoDeviceError (or GpuProfileError after a fork)
 * and returns -1. Marks CUDA as initialized in this process. */
int gp_require_device(void);

/* Call once CUDA state (context, events, memory) exists in this process. */
void gp_mark_cuda_used(void);

int gp_device_init(PyObject *module);

/* Makes `device` current for the duration of a call into CUDA, then restores the caller's device
 * (a framework's current device is shared with ours through the driver). */
typedef struct {
    int previous;
    int switched;
} gp_device_guard;

int gp_device_guard_enter(gp_device_guard *g, int device); /* 0, or -1 with CudaError */
void gp_device_guard_exit(gp_device_guard *g);             /* never raises */

#endif
