/* The host-clock benchmark loop (_C._bench_host_batch: CLOCK_MONOTONIC around each call, for
 * callables without a device or when asked for), and what it shares with BenchRunner. */
#ifndef GP_HOST_LOOP_H
#define GP_HOST_LOOP_H

#include <Python.h>

/* Iterations per batch: far more than a gate can hold without filling the launch queue. */
#define GP_BENCH_MAX_BATCH 65536

/* setup() before an iteration, untimed: None keeps the default arguments, (args, kwargs)
 * replaces them for this call. New references in *args and *kwargs (kwargs may be NULL). Shared
 * by the GPU and host loops; 0 or -1 with an exception. */
int gp_bench_setup_arguments(PyObject *setup, PyObject *dargs, PyObject *dkwargs, PyObject **args,
                             PyObject **kwargs);

int gp_bench_host_init(PyObject *module);

#endif
