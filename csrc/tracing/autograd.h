/* Which autograd node a CUDA call belongs to, read from torch without linking it.
 *
 * Kernels launched by autograd's engine threads have no Python frame. Torch numbers every
 * autograd node from a per-thread counter when the forward op creates it (the node's sequence
 * number, with the id torch gives the forward thread), and sets the node being evaluated in a
 * thread-local while the backward runs it. So a launch in the forward notes the thread's next
 * sequence number (at::sequence_number::peek()) and torch's thread id; a launch in the backward
 * notes the current node's sequence number and forward thread id; Python
 * (gpuprofile.tracing.pylines.join_backward) gives each backward launch the Python line of the
 * first forward launch made after its node was created.
 *
 * Torch stays optional: gpuprofile never imports it. When the user did, Python hands the path of
 * the already loaded libtorch_cpu.so to `_autograd_bind`, which finds three exported functions
 * with dlsym. The node comes back as a C++ smart pointer (std::shared_ptr or c10::intrusive_ptr
 * by torch version), and its fields' offsets are torch's private layout, so nothing is used until
 * a calibration on a tiny CPU graph (gpuprofile.tracing.autograd_nodes) has shown which pointer
 * it is, where its reference count lies and at which offsets the two fields are; any mismatch
 * leaves backward launches as they were (no Python frame). */
#ifndef GP_AUTOGRAD_H
#define GP_AUTOGRAD_H

#include <Python.h>
#include <stdint.h>

enum { GP_PASS_NONE = 0, GP_PASS_FORWARD = 1, GP_PASS_BACKWARD = 2 };

typedef struct {
    uint64_t seq;    /* forward: the thread's next sequence number; backward: the node's */
    uint32_t thread; /* torch's id of the forward thread (0: unknown) */
    uint8_t pass;    /* GP_PASS_* (NONE: torch not bound, or the calibration failed) */
} gp_autograd_mark;

/* The calling thread's mark now; any thread, without the GIL. */
void gp_autograd_mark_now(gp_autograd_mark *out);

int gp_autograd_init(PyObject *module);

#endif
