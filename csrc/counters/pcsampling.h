/* CUPTI PC sampling (cupti_pcsampling.h) in start/stop mode as the Python type _C.PCSampler:
 * warp-state samples per PC with the stall reason of each sample, aggregated per
 * (cubin CRC, function, PC offset); and SASS-to-source mapping of a PC through the cubins
 * captured by cubins.c.
 *
 * Gotcha handled here (research C): at Stop CUPTI copies the range's records into the
 * *configured* buffer itself; the rest is fetched with cuptiPCSamplingGetData into a second
 * buffer. GetData into the configured buffer would overwrite what Stop delivered. */
#ifndef GP_PCSAMPLING_H
#define GP_PCSAMPLING_H

#include <Python.h>

int gp_pcsampling_init(PyObject *module);

#endif
