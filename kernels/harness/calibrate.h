/* Calibration kernels: workloads whose cost is known in advance, so measurements can be checked
 * against ground truth. A plain C ABI: launchers take POD arguments and a stream and return the
 * launch's cudaError_t; they know nothing of Python. */
#ifndef GP_KERNELS_CALIBRATE_H
#define GP_KERNELS_CALIBRATE_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One thread busy-waits `ns` nanoseconds on the GPU's global timer (%globaltimer). */
cudaError_t gp_launch_spin(uint64_t ns, cudaStream_t stream);

/* One thread writes through an invalid pointer: a sticky cudaErrorIllegalAddress, for tests of
 * error reporting. The CUDA context is unusable afterwards (run it in a throwaway process). */
cudaError_t gp_launch_fault(cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
