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

/* The counter features take turns: one collection (range profiler, PC sampling or PM sampling)
 * at a time in this process. claim: 0, or -1 with GpuProfileError naming the holder. `who` must
 * be a string literal. */
int gp_counters_claim(const char *who);
void gp_counters_release(void);

int gp_profiler_target_init(PyObject *module);

#endif
