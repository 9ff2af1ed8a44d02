// Kernels behind gpuprofile.benchmark.
//
// Versions:
//   gate v1:  one thread polls a host-mapped flag (with __nanosleep between polls, so the poll
//             does not flood PCIe) and exits when the host releases it or when a %globaltimer
//             timeout passes. The timeout matters: a host that blocks while the gate holds the
//             stream (fn synchronizes, lazy module loading, a full launch queue) would otherwise
//             wait forever. The exit reason goes back through host-mapped memory.
//   read v1:  grid-stride 16-byte loads XOR-folded into a register; the result is stored only if
//             it equals a magic value, so the loads cannot be optimized away and nothing is
//             written in practice. Used as the L2 flush (reading 2x the L2 leaves the cache full
//             of clean lines of another buffer, so the timed kernel pays no write-backs, which a
//             memset flush would leave behind) and as an L2-resident workload (cold vs hot).
//   probe v1: one thread counts clock64() cycles over a %globaltimer window: cycles per ns is the
//             SM clock in GHz, when NVML cannot say.
#include "bench_kernels.h"
#include "globaltimer.cuh"

__global__ void
gp_gate_kernel(gp_gate_params p)
{
    const uint64_t start = global_timer_ns();
    uint32_t outcome = GP_GATE_TIMED_OUT;
    while (global_timer_ns() - start < p.timeout_ns) {
        if (*p.release != 0) {
            outcome = GP_GATE_RELEASED;
            break;
        }
        __nanosleep(1000);
    }
    *p.state = outcome;
    __threadfence_system();
}

extern "C" cudaError_t
gp_launch_gate(gp_gate_params params, cudaStream_t stream)
{
    gp_gate_kernel<<<1, 1, 0, stream>>>(params);
    return cudaGetLastError();
}

#define GP_READ_MAGIC 0x9e3779b9u

static __device__ __forceinline__ void
read_words(const uint4 *__restrict__ words, size_t n, uint32_t *sink)
{
    uint32_t acc = 0;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const uint4 v = words[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == GP_READ_MAGIC)
        *sink = acc;
}

/* The workload (gpuprofile.kernels.read) and the L2 flush are the same code under two names, so
 * CUPTI timing can leave the flush out and keep a user's read. */
__global__ void
gp_read_kernel(const uint4 *__restrict__ words, size_t n, uint32_t *sink)
{
    read_words(words, n, sink);
}

__global__ void
gp_l2_flush_kernel(const uint4 *__restrict__ words, size_t n, uint32_t *sink)
{
    read_words(words, n, sink);
}

static cudaError_t
launch_read(gp_read_params params, cudaStream_t stream, bool flush)
{
    const size_t n = params.bytes / sizeof(uint4);
    if (n == 0)
        return cudaSuccess;
    const uint4 *words = (const uint4 *)params.buffer;
    if (flush)
        gp_l2_flush_kernel<<<params.blocks, 256, 0, stream>>>(words, n, params.sink);
    else
        gp_read_kernel<<<params.blocks, 256, 0, stream>>>(words, n, params.sink);
    return cudaGetLastError();
}

extern "C" cudaError_t
gp_launch_read(gp_read_params params, cudaStream_t stream)
{
    return launch_read(params, stream, false);
}

extern "C" cudaError_t
gp_launch_l2_flush(gp_read_params params, cudaStream_t stream)
{
    return launch_read(params, stream, true);
}

__global__ void
gp_clock_probe_kernel(gp_clock_probe_params p)
{
    const uint64_t t0 = global_timer_ns();
    const long long c0 = clock64();
    uint64_t t1 = t0;
    while (t1 - t0 < p.window_ns)
        t1 = global_timer_ns();
    const long long c1 = clock64();
    p.out[0] = (unsigned long long)(c1 - c0);
    p.out[1] = t1 - t0;
}

extern "C" cudaError_t
gp_launch_clock_probe(gp_clock_probe_params params, cudaStream_t stream)
{
    gp_clock_probe_kernel<<<1, 1, 0, stream>>>(params);
    return cudaGetLastError();
}
