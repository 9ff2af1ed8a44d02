/* gpuprofile._C: module glue only. Each concern lives in its own file and adds its functions
 * and types here through gp_<concern>_init, all listed in `inits` below.
 *
 * CUDA, CUPTI and the region store are process-global, so the module supports one interpreter
 * and is executed once per process. */
#include <Python.h>

#include "bench/bench.h"
#include "bench/clocks.h"
#include "bench/devbuf.h"
#include "bench/host_loop.h"
#include "core/context.h"
#include "core/cupti_loader.h"
#include "core/demangle.h"
#include "core/device.h"
#include "core/device_memory.h"
#include "core/errors.h"
#include "core/nvtx.h"
#include "core/streams.h"
#include "counters/cubins.h"
#include "counters/launch_log.h"
#include "counters/pcsampling.h"
#include "counters/pmsampling.h"
#include "counters/profiler_host.h"
#include "counters/profiler_target.h"
#include "counters/range_profiler.h"
#include "counters/region_metrics.h"
#include "regions/overhead.h"
#include "regions/regions.h"
#include "tracing/activity.h"
#include "tracing/attribution.h"
#include "tracing/autograd.h"
#include "tracing/pylines.h"
#include "tracing/records.h"
#include "workloads/attention_py.h"
#include "workloads/device_array.h"
#include "workloads/launch.h"
#include "workloads/probes.h"
#include "workloads/workload.h"

#ifndef GP_BUILD_CUDA_HOME
#define GP_BUILD_CUDA_HOME ""
#endif

/* Every concern that adds functions, types or constants to the module: one line each, by layer
 * (docs/architecture.md), in dependency order. errors comes first (the others raise its
 * exceptions). Features install their hooks into the layers below from their own init
 * (attribution.c into activity.c, region_metrics.c into regions.c).
 * clang-format would pack the list into columns. */
/* clang-format off */
static int (*const inits[])(PyObject *) = {
    /* core */
    gp_errors_init,
    gp_device_init,
    gp_device_memory_init,
    gp_nvtx_init,
    gp_cupti_loader_init,
    gp_demangle_init,
    gp_context_init,
    gp_streams_init,
    /* regions */
    gp_regions_init,
    gp_overhead_init,
    /* hardware counters */
    gp_profiler_host_init,
    gp_profiler_target_init,
    gp_range_profiler_init,
    gp_launch_log_init,
    gp_region_metrics_init,
    gp_pcsampling_init,
    gp_cubins_init,
    gp_pmsampling_init,
    /* tracing */
    gp_records_init,
    gp_activity_init,
    gp_attribution_init,
    gp_autograd_init,
    gp_pylines_init,
    /* benchmark */
    gp_bench_init,
    gp_bench_host_init,
    gp_clocks_init,
    gp_devbuf_init,
    /* bundled kernels and workloads */
    gp_launch_init,
    gp_probes_init,
    gp_workload_init,
    gp_device_array_init,
    gp_attention_init,
};
/* clang-format on */

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
