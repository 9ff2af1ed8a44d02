// Calibration kernels: ground truth for tests and benchmarks.
//
// Versions:
//   spin v1: one thread polls %globaltimer until `ns` have passed. The kernel's duration is the
//            request plus the timer's granularity and the launch's own start-up (about a
//            microsecond on Hopper); tests on short spins compare against CUPTI's kernel duration
//            rather than the request.
//   fault v1: a store through a small non-null invalid pointer (a sticky illegal-address error).
#include "calibrate.h"
#include "globaltimer.cuh"

__global__ void
gp_spin_kernel(uint64_t ns)
{
    const uint64_t start = global_timer_ns();
    while (global_timer_ns() - start < ns) {
    }
}

extern "C" cudaError_t
gp_launch_spin(uint64_t ns, cudaStream_t stream)
{
    gp_spin_kernel<<<1, 1, 0, stream>>>(ns);
    return cudaGetLastError();
}

__global__ void
gp_fault_kernel(int *p)
{
    *p = 1;
}

extern "C" cudaError_t
gp_launch_fault(cudaStream_t stream)
{
    gp_fault_kernel<<<1, 1, 0, stream>>>(reinterpret_cast<int *>(16));
    return cudaGetLastError();
}
