/* Cubin capture. The handler runs on the loading thread without the GIL; the list is guarded by
 * a mutex and only grows (cubins are kept for the life of the process, up to a byte budget).
 * Capture runs during stalls() only, unless capture_cubins() pinned it on. */
#include "cubins.h"
#include "core/cupti_loader.h"
#include "core/errors.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Bounds the memory spent on copies: large frameworks load many big modules. */
#define GP_CUBIN_BUDGET ((size_t)1 << 30)

typedef struct {
    uint64_t crc;
    size_t size;
    void *data;
} cubin_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cubin_t *cubins;
static size_t n_cubins, cap_cubins, bytes_kept, skipped;
static int capturing;

static int
known(uint64_t crc)
{
    for (size_t k = 0; k < n_cubins; k++)
        if (cubins[k].crc == crc)
            return 1;
    return 0;
}

static void
keep(const char *cubin, size_t size)
{
    CUpti_GetCubinCrcParams p = {CUpti_GetCubinCrcParamsSize};
    p.cubinSize = size;
    p.cubin = cubin;
    if (gp_cupti.cuptiGetCubinCrc(&p) != CUPTI_SUCCESS)
        return;
    pthread_mutex_lock(&lock);
    if (!known(p.cubinCrc)) {
        void *copy = bytes_kept + size <= GP_CUBIN_BUDGET ? malloc(size) : NULL;
        if (copy != NULL && n_cubins == cap_cubins) {
            size_t cap = cap_cubins ? 2 * cap_cubins : 32;
            cubin_t *grown = realloc(cubins, cap * sizeof *grown);
            if (grown != NULL) {
                cubins = grown;
                cap_cubins = cap;
            }
        }
        if (copy != NULL && n_cubins < cap_cubins) {
            memcpy(copy, cubin, size);
            cubins[n_cubins++] = (cubin_t){p.cubinCrc, size, copy};
            bytes_kept += size;
        } else {
            free(copy);
            skipped++;
        }
    }
    pthread_mutex_unlock(&lock);
}

static void
handler(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *cbdata)
{
    if (domain != CUPTI_CB_DOMAIN_RESOURCE || cbid != CUPTI_CBID_RESOURCE_MODULE_LOADED)
        return;
    const CUpti_ResourceData *res = cbdata;
    const CUpti_ModuleResourceData *mod = res->resourceDescriptor;
    if (mod != NULL && mod->pCubin != NULL && mod->cubinSize > 0)
        keep(mod->pCubin, mod->cubinSize);
}

static const gp_cupti_callback loaded = {CUPTI_CB_DOMAIN_RESOURCE,
                                         CUPTI_CBID_RESOURCE_MODULE_LOADED};
static int pinned; /* capture_cubins() asked for it: it stays on until release_cubins() */

int
gp_cubins_capture_start(void)
{
    if (capturing)
        return 0;
    if (gp_cupti_subscribe() < 0)
        return -1;
    if (gp_cupti_add_handler(handler, NULL) < 0) {
        gp_cupti_release();
        return -1;
    }
    if (gp_cupti_callbacks_on(&loaded, 1) < 0) {
        gp_cupti_remove_handler(handler, NULL);
        gp_cupti_release();
        return -1;
    }
    capturing = 1;
    return 0;
}

/* Stops capturing (the cubins kept so far stay) and gives back the subscriber claim: held for
 * the rest of the process, it kept torch.profiler from ever initializing CUPTI if it had not
 * before (its kernels then read 0 in every later trace). */
static void
capture_stop(void)
{
    if (!capturing)
        return;
    (void)gp_cupti_callbacks_off(&loaded, 1);
    gp_cupti_remove_handler(handler, NULL);
    gp_cupti_release();
    capturing = 0;
}

int
gp_cubins_find(uint64_t crc, const void **cubin, size_t *size)
{
    int found = 0;
    pthread_mutex_lock(&lock);
    for (size_t k = 0; k < n_cubins && !found; k++)
        if (cubins[k].crc == crc) {
            *cubin = cubins[k].data;
            *size = cubins[k].size;
            found = 1;
        }
    pthread_mutex_unlock(&lock);
    return found;
}

/* _capture_cubins(pin=True) -> {"cubins": n, "bytes": b, "skipped": s}: start capturing
 * (idempotent); pinned, it stays on until _release_cubins(True). */
static PyObject *
capture_cubins(PyObject *module, PyObject *args)
{
    int pin = 1;
    if (!PyArg_ParseTuple(args, "|p:_capture_cubins", &pin))
        return NULL;
    if (gp_cubins_capture_start() < 0)
        return NULL;
    pinned |= pin;
    pthread_mutex_lock(&lock);
    size_t n = n_cubins, b = bytes_kept, s = skipped;
    pthread_mutex_unlock(&lock);
    return Py_BuildValue("{s:n,s:n,s:n}", "cubins", (Py_ssize_t)n, "bytes", (Py_ssize_t)b,
                         "skipped", (Py_ssize_t)s);
}

/* _release_cubins(unpin=False): stop a capture that nobody pinned (unpin: also a pinned one). */
static PyObject *
release_cubins(PyObject *module, PyObject *args)
{
    int unpin = 0;
    if (!PyArg_ParseTuple(args, "|p:_release_cubins", &unpin))
        return NULL;
    if (unpin)
        pinned = 0;
    if (!pinned)
        capture_stop();
    Py_RETURN_NONE;
}

static PyMethodDef cubin_methods[] = {
    {"_capture_cubins", capture_cubins, METH_VARARGS,
     "_capture_cubins(pin=True): capture the cubins of modules loaded from now on (for source "
     "lines in stalls()); pinned, until _release_cubins(True)."},
    {"_release_cubins", release_cubins, METH_VARARGS,
     "_release_cubins(unpin=False): stop capturing unless pinned (unpin: in any case)."},
    {NULL, NULL, 0, NULL},
};

int
gp_cubins_init(PyObject *module)
{
    return PyModule_AddFunctions(module, cubin_methods);
}
