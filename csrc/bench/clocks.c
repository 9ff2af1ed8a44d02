/* _bench_sm_clock(device, stream=None, probe=False) -> dict(mhz, source, throttle_reasons).
 *
 * NVML is declared here rather than included: its header is not part of every CUDA toolkit, and
 * these few entry points have had a stable ABI since NVML's v2 initialization. */
#include "clocks.h"
#include "harness/bench_kernels.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/events.h"
#include "core/streams.h"
#include "core/util.h"

#include <dlfcn.h>

typedef int nvml_return;   /* nvmlReturn_t: 0 is NVML_SUCCESS */
typedef void *nvml_device; /* nvmlDevice_t: opaque */
#define GP_NVML_CLOCK_SM 1 /* nvmlClockType_t NVML_CLOCK_SM */

static struct {
    int state; /* 0 untried, 1 usable, -1 unavailable */
    nvml_return (*init)(void);
    nvml_return (*by_pci_bus_id)(const char *, nvml_device *);
    nvml_return (*clock_info)(nvml_device, int, unsigned int *);
    nvml_return (*throttle_reasons)(nvml_device, unsigned long long *);
    nvml_device devices[GP_MAX_DEVICES];
    int device_state[GP_MAX_DEVICES]; /* 0 untried, 1 found, -1 not found */
} nvml;

/* Loads and initializes NVML once; 1 when usable. Never raises: NVML is optional. */
static int
nvml_ready(void)
{
    if (nvml.state != 0)
        return nvml.state > 0;
    nvml.state = -1;
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return 0;
    *(void **)&nvml.init = dlsym(lib, "nvmlInit_v2");
    *(void **)&nvml.by_pci_bus_id = dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&nvml.clock_info = dlsym(lib, "nvmlDeviceGetClockInfo");
    *(void **)&nvml.throttle_reasons = dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
    if (nvml.init == NULL || nvml.by_pci_bus_id == NULL || nvml.clock_info == NULL ||
        nvml.init() != 0) {
        dlclose(lib);
        return 0;
    }
    nvml.state = 1; /* the library stays loaded for the life of the process */
    return 1;
}

static nvml_device
nvml_device_of(int device)
{
    if (nvml.device_state[device] == 0) {
        char bus[32];
        nvml.device_state[device] = -1;
        if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess)
            (void)cudaGetLastError();
        else if (nvml.by_pci_bus_id(bus, &nvml.devices[device]) == 0)
            nvml.device_state[device] = 1;
    }
    return nvml.device_state[device] > 0 ? nvml.devices[device] : NULL;
}

/* A device word pair per device for the probe's result, allocated on first use and kept. */
static unsigned long long *probe_out[GP_MAX_DEVICES];

/* Probe kernel over 500 us: long enough that a 1 us global-timer tick costs < 0.2 %. */
static int
probe_mhz(int device, cudaStream_t stream, double *mhz)
{
    unsigned long long host[2] = {0, 0};
    cudaError_t err;
    if (probe_out[device] == NULL)
        GP_CUDA_CHECK(cudaMalloc((void **)&probe_out[device], sizeof host));
    gp_clock_probe_params p = {.window_ns = 500000, .out = probe_out[device]};
    GP_CUDA_CHECK(gp_launch_clock_probe(p, stream));
    GP_CUDA_CHECK(
        cudaMemcpyAsync(host, probe_out[device], sizeof host, cudaMemcpyDeviceToHost, stream));
    Py_BEGIN_ALLOW_THREADS
    err = cudaStreamSynchronize(stream);
    Py_END_ALLOW_THREADS
    GP_CUDA_CHECK(err);
    *mhz = host[1] ? (double)host[0] * 1e3 / (double)host[1] : 0.0;
    return 0;
error:
    return -1;
}

static PyObject *
sm_clock(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"device", "stream", "probe", NULL};
    int device, force_probe = 0;
    PyObject *stream_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "i|Op:_bench_sm_clock", kwlist, &device,
                                     &stream_obj, &force_probe))
        return NULL;
    cudaStream_t stream;
    if (gp_stream_from_object(stream_obj, &stream) < 0 || gp_require_device() < 0)
        return NULL;
    if (device < 0 || device >= gp_device_count() || device >= GP_MAX_DEVICES)
        return PyErr_Format(PyExc_ValueError, "device %d out of range", device);
    nvml_device h = (!force_probe && nvml_ready()) ? nvml_device_of(device) : NULL;
    unsigned int clock = 0;
    if (h != NULL && nvml.clock_info(h, GP_NVML_CLOCK_SM, &clock) == 0) {
        unsigned long long reasons = 0;
        if (nvml.throttle_reasons != NULL && nvml.throttle_reasons(h, &reasons) == 0)
            return Py_BuildValue("{s:d,s:s,s:K}", "mhz", (double)clock, "source", "nvml",
                                 "throttle_reasons", reasons);
        return Py_BuildValue("{s:d,s:s,s:O}", "mhz", (double)clock, "source", "nvml",
                             "throttle_reasons", Py_None);
    }
    int current = gp_current_device();
    if (current < 0)
        return NULL;
    if (current != device)
        return PyErr_Format(PyExc_ValueError,
                            "_bench_sm_clock: the probe runs on the current device (%d), not %d",
                            current, device);
    double mhz;
    if (probe_mhz(device, stream, &mhz) < 0)
        return NULL;
    return Py_BuildValue("{s:d,s:s,s:O}", "mhz", mhz, "source", "probe", "throttle_reasons",
                         Py_None);
}

static PyMethodDef clocks_methods[] = {
    {"_bench_sm_clock", (PyCFunction)(void (*)(void))sm_clock, METH_VARARGS | METH_KEYWORDS,
     "_bench_sm_clock(device, stream=None, probe=False) -> {mhz, source, throttle_reasons}\n"
     "The current SM clock from NVML, or from a probe kernel on `stream` (which it waits for)."},
    {NULL, NULL, 0, NULL},
};

int
gp_clocks_init(PyObject *module)
{
    return PyModule_AddFunctions(module, clocks_methods);
}
