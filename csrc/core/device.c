/* Device count, device properties and fork safety. */
#include "device.h"
#include "errors.h"
#include "util.h"

#include <cuda_runtime_api.h>
#include <pthread.h>

static int count_known;
static int count_cached;
static cudaError_t count_error = cudaSuccess;
static int cuda_used;        /* CUDA state was created in this process */
static int forked_after_use; /* this process is a fork() child of one that used CUDA */

static void
after_fork_in_child(void)
{
    if (cuda_used)
        forked_after_use = 1;
}

int
gp_device_count(void)
{
    if (!count_known) {
        int n = 0;
        count_error = cudaGetDeviceCount(&n);
        if (count_error != cudaSuccess) {
            (void)cudaGetLastError();
            n = 0;
        }
        count_cached = n;
        count_known = 1;
    }
    return count_cached;
}

/* The runtime answers cudaErrorInsufficientDriver ("CUDA driver version is insufficient") both
 * for an old driver and for none at all; the driver version 0 tells them apart. Every no-device
 * message says the second case in these words, as `gpuprofile info` does. */
#define NO_DRIVER "no NVIDIA driver found"

static int
no_driver(void)
{
    int driver = 0;
    (void)cudaDriverGetVersion(&driver);
    return count_error == cudaErrorInsufficientDriver && driver == 0;
}

void
gp_mark_cuda_used(void)
{
    cuda_used = 1;
}

int
gp_require_device(void)
{
    if (forked_after_use) {
        PyErr_SetString(gp_GpuProfileError,
                        "CUDA was initialized in the parent process before fork(); CUDA cannot be "
                        "used in a forked child. Use multiprocessing's 'spawn' or 'forkserver' "
                        "start method, or initialize CUDA only in the children.");
        return -1;
    }
    if (gp_device_count() == 0) {
        if (no_driver())
            PyErr_SetString(gp_NoDeviceError, "no usable CUDA device: " NO_DRIVER);
        else if (count_error != cudaSuccess)
            PyErr_Format(gp_NoDeviceError,
                         "no usable CUDA device: cudaGetDeviceCount returned %s: %s",
                         cudaGetErrorName(count_error), cudaGetErrorString(count_error));
        else
            PyErr_SetString(gp_NoDeviceError,
                            "no usable CUDA device: the driver reports 0 devices");
        return -1;
    }
    cuda_used = 1;
    return 0;
}

static PyObject *
device_count(PyObject *self, PyObject *unused)
{
    return PyLong_FromLong(gp_device_count());
}

static PyObject *
cuda_status(PyObject *self, PyObject *unused)
{
    int n = gp_device_count();
    int driver = 0, runtime = 0;
    (void)cudaDriverGetVersion(&driver);
    (void)cudaRuntimeGetVersion(&runtime);
    const char *reason = "";
    if (forked_after_use)
        reason = "CUDA was initialized before fork(); unusable in this child process";
    else if (no_driver())
        reason = NO_DRIVER;
    else if (count_error != cudaSuccess)
        reason = cudaGetErrorString(count_error);
    else if (n == 0)
        reason = "the driver reports 0 devices";
    return Py_BuildValue("{s:i,s:i,s:i,s:s,s:s}", "device_count", n, "driver_version", driver,
                         "runtime_version", runtime, "reason", reason, "error_name",
                         count_error == cudaSuccess ? "" : cudaGetErrorName(count_error));
}

static int
add_attr(PyObject *dict, const char *key, enum cudaDeviceAttr attr, int device)
{
    int value = 0;
    cudaError_t err = cudaDeviceGetAttribute(&value, attr, device);
    if (err != cudaSuccess) {
        gp_set_cuda_error(err, "cudaDeviceGetAttribute", __FILE__, __LINE__);
        return -1;
    }
    PyObject *v = PyLong_FromLong(value);
    if (v == NULL)
        return -1;
    int rc = PyDict_SetItemString(dict, key, v);
    Py_DECREF(v);
    return rc;
}

/* Raw properties of device `index` as a dict; gpuprofile.device_info() derives peaks from it. */
static PyObject *
device_properties(PyObject *self, PyObject *arg)
{
    int index;
    if (gp_as_int(arg, "device index", &index) < 0)
        return NULL;
    if (gp_require_device() < 0)
        return NULL;
    int n = gp_device_count();
    if (index < 0 || index >= n)
        return PyErr_Format(PyExc_IndexError, "device index %d out of range: %d device(s)", index,
                            n);
    struct cudaDeviceProp prop;
    PyObject *d = NULL;
    GP_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    char uuid[33];
    for (int i = 0; i < 16; i++)
        snprintf(uuid + 2 * i, 3, "%02x", (unsigned char)prop.uuid.bytes[i]);
    d = Py_BuildValue("{s:s,s:i,s:i,s:n,s:s,s:s}", "name", prop.name, "major", prop.major, "minor",
                      prop.minor, "total_memory", (Py_ssize_t)prop.totalGlobalMem, "uuid", uuid,
                      "pci_bus_id", "");
    if (d == NULL)
        return NULL;
    char bus[32];
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, index) == cudaSuccess) {
        PyObject *b = PyUnicode_FromString(bus);
        if (b == NULL || PyDict_SetItemString(d, "pci_bus_id", b) < 0) {
            Py_XDECREF(b);
            goto error;
        }
        Py_DECREF(b);
    }
    (void)cudaGetLastError();
    static const struct {
        const char *key;
        enum cudaDeviceAttr attr;
    } attrs[] = {
        {"sm_count", cudaDevAttrMultiProcessorCount},
        {"l2_cache_bytes", cudaDevAttrL2CacheSize},
        {"sm_clock_khz", cudaDevAttrClockRate},
        {"memory_clock_khz", cudaDevAttrMemoryClockRate},
        {"memory_bus_width_bits", cudaDevAttrGlobalMemoryBusWidth},
        {"max_threads_per_sm", cudaDevAttrMaxThreadsPerMultiProcessor},
        {"max_blocks_per_sm", cudaDevAttrMaxBlocksPerMultiprocessor},
        {"max_threads_per_block", cudaDevAttrMaxThreadsPerBlock},
        {"registers_per_sm", cudaDevAttrMaxRegistersPerMultiprocessor},
        {"registers_per_block", cudaDevAttrMaxRegistersPerBlock},
        {"shared_memory_per_sm", cudaDevAttrMaxSharedMemoryPerMultiprocessor},
        {"shared_memory_per_block_optin", cudaDevAttrMaxSharedMemoryPerBlockOptin},
        {"reserved_shared_memory_per_block", cudaDevAttrReservedSharedMemoryPerBlock},
        {"warp_size", cudaDevAttrWarpSize},
        {"ecc_enabled", cudaDevAttrEccEnabled},
        {"persisting_l2_max_bytes", cudaDevAttrMaxPersistingL2CacheSize},
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
        if (add_attr(d, attrs[i].key, attrs[i].attr, index) < 0)
            goto error;
    return d;
error:
    Py_XDECREF(d);
    return NULL;
}

static PyMethodDef device_methods[] = {
    {"device_count", device_count, METH_NOARGS,
     "device_count() -> int\n--\n\nNumber of CUDA devices; 0 without a GPU or driver. Never "
     "raises."},
    {"_cuda_status", cuda_status, METH_NOARGS,
     "Driver/runtime versions and why no device is usable."},
    {"_device_properties", device_properties, METH_O, "Raw properties of one device as a dict."},
    {NULL, NULL, 0, NULL},
};

int
gp_device_init(PyObject *module)
{
    static int atfork_registered;
    if (!atfork_registered) {
        if (pthread_atfork(NULL, NULL, after_fork_in_child) != 0) {
            PyErr_SetString(PyExc_OSError, "pthread_atfork failed");
            return -1;
        }
        atfork_registered = 1;
    }
    return PyModule_AddFunctions(module, device_methods);
}

int
gp_device_guard_enter(gp_device_guard *g, int device)
{
    g->switched = 0;
    GP_CUDA_CHECK(cudaGetDevice(&g->previous));
    if (g->previous != device) {
        GP_CUDA_CHECK(cudaSetDevice(device));
        g->switched = 1;
    }
    return 0;
error:
    return -1;
}

void
gp_device_guard_exit(gp_device_guard *g)
{
    if (g->switched)
        (void)cudaSetDevice(g->previous);
    g->switched = 0;
}
