/* gpuprofile._C: module glue only. Each concern lives in its own file and adds its functions
 * and types here through gp_<concern>_init.
 *
 * CUDA, CUPTI and the region store are process-global, so the module supports one interpreter
 * and is executed once per process. */
#include <Python.h>

#include "tracing/activity.h"
#include "workloads/attention_py.h"
#include "tracing/attribution.h"
#include "bench/bench.h"
#include "bench/clocks.h"
#include "bench/devbuf.h"
#include "bench/host_loop.h"
#include "cupti_loader.h"
#include "device.h"
#include "errors.h"
#include "workloads/launch.h"
#include "device_memory.h"
#include "counters/metrics.h"
#include "nvtx.h"
#include "regions/overhead.h"
#include "workloads/probes.h"
#include "regions/regions.h"

#ifndef GP_BUILD_CUDA_HOME
#define GP_BUILD_CUDA_HOME ""
#endif

/* One line per concern, in dependency order (errors first: the others raise its exceptions). */
static int (*const inits[])(PyObject *) = {
    gp_errors_init,
    gp_device_init,
    gp_regions_init,
    gp_nvtx_init,
    gp_launch_init,
    gp_cupti_loader_init,
    gp_overhead_init,
    gp_metrics_init,
    gp_activity_init,
    gp_attribution_init,
    gp_memory_init,
    gp_probes_init,
    gp_bench_init,
    gp_bench_host_init,
    gp_clocks_init,
    gp_devbuf_init,
    gp_attention_init,
};

static int
module_exec(PyObject *module)
{
    static int executed;
    if (executed) {
        PyErr_SetString(PyExc_ImportError,
                        "gpuprofile._C can be loaded once per process (CUDA state is global)");
        return -1;
    }
    for (size_t k = 0; k < sizeof inits / sizeof inits[0]; k++)
        if (inits[k](module) < 0)
            return -1;
    if (PyModule_AddStringConstant(module, "build_cuda_home", GP_BUILD_CUDA_HOME) < 0 ||
        PyModule_AddIntConstant(module, "build_cuda_version", CUDART_VERSION) < 0)
        return -1;
    executed = 1;
    return 0;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "gpuprofile._C",
    .m_doc = "gpuprofile's C core: regions, event pool, NVTX, CUPTI, kernel launchers.",
    .m_size = 0,
    .m_slots = module_slots,
};

PyMODINIT_FUNC
PyInit__C(void)
{
    return PyModuleDef_Init(&module_def);
}
