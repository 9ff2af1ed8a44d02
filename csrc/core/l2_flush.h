/* The L2 flush shared by the benchmark (csrc/bench: before each timed iteration) and the counters
 * (csrc/counters: before each counted kernel or pass, cache_control="all"): one zeroed buffer of
 * twice the device's L2 per device, which the wings read with the flush kernel
 * (kernels/harness/bench_kernels.h, gp_launch_l2_flush) to evict whatever L2 held. */
#ifndef GP_L2_FLUSH_H
#define GP_L2_FLUSH_H

#include <Python.h>

/* Grid size that keeps every SM of `device` busy with the read kernel; -1 with CudaError set. */
int gp_read_blocks(int device);

/* The flush buffer of `device`: *ptr holds *bytes (twice the L2, in whole MiB) and 256 bytes more
 * after them for the read kernel's sink word. Allocated on first use and kept for the process.
 * 0, or -1 with CudaError. GIL held. */
int gp_l2_flush_area(int device, char **ptr, size_t *bytes);

#endif
