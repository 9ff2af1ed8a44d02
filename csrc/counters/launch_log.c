/* Kernel launch log: names of launched kernels in launch order, while on; and the L2 flush
 * before each launch that cache_control="all" asks for.
 *
 * A runtime launch (cudaLaunchKernel, <<<>>>) may or may not also raise a driver launch callback
 * (cuLaunchKernel) inside it; either way it is logged once: the driver callback's name is taken
 * when one arrives inside a runtime launch, else the runtime callback's name at its exit.
 * Handlers run on the launching thread without the GIL; the log is guarded by a mutex. */
#include "launch_log.h"
#include "core/cupti_loader.h"
#include "core/demangle.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/l2_flush.h"
#include "harness/bench_kernels.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const gp_cupti_callback launch_callbacks[] = {
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync},
};
#define N_CALLBACKS (sizeof launch_callbacks / sizeof launch_callbacks[0])

static int handler_added;
static int on;              /* atomic: the log is recording */
static unsigned generation; /* atomic: bumped at each start, resets stale per-thread state */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char **names;
static size_t n_names, cap_names;
static int lost; /* an allocation failed: the log is incomplete */

/* Per thread: inside a runtime launch, whether a driver launch inside it was logged, and
 * whether this thread is launching the flush (its own launch callbacks are then ignored). */
static _Thread_local struct {
    unsigned generation;
    int in_runtime_launch;
    int logged_inside;
    int flushing;
} tls;

/* Flush before each launch (atomic), the flush read prepared with the GIL by _launch_log_flush,
 * and the first flush failure, raised by the next _launch_log_take (a callback cannot raise). */
static int flush_on;
static gp_read_params flush_params;
static int flush_device; /* the buffer's device: a launch on another one is not flushed */
static cudaError_t flush_err;
static const char *flush_call;

static void
append(const char *name)
{
    char *copy = strdup(name ? name : "?");
    pthread_mutex_lock(&lock);
    if (copy != NULL && n_names == cap_names) {
        size_t cap = cap_names ? 2 * cap_names : 64;
        char **grown = realloc(names, cap * sizeof *grown);
        if (grown != NULL) {
            names = grown;
            cap_names = cap;
        }
    }
    if (copy != NULL && n_names < cap_names) {
        names[n_names++] = copy;
    } else {
        free(copy);
        lost = 1;
    }
    pthread_mutex_unlock(&lock);
}

/* The L2 flush, outside any kernel's counted range: the device is idle before it (so it overlaps
 * no earlier kernel) and after it (so the next kernel starts on a flushed L2). The flush reads
 * twice the L2 (csrc/bench/devbuf.c, the buffer gpuprofile.benchmark flushes with); L1 and the
 * texture cache need no flush: they are invalidated for global data at every kernel boundary. */
static cudaError_t
flush_l2(const char **call)
{
    cudaError_t err;
    int device;
    *call = "cudaGetDevice (before the L2 flush)";
    if ((err = cudaGetDevice(&device)) != cudaSuccess)
        return err;
    /* the buffer lives on flush_device: read from another device it would fault */
    *call = "the L2 flush (a kernel launched on another device than the profiled one)";
    if (device != flush_device)
        return cudaErrorInvalidDevice;
    *call = "cudaDeviceSynchronize (before the L2 flush)";
    if ((err = cudaDeviceSynchronize()) != cudaSuccess)
        return err;
    *call = "gp_launch_l2_flush";
    if ((err = gp_launch_l2_flush(flush_params, 0)) != cudaSuccess)
        return err;
    *call = "cudaDeviceSynchronize (after the L2 flush)";
    return cudaDeviceSynchronize();
}

/* Called at the first callback of a launch (runtime enter, or a driver enter outside one),
 * before the launch: logs the flush kernel under its own name, so its auto range is known and
 * dropped. The flush's own launch callbacks come back here and are ignored (tls.flushing). */
static void
flush_before_launch(void)
{
    const char *call = NULL;
    tls.flushing = 1;
    cudaError_t err = flush_l2(&call);
    tls.flushing = 0;
    append(GP_L2_FLUSH_KERNEL);
    pthread_mutex_lock(&lock);
    if (err != cudaSuccess && flush_err == cudaSuccess) {
        flush_err = err;
        flush_call = call;
    }
    pthread_mutex_unlock(&lock);
}

static int
is_launch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    for (size_t k = 0; k < N_CALLBACKS; k++)
        if (launch_callbacks[k].domain == domain && launch_callbacks[k].cbid == cbid)
            return 1;
    return 0;
}

static void
handler(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *cbdata)
{
    if (tls.flushing || !__atomic_load_n(&on, __ATOMIC_ACQUIRE) || !is_launch(domain, cbid))
        return;
    const CUpti_CallbackData *d = cbdata;
    unsigned gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
    if (tls.generation != gen) {
        tls.generation = gen;
        tls.in_runtime_launch = tls.logged_inside = 0;
    }
    const int flush = __atomic_load_n(&flush_on, __ATOMIC_ACQUIRE);
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        if (d->callbackSite != CUPTI_API_ENTER)
            return;
        if (flush && !tls.in_runtime_launch)
            flush_before_launch();
        if (!tls.in_runtime_launch || !tls.logged_inside)
            append(d->symbolName);
        if (tls.in_runtime_launch)
            tls.logged_inside = 1;
        return;
    }
    if (d->callbackSite == CUPTI_API_ENTER) {
        if (flush)
            flush_before_launch();
        tls.in_runtime_launch = 1;
        tls.logged_inside = 0;
    } else if (tls.in_runtime_launch) {
        if (!tls.logged_inside)
            append(d->symbolName);
        tls.in_runtime_launch = tls.logged_inside = 0;
    }
}

static void
clear_log(void)
{
    pthread_mutex_lock(&lock);
    for (size_t k = 0; k < n_names; k++)
        free(names[k]);
    n_names = 0;
    lost = 0;
    flush_err = cudaSuccess;
    pthread_mutex_unlock(&lock);
}

/* _launch_log_start(): start logging launches (clears the log). */
static PyObject *
log_start(PyObject *module, PyObject *unused)
{
    if (__atomic_load_n(&on, __ATOMIC_ACQUIRE)) {
        PyErr_SetString(gp_GpuProfileError, "the launch log is already on");
        return NULL;
    }
    if (gp_cupti_subscribe() < 0)
        return NULL;
    if (!handler_added) {
        if (gp_cupti_add_handler(handler, NULL) < 0) {
            gp_cupti_release();
            return NULL;
        }
        handler_added = 1;
    }
    if (gp_cupti_callbacks_on(launch_callbacks, N_CALLBACKS) < 0) {
        gp_cupti_release();
        return NULL;
    }
    clear_log();
    __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&on, 1, __ATOMIC_RELEASE);
    Py_RETURN_NONE;
}

/* _launch_log_take() -> ([demangled names], complete): the names logged since the last take. */
static PyObject *
log_take(PyObject *module, PyObject *unused)
{
    pthread_mutex_lock(&lock);
    char **taken = names;
    size_t n = n_names;
    int complete = !lost;
    names = NULL;
    n_names = cap_names = 0;
    lost = 0;
    cudaError_t err = flush_err;
    const char *call = flush_call;
    flush_err = cudaSuccess;
    pthread_mutex_unlock(&lock);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t k = 0; k < n; k++) {
        PyObject *s = list ? gp_demangled(taken[k]) : NULL;
        if (s == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)k, s);
        free(taken[k]);
    }
    free(taken);
    if (list != NULL && err != cudaSuccess) {
        Py_DECREF(list);
        return gp_set_cuda_error(err, call, __FILE__, __LINE__);
    }
    return list ? Py_BuildValue("(NO)", list, complete ? Py_True : Py_False) : NULL;
}

/* _launch_log_stop(): stop logging; the launch callbacks go off unless another feature uses them.
 */
static PyObject *
log_stop(PyObject *module, PyObject *unused)
{
    __atomic_store_n(&flush_on, 0, __ATOMIC_RELEASE);
    if (!__atomic_exchange_n(&on, 0, __ATOMIC_ACQ_REL))
        Py_RETURN_NONE;
    clear_log();
    int rc = gp_cupti_callbacks_off(launch_callbacks, N_CALLBACKS);
    gp_cupti_release();
    if (rc < 0) {
        PyErr_SetString(gp_CuptiError,
                        "could not disable the launch callbacks (cuptiEnableCallback)");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* Prepares the flush read of the current device (GIL held: it may allocate and raise). */
static int
prepare_flush(void)
{
    int device;
    char *ptr;
    size_t bytes;
    if (gp_require_device() < 0)
        return -1;
    GP_CUDA_CHECK(cudaGetDevice(&device));
    if (gp_l2_flush_area(device, &ptr, &bytes) < 0)
        return -1;
    int blocks = gp_read_blocks(device);
    if (blocks < 0)
        return -1;
    flush_params = (gp_read_params){ptr, bytes, (uint32_t *)(ptr + bytes), blocks};
    flush_device = device;
    return 0;
error:
    return -1;
}

/* _launch_log_flush(on): while the log is on, flush L2 before each launch it logs (the flush
 * kernel is logged too, as GP_L2_FLUSH_KERNEL). Off again at _launch_log_stop. */
static PyObject *
log_flush(PyObject *module, PyObject *arg)
{
    int want = PyObject_IsTrue(arg);
    if (want < 0)
        return NULL;
    if (want && !__atomic_load_n(&on, __ATOMIC_ACQUIRE)) {
        PyErr_SetString(gp_GpuProfileError, "_launch_log_flush(True) needs the launch log on");
        return NULL;
    }
    if (want && prepare_flush() < 0)
        return NULL;
    __atomic_store_n(&flush_on, want, __ATOMIC_RELEASE);
    Py_RETURN_NONE;
}

/* _l2_flush(): flush L2 now and wait (before a pass, outside its range). */
static PyObject *
l2_flush(PyObject *module, PyObject *unused)
{
    const char *call = NULL;
    cudaError_t err;
    if (prepare_flush() < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    tls.flushing = 1; /* not one of the user's launches: the log leaves it out */
    err = flush_l2(&call);
    tls.flushing = 0;
    Py_END_ALLOW_THREADS
    if (err != cudaSuccess)
        return gp_set_cuda_error(err, call, __FILE__, __LINE__);
    Py_RETURN_NONE;
}

static PyMethodDef log_methods[] = {
    {"_launch_log_flush", log_flush, METH_O, "_launch_log_flush(on): flush L2 before each launch."},
    {"_l2_flush", l2_flush, METH_NOARGS, "Flush L2 (2x its size read) and wait for the device."},
    {"_launch_log_start", log_start, METH_NOARGS, "Start logging kernel launch names."},
    {"_launch_log_take", log_take, METH_NOARGS, "Names logged since the last take, and complete."},
    {"_launch_log_stop", log_stop, METH_NOARGS, "Stop logging launches."},
    {NULL, NULL, 0, NULL},
};

int
gp_launch_log_init(PyObject *module)
{
    if (PyModule_AddStringConstant(module, "_L2_FLUSH_KERNEL", GP_L2_FLUSH_KERNEL) < 0)
        return -1;
    return PyModule_AddFunctions(module, log_methods);
}
