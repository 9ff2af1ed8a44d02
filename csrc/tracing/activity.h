/* CUPTI activity tracing: kernels, memory copies and sets, device memory allocations and frees,
 * and the external correlation records that tie them to gpuprofile regions.
 *
 * Kinds are reference-counted, so that a profile, a memory tracker and memory=True regions can
 * overlap: a CUPTI kind is enabled when its first user acquires it and disabled when its last
 * user releases it (counted per CUPTI kind). The records themselves are parsed and kept by
 * records.c.
 *
 * CUPTI is process-global; the loader (cupti_loader.c) owns it, and before enabling any kind
 * this file claims the process's one subscriber, so that another holder (torch.profiler,
 * proton, Nsight) is reported as an error instead of having its buffers silently stolen. */
#ifndef GP_ACTIVITY_H
#define GP_ACTIVITY_H

#include "core/cupti_loader.h"
#include "record_kinds.h" /* the activity bits (GP_ACT_*) and the record kinds they ask for */

#include <Python.h>
#include <cupti.h>
#include <stdint.h>

/* Enable the kinds in `mask` for one more user (claims CUPTI on first use). GIL held; 0 or -1
 * with CuptiError/NoDeviceError, nothing acquired. */
int gp_activity_acquire(unsigned mask);
/* Drop one user of each kind in `mask`, disabling kinds nobody uses. GIL held; -1 with an
 * exception if CUPTI refused to disable one (the counts are dropped regardless). */
int gp_activity_release(unsigned mask);

/* The launch calls whose API records GP_ACT_API enables (runtime and driver callback ids), by
 * callback id. Set by pylines.c at init; the arrays must outlive the process's use of CUPTI. */
void gp_activity_set_api_cbids(const CUpti_CallbackId *runtime, size_t n_runtime,
                               const CUpti_CallbackId *driver, size_t n_driver);

/* The runtime and driver calls attribution reads (launches, copies, sets, event records,
 * allocations), as callbacks to watch: found by name once, valid for the process. */
const gp_cupti_callback *gp_activity_regions_callbacks(size_t *n);

/* Called with 1 when the REGIONS kind is enabled (-1 fails the enable) and 0 when it is
 * disabled. Set by attribution.c at init, so that this file does not depend on it. */
void gp_activity_set_regions_hook(int (*hook)(int on));

int gp_activity_init(PyObject *module);

#endif
