/* The CUPTI region clock: while a gpuprofile.profile() traces with regions, regions record no
 * CUDA events; the profile fills in their GPU time from its trace when it stops
 * (gpuprofile/tracing/region_clock.py computes it). This file holds the switch and the fill;
 * stacks.c reads the switch at enter (gp_regions_cupti_clock, store.h). */
#ifndef GP_REGIONS_CUPTI_CLOCK_H
#define GP_REGIONS_CUPTI_CLOCK_H

#include <Python.h>

/* _regions_set_cupti_clock, _regions_fill_cupti. */
int gp_region_cupti_clock_init(PyObject *module);

#endif
