/* One error path for the extension: every CUDA, CUPTI and NVPW call goes through a check macro
 * that raises gpuprofile.CudaError / CuptiError naming the call, the error and file:line, then
 * jumps to the enclosing function's `error:` label. Library code never prints or exits. */
#ifndef GP_ERRORS_H
#define GP_ERRORS_H

#include <Python.h>
#include <cuda_runtime_api.h>
#include <cupti_result.h>

/* Exception types: process globals, created once at module exec and added to the module, which
 * also holds a reference. Not module state (m_size is 0) on purpose: the module executes once
 * per process (CUDA, CUPTI and the region store are process-global, see module.c), and every
 * error path, including CUPTI callbacks on threads with no module at hand, raises these without
 * a state lookup. */
extern PyObject *gp_GpuProfileError; /* base: RuntimeError */
extern PyObject *gp_CudaError;
extern PyObject *gp_CuptiError;
extern PyObject *gp_NoDeviceError;

int gp_errors_init(PyObject *module);

/* Sets CudaError for `err` returned by `call`; always returns NULL. */
PyObject *gp_set_cuda_error(cudaError_t err, const char *call, const char *file, int line);

/* True for errors after which the CUDA context is unusable (e.g. an illegal address in a kernel).
 */
int gp_cuda_error_is_sticky(cudaError_t err);

#define GP_CUDA_CHECK(call)                                                                        \
    do {                                                                                           \
        cudaError_t gp_err_ = (call);                                                              \
        if (gp_err_ != cudaSuccess) {                                                              \
            gp_set_cuda_error(gp_err_, #call, __FILE__, __LINE__);                                 \
            goto error;                                                                            \
        }                                                                                          \
    } while (0)

/* Sets CuptiError for `res` from `call` (with CUPTI's own text for it and a hint for the results
 * a user can act on); returns NULL. Defined in cupti_loader.c, which holds CUPTI's functions. */
PyObject *gp_set_cupti_error(CUptiResult res, const char *call, const char *file, int line);

#define GP_CUPTI_CHECK(call)                                                                       \
    do {                                                                                           \
        CUptiResult gp_res_ = (call);                                                              \
        if (gp_res_ != CUPTI_SUCCESS) {                                                            \
            gp_set_cupti_error(gp_res_, #call, __FILE__, __LINE__);                                \
            goto error;                                                                            \
        }                                                                                          \
    } while (0)

#endif
