/* Python lines: which line of the user's Python code launched each kernel, copy and set.
 *
 * While on, CUPTI's launch, copy, set and graph-launch callbacks run on the launching thread. When
 * that thread holds the GIL (Python code called into CUDA), the handler reads its Python frames
 * and notes (correlation id, site, stack): `site` is the innermost *user* frame (a code object and
 * a line, in a file under none of the excluded prefixes: the standard library, site-packages,
 * gpuprofile itself; the innermost frame if every frame is excluded) and `stack` the whole stack,
 * interned ("stack" mode only). A launch from a thread without the GIL (autograd's engine
 * threads, C++ worker threads) is not noted: its rows say it came from no Python frame.
 *
 * gpuprofile/tracing/pylines.py turns the notes into per-row file:line columns, p.by_line() and
 * flame-graph exports. */
#ifndef GP_PYLINES_H
#define GP_PYLINES_H

#include <Python.h>
#include <stdint.h>

int gp_pylines_init(PyObject *module);

#endif
