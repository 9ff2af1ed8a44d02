/* Probe kernel launchers: known launch configurations for checking CUPTI's records. */
#include "probes.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/streams.h"
#include "core/testing.h"
#include "core/util.h"

#include "harness/probe.h" /* kernels/harness/probe.h */

/* A dim3 from an int or a tuple of 1 to 3 positive ints. */
static int
parse_dim3(PyObject *obj, const char *what, unsigned out[3])
{
    out[0] = out[1] = out[2] = 1;
    if (PyLong_Check(obj)) {
        int v;
        if (gp_as_int(obj, what, &v) < 0)
            return -1;
        if (v < 1) {
            PyErr_Format(PyExc_ValueError, "%s must be >= 1, got %d", what, v);
            return -1;
        }
        out[0] = (unsigned)v;
        return 0;
    }
    if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) < 1 || PyTuple_GET_SIZE(obj) > 3) {
        PyErr_Format(PyExc_TypeError, "%s must be an int or a tuple of 1 to 3 ints", what);
        return -1;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(obj); k++) {
        int v;
        if (gp_as_int(PyTuple_GET_ITEM(obj, k), what, &v) < 0)
            return -1;
        if (v < 1) {
            PyErr_Format(PyExc_ValueError, "%s must be >= 1, got %d", what, v);
            return -1;
        }
        out[k] = (unsigned)v;
    }
    return 0;
}

static PyObject *
probe_launch(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"grid", "block", "dynamic_smem", "stream", NULL};
    PyObject *grid, *block, *stream_obj = Py_None;
    Py_ssize_t dyn = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|nO:probe_launch", kwlist, &grid, &block,
                                     &dyn, &stream_obj))
        return NULL;
    gp_probe_params p = {.dynamic_smem = (size_t)dyn};
    if (dyn < 0 || dyn > 48 * 1024)
        return PyErr_Format(PyExc_ValueError, "dynamic_smem must be in [0, 49152], got %zd", dyn);
    cudaStream_t stream;
    if (parse_dim3(grid, "grid", p.grid) < 0 || parse_dim3(block, "block", p.block) < 0 ||
        gp_stream_from_object(stream_obj, &stream) < 0 || gp_require_device() < 0)
        return NULL;
    GP_CUDA_CHECK(gp_launch_probe(&p, stream));
    Py_RETURN_NONE;
error:
    return NULL;
}

static PyObject *
probe_attributes(PyObject *module, PyObject *unused)
{
    if (gp_require_device() < 0)
        return NULL;
    struct cudaFuncAttributes a;
    GP_CUDA_CHECK(gp_probe_attributes(&a));
    return Py_BuildValue("{s:i,s:n,s:n,s:i,s:n}", "registers_per_thread", a.numRegs, "static_smem",
                         (Py_ssize_t)a.sharedSizeBytes, "local_mem_per_thread",
                         (Py_ssize_t)a.localSizeBytes, "max_threads_per_block",
                         a.maxThreadsPerBlock, "declared_static_smem",
                         (Py_ssize_t)GP_PROBE_STATIC_SMEM);
error:
    return NULL;
}

static PyObject *
probe_occupancy(PyObject *module, PyObject *args)
{
    int block_size;
    Py_ssize_t dyn = 0;
    if (!PyArg_ParseTuple(args, "i|n:probe_occupancy", &block_size, &dyn))
        return NULL;
    if (block_size < 1 || dyn < 0)
        return PyErr_Format(PyExc_ValueError, "block_size must be >= 1 and dynamic_smem >= 0");
    if (gp_require_device() < 0)
        return NULL;
    int blocks = 0;
    GP_CUDA_CHECK(gp_probe_occupancy(&blocks, block_size, (size_t)dyn));
    return PyLong_FromLong(blocks);
error:
    return NULL;
}

/* _launch_empty(n, stream=None) -> host ns spent launching n empty kernels (no sync). */
static PyObject *
launch_empty(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"n", "stream", NULL};
    long long n;
    PyObject *stream_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "L|O:launch_empty", kwlist, &n, &stream_obj))
        return NULL;
    if (n < 0)
        return PyErr_Format(PyExc_ValueError, "n must be >= 0, got %lld", n);
    cudaStream_t stream;
    if (gp_stream_from_object(stream_obj, &stream) < 0 || gp_require_device() < 0)
        return NULL;
    cudaError_t err;
    int64_t t0, t1;
    /* Launches block once the GPU's queue is full, so they run without the GIL. */
    Py_BEGIN_ALLOW_THREADS
    t0 = gp_now_ns();
    err = gp_launch_empty(n, stream);
    t1 = gp_now_ns();
    Py_END_ALLOW_THREADS
    GP_CUDA_CHECK(err);
    return PyLong_FromLongLong(t1 - t0);
error:
    return NULL;
}

/* _device_reset(): cudaDeviceReset, to test what survives a destroyed context. */
static PyObject *
device_reset(PyObject *module, PyObject *unused)
{
    if (gp_require_device() < 0)
        return NULL;
    GP_CUDA_CHECK(cudaDeviceReset());
    Py_RETURN_NONE;
error:
    return NULL;
}

static PyMethodDef probe_methods[] = {
    {"probe_launch", (PyCFunction)(void (*)(void))probe_launch, METH_VARARGS | METH_KEYWORDS,
     "probe_launch(grid, block, dynamic_smem=0, stream=None): launch the probe kernel."},
    {"probe_attributes", probe_attributes, METH_NOARGS,
     "cudaFuncGetAttributes of the probe kernel as a dict."},
    {"probe_occupancy", probe_occupancy, METH_VARARGS,
     "probe_occupancy(block_size, dynamic_smem=0): "
     "cudaOccupancyMaxActiveBlocksPerMultiprocessor."},
    {"launch_empty", (PyCFunction)(void (*)(void))launch_empty, METH_VARARGS | METH_KEYWORDS,
     "launch_empty(n, stream=None) -> ns: launch n empty kernels; host ns spent launching."},
    {"device_reset", device_reset, METH_NOARGS, "cudaDeviceReset() (tests of faults)."},
    {NULL, NULL, 0, NULL},
};

/* All of them are the tests' and benchmarks': _C._testing. */
int
gp_probes_init(PyObject *module)
{
    return gp_testing_add_functions(module, probe_methods);
}
