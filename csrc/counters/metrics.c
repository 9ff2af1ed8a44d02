/* Glue for the hardware-counter feature: one init per concern. */
#include "metrics.h"
#include "context.h"
#include "cubins.h"
#include "core/demangle.h"
#include "launch_log.h"
#include "pcsampling.h"
#include "pmsampling.h"
#include "profiler_host.h"
#include "profiler_target.h"
#include "range_profiler.h"
#include "region_metrics.h"
#include "workloads/workload.h"

int
gp_metrics_init(PyObject *module)
{
    if (gp_profiler_host_init(module) < 0 || gp_profiler_target_init(module) < 0 ||
        gp_range_profiler_init(module) < 0 || gp_launch_log_init(module) < 0 ||
        gp_region_metrics_init(module) < 0 || gp_pcsampling_init(module) < 0 ||
        gp_cubins_init(module) < 0 || gp_pmsampling_init(module) < 0 ||
        gp_demangle_init(module) < 0 || gp_workload_init(module) < 0 ||
        gp_context_init(module) < 0)
        return -1;
    return 0;
}
