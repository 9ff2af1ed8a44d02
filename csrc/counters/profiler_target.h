/* What every counter feature (range profiler, PC sampling, PM sampling) does first on the
 * device: load CUPTI, cuptiProfilerInitialize once per process, check that the device supports
 * the API (a clear error naming the reason otherwise), and the chip name and counter
 * availability image the host API needs. */
#ifndef GP_PROFILER_TARGET_H
#define GP_PROFILER_TARGET_H

#include <Python.h>
#include <cupti_profiler_target.h>

/* Loads CUPTI and calls cuptiProfilerInitialize (once); -1 with CuptiError. */
int gp_profiler_initialize(void);

/* 0 when `api` is supported on `device`; else -1 with CuptiError saying why (architecture,
 * vGPU, confidential computing, SLI, CMP, WSL). `feature` names it for the message. */
int gp_profiler_require_support(CUdevice device, CUpti_Profiler_API api, const char *feature);

/* One counter collection (range profiler, PC sampling or PM sampling) from start to end: the
 * lifecycle every counter type shares. The counter features take turns, one collection at a
 * time in this process; a session holds that turn from begin to end. */
typedef struct {
    CUcontext ctx; /* the current device's context at begin */
    CUdevice dev;
    int device;
    int claimed;
} gp_counter_session;

/* Takes the turn (GpuProfileError naming the holder if another collection runs), then finds
 * the current context, initializes the profiler API and checks the device supports `api`.
 * `who` ("PC sampling") names the collection in errors and must be a string literal; `feature`
 * names the API in unsupported-device errors. 0, or -1 with an exception: the session may
 * still hold the turn, so the caller ends it on its error path as on any other. */
int gp_counter_session_begin(gp_counter_session *s, const char *who, CUpti_Profiler_API api,
                             const char *feature);

/* Gives the turn back; safe to call twice or on a session that never began. Never raises. */
void gp_counter_session_end(gp_counter_session *s);

int gp_profiler_target_init(PyObject *module);

#endif
