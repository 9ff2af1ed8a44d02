/* Interruptible waits for the GPU (gpu_wait.h). */
#include "gpu_wait.h"
#include "device.h"
#include "errors.h"
#include "events.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

/* How often the caller wakes up to check for signals while the GPU works. */
#define GP_WAIT_POLL_NS 50000000L

typedef CUresult (*primary_ctx_state_fn)(CUdevice dev, unsigned int *flags, int *active);

/* Shared by the caller and the helper thread; whoever drops the last reference frees it. The
 * helper synchronizes `devices`, or, where `event` is set, that event (and destroys it). */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs, done, n;
    int devices[GP_MAX_DEVICES];
    cudaEvent_t event;
    cudaError_t err;
    int failed_device;
} waiter_t;

/* Devices with an active primary context: synchronizing any other would create a context. Falls
 * back to the calling thread's current device when the driver entry point is unavailable. */
static int
active_devices(int *out)
{
    static primary_ctx_state_fn state_fn;
    static int looked_up;
    if (!looked_up) {
        void *fn = NULL;
        enum cudaDriverEntryPointQueryResult status;
        if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, 12000,
                                             cudaEnableDefault, &status) == cudaSuccess &&
            status == cudaDriverEntryPointSuccess)
            state_fn = (primary_ctx_state_fn)fn;
        (void)cudaGetLastError();
        looked_up = 1;
    }
    int count = 0, n = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    if (state_fn == NULL) {
        int dev;
        if (cudaGetDevice(&dev) == cudaSuccess)
            out[n++] = dev;
        (void)cudaGetLastError();
        return n;
    }
    for (int d = 0; d < count && d < GP_MAX_DEVICES; d++) {
        unsigned flags = 0;
        int active = 0;
        if (state_fn((CUdevice)d, &flags, &active) == CUDA_SUCCESS && active)
            out[n++] = d;
    }
    return n;
}

static void
waiter_release(waiter_t *w)
{
    pthread_mutex_lock(&w->mu);
    int last = --w->refs == 0;
    pthread_mutex_unlock(&w->mu);
    if (last) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        free(w);
    }
}

static void *
wait_thread(void *arg)
{
    waiter_t *w = arg;
    cudaError_t first = cudaSuccess;
    int failed = -1;
    if (w->event != NULL) {
        /* the event's device: the helper thread starts on device 0 */
        first = w->n == 1 ? cudaSetDevice(w->devices[0]) : cudaSuccess;
        if (first == cudaSuccess)
            first = cudaEventSynchronize(w->event);
        (void)cudaEventDestroy(w->event);
        failed = first == cudaSuccess ? -1 : w->devices[0];
    }
    for (int k = 0; w->event == NULL && k < w->n; k++) {
        cudaError_t err = cudaSetDevice(w->devices[k]);
        if (err == cudaSuccess)
            err = cudaDeviceSynchronize();
        if (err != cudaSuccess && first == cudaSuccess) {
            first = err;
            failed = w->devices[k];
        }
    }
    pthread_mutex_lock(&w->mu);
    w->err = first;
    w->failed_device = failed;
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    waiter_release(w);
    return NULL;
}

/* Waits until the helper is done (1) or a poll interval passed (0); GIL released. */
static int
wait_a_while(waiter_t *w)
{
    int done;
    Py_BEGIN_ALLOW_THREADS
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += GP_WAIT_POLL_NS;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&w->mu);
    while (!w->done && pthread_cond_timedwait(&w->cv, &w->mu, &until) != ETIMEDOUT) {
    }
    done = w->done;
    pthread_mutex_unlock(&w->mu);
    Py_END_ALLOW_THREADS
    return done;
}

static int
report(cudaError_t err, int device, const char *what)
{
    if (err == cudaSuccess)
        return 0;
    char call[160];
    if (what != NULL)
        snprintf(call, sizeof call, "%s", what);
    else
        snprintf(call, sizeof call, "cudaDeviceSynchronize() on device %d", device);
    gp_set_cuda_error(err, call, __FILE__, __LINE__);
    return -1;
}

/* Runs the helper on w (filled in by the caller, refs not yet set) and waits for it, polling for
 * signals; frees w. */
static int
run_waiter(waiter_t *w, const char *what)
{
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->refs = 2;
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int started = pthread_create(&thread, &attr, wait_thread, w) == 0;
    pthread_attr_destroy(&attr);
    if (!started) { /* no thread to spare: wait here, not interruptible */
        Py_BEGIN_ALLOW_THREADS
        wait_thread(w); /* drops the helper's reference */
        Py_END_ALLOW_THREADS
    } else {
        while (!wait_a_while(w))
            if (PyErr_CheckSignals() < 0) {
                waiter_release(w);
                return -1;
            }
    }
    cudaError_t err = w->err;
    int device = w->failed_device;
    waiter_release(w);
    return report(err, device, what);
}

static waiter_t *
new_waiter(void)
{
    waiter_t *w = calloc(1, sizeof *w);
    if (w == NULL)
        PyErr_NoMemory();
    return w;
}

int
gp_wait_devices(void)
{
    waiter_t *w = new_waiter();
    if (w == NULL)
        return -1;
    w->n = active_devices(w->devices);
    if (w->n == 0) {
        free(w);
        return 0;
    }
    return run_waiter(w, NULL);
}

int
gp_wait_device(const char *what)
{
    waiter_t *w = new_waiter();
    if (w == NULL)
        return -1;
    cudaError_t err = cudaGetDevice(&w->devices[0]);
    if (err != cudaSuccess) {
        free(w);
        return report(err, -1, "cudaGetDevice");
    }
    w->n = 1;
    return run_waiter(w, what);
}

int
gp_wait_stream(cudaStream_t stream, const char *what)
{
    waiter_t *w = new_waiter();
    if (w == NULL)
        return -1;
    /* The event lives on the stream's device (a stream of another device than the current one
     * takes no event of this one). */
    gp_device_guard guard = {0, 0};
    const int default_stream = stream == (cudaStream_t)0 || stream == cudaStreamLegacy ||
                               stream == cudaStreamPerThread;
    cudaError_t err = default_stream ? cudaGetDevice(&w->devices[0])
                                     : cudaStreamGetDevice(stream, &w->devices[0]);
    if (err != cudaSuccess) {
        free(w);
        return report(err, -1, "cudaStreamGetDevice");
    }
    if (gp_device_guard_enter(&guard, w->devices[0]) < 0) {
        free(w);
        return -1;
    }
    err = cudaEventCreateWithFlags(&w->event, cudaEventDisableTiming);
    if (err == cudaSuccess && (err = cudaEventRecord(w->event, stream)) != cudaSuccess)
        (void)cudaEventDestroy(w->event);
    gp_device_guard_exit(&guard);
    if (err != cudaSuccess) {
        free(w);
        return report(err, -1, what);
    }
    w->n = 1;
    return run_waiter(w, what);
}
