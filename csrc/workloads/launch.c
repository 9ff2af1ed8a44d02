/* Launchers for the calibration kernels, exposed as gpuprofile.kernels.*. */
#include "launch.h"
#include "harness/calibrate.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/streams.h"
#include "core/testing.h"

/* A spin longer than this is almost certainly a unit mistake (s vs ns) and would hold the GPU. */
#define GP_SPIN_MAX_NS (60ULL * 1000000000ULL)

static PyObject *
spin(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"ns", "stream", NULL};
    PyObject *ns_obj, *stream_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:spin", kwlist, &ns_obj, &stream_obj))
        return NULL;
    if (!PyLong_Check(ns_obj) || PyBool_Check(ns_obj))
        return PyErr_Format(PyExc_TypeError, "spin(ns): ns must be an int, got %.100s",
                            Py_TYPE(ns_obj)->tp_name);
    long long ns = PyLong_AsLongLong(ns_obj);
    if (ns == -1 && PyErr_Occurred())
        return NULL;
    if (ns < 0 || (unsigned long long)ns > GP_SPIN_MAX_NS)
        return PyErr_Format(PyExc_ValueError, "spin(ns): ns must be in [0, %llu], got %lld",
                            GP_SPIN_MAX_NS, ns);
    cudaStream_t stream;
    if (gp_stream_from_object(stream_obj, &stream) < 0 || gp_require_device() < 0)
        return NULL;
    GP_CUDA_CHECK(gp_launch_spin((uint64_t)ns, stream));
    Py_RETURN_NONE;
error:
    return NULL;
}

static PyObject *
fault(PyObject *module, PyObject *stream_obj)
{
    cudaStream_t stream;
    if (gp_stream_from_object(stream_obj, &stream) < 0 || gp_require_device() < 0)
        return NULL;
    GP_CUDA_CHECK(gp_launch_fault(stream));
    Py_RETURN_NONE;
error:
    return NULL;
}

static PyMethodDef testing_methods[] = {
    {"fault", fault, METH_O, "Launch a kernel that faults (tests only: kills the CUDA context)."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef launch_methods[] = {
    {"spin", (PyCFunction)(void (*)(void))spin, METH_VARARGS | METH_KEYWORDS,
     "spin(ns, stream=None)\n--\n\nLaunch one GPU thread that busy-waits `ns` nanoseconds on the "
     "GPU's global timer. Returns at once (the launch is asynchronous)."},
    {NULL, NULL, 0, NULL},
};

int
gp_launch_init(PyObject *module)
{
    if (gp_testing_add_functions(module, testing_methods) < 0)
        return -1;
    return PyModule_AddFunctions(module, launch_methods);
}
