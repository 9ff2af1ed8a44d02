/* The benchmark loop behind gpuprofile.benchmark: the BenchRunner type (GPU clock: cold, hot and
 * graph modes, one batch of iterations per call) and the host-clock loop. Python (bench.py)
 * decides batch sizes, warm-up and when to stop; this file only enqueues and times. */
#ifndef GP_BENCH_H
#define GP_BENCH_H

#include <Python.h>

/* Adds BenchRunner, _bench_host_batch and the helpers from clocks.c and devbuf.c. */
int gp_bench_init(PyObject *module);

#endif
