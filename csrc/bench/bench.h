/* The benchmark loop behind gpuprofile.benchmark: the BenchRunner type (GPU clock: cold, hot and
 * graph modes, one batch of iterations per call) and, in host_loop.c, the host-clock loop. Python
 * (gpuprofile/bench/benchmark.py) decides batch sizes, warm-up and when to stop; this file only
 * enqueues and times. */
#ifndef GP_BENCH_H
#define GP_BENCH_H

#include <Python.h>

/* Adds BenchRunner. */
int gp_bench_init(PyObject *module);

#endif
