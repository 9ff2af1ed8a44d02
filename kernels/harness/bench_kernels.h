/* Kernels behind gpuprofile.benchmark: the gate that holds a stream while a batch is enqueued,
 * the read kernel (L2 flush and the L2-resident workload) and the SM-clock probe. A plain C ABI:
 * launchers take POD arguments and a stream and return the launch's cudaError_t. */
#ifndef GP_KERNELS_BENCH_KERNELS_H
#define GP_KERNELS_BENCH_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the gate kernel writes to *state when it exits. */
enum { GP_GATE_WAITING = 0, GP_GATE_RELEASED = 1, GP_GATE_TIMED_OUT = 2 };

typedef struct {
    const volatile uint32_t *release; /* host-mapped flag: the host writes 1 to open the gate */
    volatile uint32_t *state;         /* host-mapped: GP_GATE_RELEASED or GP_GATE_TIMED_OUT */
    uint64_t timeout_ns;              /* give up after this long, so a blocked host cannot hang */
} gp_gate_params;

/* One thread waits until *release != 0 or timeout_ns passed (on %globaltimer). */
cudaError_t gp_launch_gate(gp_gate_params params, cudaStream_t stream);

typedef struct {
    const void *buffer; /* device memory, 16-byte aligned */
    size_t bytes;       /* read in 16-byte words; a tail below 16 bytes is not read */
    uint32_t *sink;     /* device word written only if the data XOR to a magic value */
    int blocks;         /* grid size; 256 threads per block */
} gp_read_params;

/* Reads every 16-byte word of the buffer once (grid-stride, coalesced). */
cudaError_t gp_launch_read(gp_read_params params, cudaStream_t stream);
/* The same read, as the benchmark's L2 flush (a kernel of its own name). */
cudaError_t gp_launch_l2_flush(gp_read_params params, cudaStream_t stream);

typedef struct {
    uint64_t window_ns;      /* how long to count SM cycles */
    unsigned long long *out; /* device: out[0] = cycles, out[1] = elapsed ns */
} gp_clock_probe_params;

/* One thread counts clock64() cycles over window_ns of %globaltimer: cycles/ns = SM GHz. */
cudaError_t gp_launch_clock_probe(gp_clock_probe_params params, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
