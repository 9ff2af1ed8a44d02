/* The calling thread's Python frames, read from inside a CUDA call without taking the GIL.
 *
 * Frameworks release the GIL around their CUDA calls (torch's op bindings, Triton's launcher,
 * CuPy's kernels), so a launch callback usually runs on a thread that has Python frames but does
 * not hold the GIL. Those frames cannot change while the thread is inside the call, and other
 * threads never touch them, so they can be read, as profilers that sample Python stacks do: on
 * CPython 3.11 and 3.12 through the interpreter's frame structs (the only internal headers
 * gpuprofile includes, in pyframes.c alone), reading pointers and line tables only: no
 * allocation, no reference counting, no Python code. On other versions frames are read through
 * the public API, only while the thread holds the GIL. */
#ifndef GP_PYFRAMES_H
#define GP_PYFRAMES_H

#include <Python.h>

typedef struct {
    PyCodeObject *code; /* borrowed: alive while the frame is, i.e. during the CUDA call */
    int lasti;          /* byte offset of the current instruction, for gp_pyframe_line */
    int line;           /* -1 until gp_pyframe_line computes it */
} gp_pyframe;

/* Up to `max` frames of the calling thread, innermost first; 0 when it has none that can be read
 * now (no Python thread state, no frame, or another version without the GIL). Any thread. */
int gp_pyframes_read(gp_pyframe *out, int max);

/* The frame's source line (computed once, from the code object's line table). */
int gp_pyframe_line(gp_pyframe *frame);

/* 1 when frames are read without the GIL on this Python. */
int gp_pyframes_nogil(void);

#endif
