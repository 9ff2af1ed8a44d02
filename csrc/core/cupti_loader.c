/* Finding, loading and binding libcupti at run time. */
#include "cupti_loader.h"
#include "errors.h"
#include "util.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef GP_BUILD_CUDA_HOME
#define GP_BUILD_CUDA_HOME ""
#endif

#define GP_CUPTI_SONAME "libcupti.so.13"
#define GP_CUPTI_MAJOR 13

gp_cupti_api gp_cupti;

static void *handle;
static char loaded_path[4096];
static int loaded_version;
static char how[64]; /* "reused" or "loaded" */

/* Where it looked and why each place failed, for the error message. */
static char tried[8192];

static void
note_tried(const char *path, const char *why)
{
    size_t used = strlen(tried);
    snprintf(tried + used, sizeof tried - used, "\n  %s: %s", path, why);
}

static void *
try_open(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
        const char *err = dlerror();
        note_tried(path, err && strstr(err, "No such file") ? "not found" : (err ? err : "?"));
    }
    return h;
}

/* Whether `h` is CUDA 13's CUPTI. A library found while searching that is not (a CUDA 12
   toolkit's libcupti.so, say) is passed over and the search goes on to the next place;
   GPUPROFILE_CUPTI_PATH's is taken as it is, and refused with its version by gp_cupti_load. */
static int
is_our_cupti(void *h, const char *path)
{
    CUptiResult (*get_version)(uint32_t *) =
        (CUptiResult(*)(uint32_t *))dlsym(h, "cuptiGetVersion");
    uint32_t version = 0;
    if (get_version == NULL) {
        note_tried(path, "not CUPTI (no cuptiGetVersion)");
        return 0;
    }
    if (get_version(&version) != CUPTI_SUCCESS || version / 10000 != GP_CUPTI_MAJOR) {
        char why[96];
        snprintf(why, sizeof why, "passed over: CUPTI API version %u, not CUDA %d's", version,
                 GP_CUPTI_MAJOR);
        note_tried(path, why);
        return 0;
    }
    return 1;
}

/* Tries <dir>/libcupti.so.13 and <dir>/libcupti.so; `searching`: pass over other versions. */
static void *
try_dir(const char *dir, int searching)
{
    if (dir == NULL || dir[0] == '\0')
        return NULL;
    char path[4096];
    static const char *names[] = {GP_CUPTI_SONAME, "libcupti.so"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        void *h = try_open(path);
        if (h != NULL && searching && !is_our_cupti(h, path)) {
            dlclose(h);
            h = NULL;
        }
        if (h != NULL)
            return h;
    }
    return NULL;
}

static void *
try_cuda_home(const char *home)
{
    if (home == NULL || home[0] == '\0')
        return NULL;
    char dir[4096];
    static const char *subs[] = {"lib64", "lib", "extras/CUPTI/lib64", "targets/x86_64-linux/lib"};
    for (size_t k = 0; k < sizeof subs / sizeof subs[0]; k++) {
        snprintf(dir, sizeof dir, "%s/%s", home, subs[k]);
        void *h = try_dir(dir, 1);
        if (h != NULL)
            return h;
    }
    return NULL;
}

/* The CUDA wheels put CUPTI in site-packages/nvidia/cu13/lib: nvidia-cuda-cupti 13 (the
   gpuprofile[cupti] extra, and torch's dependency) does; nvidia/cuda_cupti/lib is CUDA 12's
   layout, kept for a CUDA 13 CUPTI put there. */
static void *
try_wheels(void)
{
    PyObject *path = PySys_GetObject("path"); /* borrowed */
    if (path == NULL || !PyList_Check(path))
        return NULL;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(path); k++) {
        PyObject *entry = PyList_GET_ITEM(path, k);
        const char *base = PyUnicode_Check(entry) ? PyUnicode_AsUTF8(entry) : NULL;
        if (base == NULL) {
            PyErr_Clear();
            continue;
        }
        static const char *subs[] = {"nvidia/cu13/lib", "nvidia/cuda_cupti/lib"};
        for (size_t s = 0; s < sizeof subs / sizeof subs[0]; s++) {
            char dir[4096];
            snprintf(dir, sizeof dir, "%s/%s", base, subs[s]);
            char probe[4200];
            snprintf(probe, sizeof probe, "%s/%s", dir, GP_CUPTI_SONAME);
            FILE *f = fopen(probe, "rb");
            if (f == NULL)
                continue; /* most sys.path entries have no CUDA wheel: not worth listing */
            fclose(f);
            void *h = try_dir(dir, 1);
            if (h != NULL)
                return h;
        }
    }
    return NULL;
}

static void *
find_cupti(void)
{
    const char *override = getenv("GPUPROFILE_CUPTI_PATH");
    if (override != NULL && override[0] != '\0') {
        strcpy(how, "GPUPROFILE_CUPTI_PATH");
        void *h = try_open(override);
        return h ? h : try_dir(override, 0);
    }
    void *h = dlopen(GP_CUPTI_SONAME, RTLD_NOW | RTLD_NOLOAD);
    if (h != NULL) {
        strcpy(how, "already loaded in the process");
        return h;
    }
    note_tried(GP_CUPTI_SONAME, "not already loaded");
    strcpy(how, "loaded");
    /* The wheel first: installed beside gpuprofile (its [cupti] extra, or torch's dependency), it
       is the environment's own CUPTI, the one torch loads too, where a toolkit's is the
       machine's; a prebuilt gpuprofile's build-time CUDA is another machine's path. */
    if ((h = try_wheels()) != NULL || (h = try_cuda_home(GP_BUILD_CUDA_HOME)) != NULL ||
        (h = try_cuda_home(getenv("CUDA_HOME"))) || (h = try_cuda_home(getenv("CUDA_PATH"))) ||
        (h = try_cuda_home("/usr/local/cuda")))
        return h;
    return NULL;
}

/* 1 when get_version(&v) returns in a forked child (the child only makes that call and exits),
 * 0 when the child died of a signal, exited otherwise, or did not finish within 10 s (it is
 * killed then). Used only where no driver is present: no CUDA context exists to be forked. */
static int
survives_without_driver(CUptiResult (*get_version)(uint32_t *))
{
    pid_t pid = fork();
    if (pid < 0)
        return 0;
    if (pid == 0) {
        uint32_t v = 0;
        (void)get_version(&v);
        _exit(0);
    }
    int status = 0;
    for (int waited_ms = 0; waited_ms < 10000; waited_ms += 5) {
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid)
            return WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (done < 0 && errno != EINTR)
            return 0;
        struct timespec pause = {0, 5 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    kill(pid, SIGKILL);
    (void)waitpid(pid, &status, 0);
    return 0;
}

int
gp_cupti_load(void)
{
    if (handle != NULL)
        return 0;
    tried[0] = '\0';
    void *h = find_cupti();
    if (h == NULL) {
        PyErr_Format(gp_CuptiError,
                     "CUPTI (%s) not found; looked in:%s\nInstall the CUDA toolkit's CUPTI or the "
                     "nvidia-cuda-cupti wheel, or set GPUPROFILE_CUPTI_PATH to libcupti.so.",
                     GP_CUPTI_SONAME, tried);
        return -1;
    }
    gp_cupti_api api;
#define GP_CUPTI_BIND(name)                                                                        \
    api.name = (__typeof__(&name))dlsym(h, #name);                                                 \
    if (api.name == NULL) {                                                                        \
        PyErr_Format(gp_CuptiError,                                                                \
                     "the CUPTI library lacks %s: it is too old for gpuprofile "                   \
                     "(CUDA %d's CUPTI is needed)",                                                \
                     #name, GP_CUPTI_MAJOR);                                                       \
        dlclose(h);                                                                                \
        return -1;                                                                                 \
    }
    GP_CUPTI_FUNCTIONS(GP_CUPTI_BIND)
#undef GP_CUPTI_BIND
    uint32_t version = 0;
    /* Without a driver, CUPTI 13.2 (13.2.86, torch's dependency in late 2026) recurses through
       cuptiGetResultString in every entry point until the stack overflows: it fails to load
       libcuda.so.1 and formats that failure with itself. 13.0, 13.1, 13.3 and 13.5 return an
       error instead, and their host-side APIs (metric validation) work without a driver. So
       where the driver library does not load, CUPTI's first call runs in a forked child first. */
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (driver == NULL)
        driver = dlopen("libcuda.so.1", RTLD_LAZY);
    if (driver != NULL)
        dlclose(driver); /* the runtime holds it too, once it is loaded */
    else if (!survives_without_driver(api.cuptiGetVersion)) {
        Dl_info where;
        PyErr_Format(gp_NoDeviceError,
                     "no usable CUDA device: no NVIDIA driver found, and the CUPTI library %s "
                     "crashes without one (CUPTI 13.2 does), so it is not used. Without a driver, set "
                     "GPUPROFILE_CUPTI_PATH to another CUDA 13 CUPTI (a toolkit's) for offline "
                     "metric validation.",
                     dladdr((void *)api.cuptiGetVersion, &where) && where.dli_fname
                         ? where.dli_fname : "found");
        dlclose(h);
        return -1;
    }
    if (api.cuptiGetVersion(&version) != CUPTI_SUCCESS && driver == NULL) {
        PyErr_SetString(gp_NoDeviceError, "no usable CUDA device: no NVIDIA driver found (and this "
                        "CUPTI answers nothing without one, not even its version)");
        dlclose(h);
        return -1;
    }
    if (version / 10000 != GP_CUPTI_MAJOR) {
        PyErr_Format(gp_CuptiError,
                     "CUPTI API version %u is not CUDA %d's (gpuprofile was built against %d); "
                     "point GPUPROFILE_CUPTI_PATH at CUDA %d's libcupti.so.%d",
                     version, GP_CUPTI_MAJOR, CUPTI_API_VERSION, GP_CUPTI_MAJOR, GP_CUPTI_MAJOR);
        dlclose(h);
        return -1;
    }
    Dl_info info;
    if (dladdr((void *)api.cuptiGetVersion, &info) && info.dli_fname)
        snprintf(loaded_path, sizeof loaded_path, "%s", info.dli_fname);
    gp_cupti = api;
    loaded_version = (int)version;
    handle = h;
    return 0;
}

PyObject *
gp_set_cupti_error(CUptiResult res, const char *call, const char *file, int line)
{
    const char *text = NULL;
    if (gp_cupti.cuptiGetResultString == NULL ||
        gp_cupti.cuptiGetResultString(res, &text) != CUPTI_SUCCESS || text == NULL)
        text = "unknown CUPTI error";
    const char *hint = "";
    if (res == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        hint = " (another profiler holds CUPTI in this process: torch.profiler, Triton's proton, "
               "Nsight Systems/Compute or DCGM; stop it first. Regions and benchmark() keep "
               "working without CUPTI)";
    else if (res == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
        hint = " (GPU performance counters need admin rights: run as root, or load the driver "
               "with NVreg_RestrictProfilingToAdminUsers=0; see "
               "https://developer.nvidia.com/ERR_NVGPUCTRPERM)";
    else if (res == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES)
        hint = " (this virtual GPU does not expose performance counters to the guest: the host "
               "must enable profiling for the vGPU)";
    else if (res == CUPTI_ERROR_HARDWARE_BUSY)
        hint = " (the GPU's performance counters are held by another profiler: Nsight Compute, "
               "DCGM profiling metrics (pause them with `dcgmi profile --pause`), another process, "
               "or another gpuprofile counter collection still running in this process)";
    PyErr_Format(gp_CuptiError, "%s failed: %s (%d)%s [%s:%d]", call, text, (int)res, hint, file,
                 line);
    return NULL;
}

/* ---- the process's one subscriber ---------------------------------------------------------- */

#define GP_MAX_HANDLERS 16

static CUpti_SubscriberHandle subscriber;
static struct {
    gp_cupti_handler fn;
    void *userdata;
} handlers[GP_MAX_HANDLERS];

static void CUPTIAPI
dispatch(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *cbdata)
{
    for (int k = 0; k < GP_MAX_HANDLERS; k++) {
        gp_cupti_handler fn = __atomic_load_n(&handlers[k].fn, __ATOMIC_ACQUIRE);
        if (fn != NULL)
            fn(handlers[k].userdata, domain, cbid, cbdata);
    }
}

/* Best guess at who else holds CUPTI, for the error message, and whether it is a tool injected
 * from outside the process (never displaced). */
static const char *
likely_holder(int *injected)
{
    *injected = 1;
    if (getenv("NSYS_PROFILING_SESSION_ID") || getenv("NSYS_LAUNCH_ID"))
        return "Nsight Systems (nsys)";
    if (getenv("NV_COMPUTE_PROFILER_PERFWORKS_DIR") || getenv("NV_NSIGHT_INJECTION_TRANSPORT_TYPE"))
        return "Nsight Compute (ncu)";
    const char *inj = getenv("CUDA_INJECTION64_PATH");
    if (inj != NULL && inj[0] != '\0')
        return "the tool named in CUDA_INJECTION64_PATH";
    *injected = 0;
    PyObject *modules = PySys_GetObject("modules"); /* borrowed */
    if (modules != NULL && PyDict_Check(modules)) {
        if (PyDict_GetItemString(modules, "triton.profiler") != NULL)
            return "Triton's proton profiler";
        if (PyDict_GetItemString(modules, "torch") != NULL)
            return "torch.profiler (Kineto)";
    }
    return "another profiler in this process";
}

static int subscriber_users;

#define GP_MAX_CALLBACKS 1024 /* regions watch about 250 calls (attribution.c) */
static struct {
    gp_cupti_callback id;
    int count;
} enabled[GP_MAX_CALLBACKS];
static size_t n_enabled;
static int takeovers;           /* times an idle Kineto subscriber was displaced */
static PyObject *foreign_check; /* () -> bool: is torch.profiler recording now? */
static char last_holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1];

static CUptiResult
subscribe_once(CUpti_SubscriberHandle *h)
{
    CUpti_SubscriberParams params = {0};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "gpuprofile";
    params.oldSubscriberName = last_holder;
    params.oldSubscriberSize = sizeof last_holder - 1;
    last_holder[0] = '\0';
    return gp_cupti.cuptiSubscribe_v2(h, dispatch, NULL, &params);
}

/* What the holder is: 1 torch.profiler's Kineto, not recording (its subscriber is a leftover that
 * gpuprofile may displace); 2 Kineto, recording now; 0 anything else, or takeover switched off
 * (GPUPROFILE_CUPTI_TAKEOVER=0). -1 with an exception if the check itself failed. */
static int
kineto_state(const char *holder, int injected)
{
    const char *env = getenv("GPUPROFILE_CUPTI_TAKEOVER");
    if (injected || strcmp(holder, "torch.profiler (Kineto)") != 0 || foreign_check == NULL ||
        (env != NULL && strcmp(env, "0") == 0))
        return 0;
    PyObject *check = Py_NewRef(foreign_check); /* it may install another while it runs */
    PyObject *busy = PyObject_CallNoArgs(check);
    Py_DECREF(check);
    if (busy == NULL)
        return -1;
    int recording = PyObject_IsTrue(busy);
    Py_DECREF(busy);
    return recording < 0 ? -1 : recording ? 2 : 1;
}

static int
busy_error(const char *holder, int recording)
{
    PyErr_Format(
        gp_CuptiError,
        "CUPTI is already in use in this process by %s%s%s%s: only one CUPTI subscriber "
        "can exist per process. %s Regions and benchmark() keep working without CUPTI.",
        holder, last_holder[0] ? " (CUPTI names it '" : "", last_holder, last_holder[0] ? "')" : "",
        recording ? "It is recording now: stop it first, then call again."
                  : "Stop that profiler (or run gpuprofile's tracing/metrics in a separate "
                    "process).");
    return -1;
}

int
gp_cupti_subscribe(void)
{
    if (subscriber != NULL) {
        subscriber_users++;
        return 0;
    }
    if (gp_cupti_load() < 0)
        return -1;
    CUpti_SubscriberHandle h = NULL;
    CUptiResult res = subscribe_once(&h);
    if (res == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        int injected;
        const char *holder = likely_holder(&injected);
        int state = kineto_state(holder, injected);
        if (state < 0)
            return -1;
        if (state != 1)
            return busy_error(holder, state == 2);
        GP_CUPTI_CHECK(gp_cupti.cuptiFinalize());
        takeovers++;
        res = subscribe_once(&h);
        if (res == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
            return busy_error(holder, 0);
    }
    if (res != CUPTI_SUCCESS) {
        gp_set_cupti_error(res, "cuptiSubscribe_v2", __FILE__, __LINE__);
        return -1;
    }
    subscriber = h;
    subscriber_users = 1;
    return 0;
error:
    return -1;
}

void
gp_cupti_release(void)
{
    if (subscriber_users == 0 || --subscriber_users > 0)
        return;
    (void)gp_cupti.cuptiUnsubscribe(subscriber);
    subscriber = NULL;
    n_enabled = 0; /* a new subscriber starts with every callback off */
}

CUpti_SubscriberHandle
gp_cupti_subscriber(void)
{
    return subscriber;
}

static int
find_enabled(const gp_cupti_callback *cb)
{
    for (size_t k = 0; k < n_enabled; k++)
        if (enabled[k].id.domain == cb->domain && enabled[k].id.cbid == cb->cbid)
            return (int)k;
    return -1;
}

int
gp_cupti_callbacks_off(const gp_cupti_callback *cbs, size_t n)
{
    int rc = 0;
    for (size_t k = 0; k < n; k++) {
        int at = find_enabled(&cbs[k]);
        if (at < 0 || --enabled[at].count > 0)
            continue;
        if (subscriber != NULL && gp_cupti.cuptiEnableCallback(0, subscriber, cbs[k].domain,
                                                               cbs[k].cbid) != CUPTI_SUCCESS)
            rc = -1;
        enabled[at] = enabled[--n_enabled];
    }
    return rc;
}

int
gp_cupti_callbacks_on(const gp_cupti_callback *cbs, size_t n)
{
    size_t k = 0;
    for (; k < n; k++) {
        int at = find_enabled(&cbs[k]);
        if (at >= 0) {
            enabled[at].count++;
            continue;
        }
        if (n_enabled == GP_MAX_CALLBACKS) {
            PyErr_SetString(gp_CuptiError, "too many CUPTI callbacks enabled");
            goto error;
        }
        GP_CUPTI_CHECK(gp_cupti.cuptiEnableCallback(1, subscriber, cbs[k].domain, cbs[k].cbid));
        enabled[n_enabled].id = cbs[k];
        enabled[n_enabled++].count = 1;
    }
    return 0;
error:
    (void)gp_cupti_callbacks_off(cbs, k);
    return -1;
}

int
gp_cupti_add_handler(gp_cupti_handler handler, void *userdata)
{
    for (int k = 0; k < GP_MAX_HANDLERS; k++)
        if (handlers[k].fn == NULL) {
            handlers[k].userdata = userdata;
            __atomic_store_n(&handlers[k].fn, handler, __ATOMIC_RELEASE);
            return 0;
        }
    PyErr_SetString(gp_CuptiError, "too many CUPTI callback handlers");
    return -1;
}

void
gp_cupti_remove_handler(gp_cupti_handler handler, void *userdata)
{
    for (int k = 0; k < GP_MAX_HANDLERS; k++)
        if (handlers[k].fn == handler && handlers[k].userdata == userdata)
            __atomic_store_n(&handlers[k].fn, NULL, __ATOMIC_RELEASE);
}

/* _cupti_info() -> dict: load CUPTI if possible and say what was found (never raises). */
static PyObject *
cupti_info(PyObject *module, PyObject *unused)
{
    if (gp_cupti_load() < 0) {
        PyObject *exc = gp_take_exception();
        PyObject *msg = exc ? PyObject_Str(exc) : NULL;
        Py_XDECREF(exc);
        PyObject *d = Py_BuildValue("{s:O,s:O}", "found", Py_False, "error", msg ? msg : Py_None);
        Py_XDECREF(msg);
        return d;
    }
    return Py_BuildValue("{s:O,s:s,s:i,s:s}", "found", Py_True, "path", loaded_path, "version",
                         loaded_version, "how", how);
}

/* _set_foreign_profiler_check(fn): fn() -> bool says whether torch.profiler records now. */
static PyObject *
set_foreign_check(PyObject *module, PyObject *fn)
{
    if (fn != Py_None && !PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "_set_foreign_profiler_check takes a callable or None");
        return NULL;
    }
    Py_XSETREF(foreign_check, fn == Py_None ? NULL : Py_NewRef(fn));
    Py_RETURN_NONE;
}

static PyObject *
subscriber_state(PyObject *module, PyObject *unused)
{
    return Py_BuildValue("{s:O,s:i,s:i,s:s}", "subscribed", subscriber ? Py_True : Py_False,
                         "users", subscriber_users, "takeovers", takeovers, "last_holder",
                         last_holder);
}

static PyMethodDef loader_methods[] = {
    {"_cupti_info", cupti_info, METH_NOARGS, "Load CUPTI if possible; report path and version."},
    {"_set_foreign_profiler_check", set_foreign_check, METH_O,
     "Set the callable that says whether torch.profiler is recording (takeover guard)."},
    {"_subscriber_state", subscriber_state, METH_NOARGS,
     "Whether gpuprofile holds CUPTI's subscriber, its users, takeovers of an idle Kineto."},
    {NULL, NULL, 0, NULL},
};

int
gp_cupti_loader_init(PyObject *module)
{
    return PyModule_AddFunctions(module, loader_methods);
}
