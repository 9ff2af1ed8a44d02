/* CUPTI PM sampling (cupti_pmsampling.h) as the Python type _C.PmSampler: one-pass metric sets
 * sampled every `interval_ns` of GPU time while work runs, with each sample's start and end in
 * the cuptiGetTimestamp domain (the tracing feature's clock).
 *
 * Gotchas handled here (research D): sample 0 starts long before Start (back to SetConfig), so
 * samples that start before the Start call are dropped; the counter data image is ~29 KB per
 * sample, so it is sized by max_samples and decoded in rounds (reinitialized when full); a
 * hardware-buffer overflow (DecodeData -> OUT_OF_MEMORY) is reported, not hidden. */
#ifndef GP_PMSAMPLING_H
#define GP_PMSAMPLING_H

#include <Python.h>

int gp_pmsampling_init(PyObject *module);

#endif
