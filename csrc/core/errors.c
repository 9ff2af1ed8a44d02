/* Exceptions and the CUDA error path. */
#include "errors.h"

PyObject *gp_GpuProfileError;
PyObject *gp_CudaError;
PyObject *gp_CuptiError;
PyObject *gp_NoDeviceError;

int
gp_cuda_error_is_sticky(cudaError_t err)
{
    switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
        return 1;
    default:
        return 0;
    }
}

static PyObject *
new_exception(PyObject *module, const char *name, PyObject *base, const char *doc)
{
    PyObject *exc = PyErr_NewExceptionWithDoc(name, doc, base, NULL);
    if (exc == NULL)
        return NULL;
    if (PyModule_AddObjectRef(module, strrchr(name, '.') + 1, exc) < 0) {
        Py_DECREF(exc);
        return NULL;
    }
    return exc;
}

int
gp_errors_init(PyObject *module)
{
    gp_GpuProfileError = new_exception(module, "gpuprofile.GpuProfileError", PyExc_RuntimeError,
                                       "Base class of gpuprofile's errors.");
    if (gp_GpuProfileError == NULL)
        return -1;
    gp_CudaError = new_exception(module, "gpuprofile.CudaError", gp_GpuProfileError,
                                 "A CUDA runtime call failed. Attributes: call, code, error_name.");
    if (gp_CudaError == NULL)
        return -1;
    gp_CuptiError =
        new_exception(module, "gpuprofile.CuptiError", gp_GpuProfileError,
                      "CUPTI is missing, unusable, held by another tool, or a call failed.");
    if (gp_CuptiError == NULL)
        return -1;
    gp_NoDeviceError = new_exception(module, "gpuprofile.NoDeviceError", gp_GpuProfileError,
                                     "The call needs a CUDA device and none is usable.");
    return gp_NoDeviceError == NULL ? -1 : 0;
}

PyObject *
gp_set_cuda_error(cudaError_t err, const char *call, const char *file, int line)
{
    /* Clear the runtime's last-error slot so a non-sticky error is not reported twice. */
    (void)cudaGetLastError();
    const char *hint = "";
    if (gp_cuda_error_is_sticky(err))
        hint = " (a sticky error: GPU work launched earlier, possibly your own kernel, faulted; "
               "the CUDA context is unusable until the process exits)";
    else if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver)
        hint = " (no usable CUDA device or driver)";
    PyObject *msg =
        PyUnicode_FromFormat("%s failed: %s (%d): %s%s [%s:%d]", call, cudaGetErrorName(err),
                             (int)err, cudaGetErrorString(err), hint, file, line);
    if (msg == NULL)
        return NULL;
    PyObject *exc = PyObject_CallOneArg(gp_CudaError, msg);
    Py_DECREF(msg);
    if (exc == NULL)
        return NULL;
    PyObject *code = PyLong_FromLong((long)err);
    PyObject *name = PyUnicode_FromString(cudaGetErrorName(err));
    PyObject *call_s = PyUnicode_FromString(call);
    if (code && name && call_s && PyObject_SetAttrString(exc, "code", code) == 0 &&
        PyObject_SetAttrString(exc, "error_name", name) == 0 &&
        PyObject_SetAttrString(exc, "call", call_s) == 0)
        PyErr_SetObject(gp_CudaError, exc);
    Py_XDECREF(code);
    Py_XDECREF(name);
    Py_XDECREF(call_s);
    Py_DECREF(exc);
    return NULL;
}
