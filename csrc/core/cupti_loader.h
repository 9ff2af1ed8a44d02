/* The one C-level owner of CUPTI in this process. CUPTI is loaded with dlopen on first use, never
 * at import: a CUPTI already loaded by another library (torch) is reused; otherwise it is searched
 * in GPUPROFILE_CUPTI_PATH (an override: the only place looked), the CUDA found at build time,
 * CUDA_HOME, /usr/local/cuda, and the CUDA wheels' folders on sys.path. Calls go through the
 * table `gp_cupti`; every call is checked with GP_CUPTI_CHECK (core/errors.h). */
#ifndef GP_CUPTI_LOADER_H
#define GP_CUPTI_LOADER_H

#include <Python.h>
#include <cupti.h>
#include <cupti_pcsampling.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h> /* C++ <string> include: satisfied by csrc/core/cxx_shim */
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

/* Every CUPTI function gpuprofile calls. Add a name here to use it as gp_cupti.<name>. */
#define GP_CUPTI_FUNCTIONS(X)                                                                      \
    X(cuptiGetVersion)                                                                             \
    X(cuptiGetResultString)                                                                        \
    X(cuptiSubscribe_v2)                                                                           \
    X(cuptiFinalize)                                                                               \
    X(cuptiUnsubscribe)                                                                            \
    X(cuptiEnableDomain)                                                                           \
    X(cuptiEnableCallback)                                                                         \
    X(cuptiActivityRegisterCallbacks)                                                              \
    X(cuptiActivityRegisterTimestampCallback)                                                      \
    X(cuptiActivityEnable)                                                                         \
    X(cuptiActivityDisable)                                                                        \
    X(cuptiActivityEnableRuntimeApi)                                                               \
    X(cuptiActivityEnableDriverApi)                                                                \
    X(cuptiGetCallbackName)                                                                        \
    X(cuptiActivityFlushAll)                                                                       \
    X(cuptiActivityGetNextRecord)                                                                  \
    X(cuptiActivityGetNumDroppedRecords)                                                           \
    X(cuptiActivityPushExternalCorrelationId)                                                      \
    X(cuptiActivityPopExternalCorrelationId)                                                       \
    X(cuptiGetStreamIdEx)                                                                          \
    GP_CUPTI_COUNTER_FUNCTIONS(X)

/* Hardware counters (profiler_host.c, profiler_target.c, range_profiler.c, pcsampling.c,
 * pmsampling.c, launch_log.c, cubins.c). */
#define GP_CUPTI_COUNTER_FUNCTIONS(X)                                                              \
    X(cuptiGetTimestamp)                                                                           \
    X(cuptiGetCallbackState)                                                                       \
    X(cuptiProfilerInitialize)                                                                     \
    X(cuptiProfilerDeviceSupported)                                                                \
    X(cuptiDeviceGetChipName)                                                                      \
    X(cuptiProfilerGetCounterAvailability)                                                         \
    X(cuptiProfilerHostInitialize)                                                                 \
    X(cuptiProfilerHostDeinitialize)                                                               \
    X(cuptiProfilerHostGetSupportedChips)                                                          \
    X(cuptiProfilerHostGetBaseMetrics)                                                             \
    X(cuptiProfilerHostGetSubMetrics)                                                              \
    X(cuptiProfilerHostGetMetricProperties)                                                        \
    X(cuptiProfilerHostConfigAddMetrics)                                                           \
    X(cuptiProfilerHostGetConfigImageSize)                                                         \
    X(cuptiProfilerHostGetConfigImage)                                                             \
    X(cuptiProfilerHostGetNumOfPasses)                                                             \
    X(cuptiProfilerHostEvaluateToGpuValues)                                                        \
    X(cuptiRangeProfilerEnable)                                                                    \
    X(cuptiRangeProfilerDisable)                                                                   \
    X(cuptiRangeProfilerGetCounterDataSize)                                                        \
    X(cuptiRangeProfilerCounterDataImageInitialize)                                                \
    X(cuptiRangeProfilerSetConfig)                                                                 \
    X(cuptiRangeProfilerStart)                                                                     \
    X(cuptiRangeProfilerStop)                                                                      \
    X(cuptiRangeProfilerPushRange)                                                                 \
    X(cuptiRangeProfilerPopRange)                                                                  \
    X(cuptiRangeProfilerDecodeData)                                                                \
    X(cuptiRangeProfilerGetCounterDataInfo)                                                        \
    X(cuptiRangeProfilerCounterDataGetRangeInfo)                                                   \
    X(cuptiPCSamplingEnable)                                                                       \
    X(cuptiPCSamplingDisable)                                                                      \
    X(cuptiPCSamplingStart)                                                                        \
    X(cuptiPCSamplingStop)                                                                         \
    X(cuptiPCSamplingGetData)                                                                      \
    X(cuptiPCSamplingGetNumStallReasons)                                                           \
    X(cuptiPCSamplingGetStallReasons)                                                              \
    X(cuptiPCSamplingSetConfigurationAttribute)                                                    \
    X(cuptiGetCubinCrc)                                                                            \
    X(cuptiGetSassToSourceCorrelation)                                                             \
    X(cuptiPmSamplingGetCounterAvailability)                                                       \
    X(cuptiPmSamplingEnable)                                                                       \
    X(cuptiPmSamplingDisable)                                                                      \
    X(cuptiPmSamplingSetConfig)                                                                    \
    X(cuptiPmSamplingGetCounterDataSize)                                                           \
    X(cuptiPmSamplingCounterDataImageInitialize)                                                   \
    X(cuptiPmSamplingStart)                                                                        \
    X(cuptiPmSamplingStop)                                                                         \
    X(cuptiPmSamplingDecodeData)                                                                   \
    X(cuptiPmSamplingGetCounterDataInfo)                                                           \
    X(cuptiPmSamplingCounterDataGetSampleInfo)

typedef struct {
#define GP_CUPTI_MEMBER(name) __typeof__(&name) name;
    GP_CUPTI_FUNCTIONS(GP_CUPTI_MEMBER)
#undef GP_CUPTI_MEMBER
} gp_cupti_api;

extern gp_cupti_api gp_cupti;

/* Loads CUPTI once; 0 on success, -1 with CuptiError saying where it looked. */
int gp_cupti_load(void);

/* CUPTI allows one callback subscriber per process; gpuprofile's is created here, once, and
 * shared by every gpuprofile feature through handlers. gp_cupti_subscribe() loads CUPTI if
 * needed and subscribes (once; later calls count users). torch.profiler (Kineto) keeps its
 * subscriber for the life of the process once it has run: when Kineto holds it but is not
 * recording (asked of the Python hook set by _set_foreign_profiler_check), gpuprofile takes
 * CUPTI over with cuptiFinalize, as Kineto's own TEARDOWN_CUPTI does, and subscribes (Kineto
 * re-registers its buffers and kinds whenever it starts again). Any other holder (Nsight, a
 * recording torch.profiler, proton) raises CuptiError naming it. 0 on success, -1 with an
 * exception. */
int gp_cupti_subscribe(void);
/* Each successful gp_cupti_subscribe() is paired with one gp_cupti_release(); the last release
 * unsubscribes, so another tool (torch.profiler) can use CUPTI later in the process. */
void gp_cupti_release(void);
CUpti_SubscriberHandle gp_cupti_subscriber(void);

/* Called by the dispatcher on CUPTI's calling thread, without the GIL: must not touch Python. */
typedef void (*gp_cupti_handler)(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *cbdata);
/* Adds/removes a handler (at most 16). Enabling the domains/callbacks it needs is the caller's
 * job (cuptiEnableDomain / cuptiEnableCallback on gp_cupti_subscriber()). */
int gp_cupti_add_handler(gp_cupti_handler handler, void *userdata);
void gp_cupti_remove_handler(gp_cupti_handler handler, void *userdata);

/* Callbacks enabled on the subscriber, counted per (domain, cbid): features that share one (the
 * launch log, Python lines) enable it once, and it is disabled when the last one is done. The
 * caller holds a gp_cupti_subscribe() claim across on/off; GIL held. on: 0, or -1 with
 * CuptiError and nothing enabled. */
typedef struct {
    CUpti_CallbackDomain domain;
    CUpti_CallbackId cbid;
} gp_cupti_callback;
int gp_cupti_callbacks_on(const gp_cupti_callback *cbs, size_t n);
/* -1 (no exception) if CUPTI refused to disable one; the counts drop regardless. */
int gp_cupti_callbacks_off(const gp_cupti_callback *cbs, size_t n);

int gp_cupti_loader_init(PyObject *module);

#endif
