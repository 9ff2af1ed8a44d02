/* Per-thread region stacks, enter and exit (stacks.h). */
#include "stacks.h"
#include "store.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/events.h"
#include "core/util.h"

#include <math.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    gp_region *region; /* strong reference */
    int64_t rec;       /* -1: entered while disabled */
} frame_t;

typedef struct {
    frame_t *frames;
    int n, cap;
    int depth; /* frames with a record */
    uint64_t id;
} thread_t;

static _Thread_local thread_t *tls;
static pthread_key_t tls_key;

/* A thread's exit (no GIL): regions it left open go to the store as orphans, closed as failed by
 * the next records() or reset(); frames without a record only hold a reference, handed over too. */
static void
thread_free(void *p)
{
    thread_t *t = p;
    for (int k = t->n - 1; k >= 0; k--)
        gp_store_orphan(t->frames[k].rec, (PyObject *)t->frames[k].region);
    free(t->frames);
    free(t);
}

static thread_t *
thread_state(void)
{
    if (tls != NULL)
        return tls;
    thread_t *t = calloc(1, sizeof *t);
    if (t == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    t->id = PyThread_get_thread_native_id();
    pthread_setspecific(tls_key, t);
    tls = t;
    return t;
}

static int
push_frame(thread_t *t, gp_region *region, int64_t rec)
{
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        frame_t *f = realloc(t->frames, (size_t)cap * sizeof *f);
        if (f == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->frames = f;
        t->cap = cap;
    }
    t->frames[t->n].region = (gp_region *)Py_NewRef(region);
    t->frames[t->n].rec = rec;
    t->n++;
    if (rec >= 0)
        t->depth++;
    return 0;
}

static int
region_device(gp_region *self)
{
    if (self->device >= 0)
        return self->device;
    if (self->stream == 0)
        return gp_current_device();
    int device = 0;
    GP_CUDA_CHECK(cudaStreamGetDevice(self->stream, &device));
    if (device >= GP_MAX_DEVICES)
        return gp_current_device(); /* reports the limit */
    self->device = device;
    return device;
error:
    return -1;
}

static int64_t
innermost_record(thread_t *t)
{
    for (int k = t->n - 1; k >= 0; k--)
        if (t->frames[k].rec >= 0)
            return t->frames[k].rec;
    return -1;
}

/* Undoes an enter whose observers or start event failed (observers already told to exit). */
static void
abandon_enter(thread_t *t, gp_region *self, int64_t i, int device, cudaEvent_t ev[2])
{
    /* Observers run Python, which may have left regions open above this one's frame: remove
     * this frame, wherever it is, not the top one. */
    for (int k = t->n - 1; k >= 0; k--)
        if (t->frames[k].rec == i) {
            memmove(&t->frames[k], &t->frames[k + 1], (size_t)(t->n - k - 1) * sizeof *t->frames);
            t->n--;
            break;
        }
    t->depth--;
    Py_DECREF(self);
    gp_store.open--;
    if (device >= 0)
        gp_event_pool_give(device, 2, ev);
    /* Observers may run Python, which may have entered regions after this one: drop the
     * record only if it is still the last, otherwise keep it as a failed record. */
    if ((size_t)i == gp_store.n - 1) {
        gp_store.n--;
        Py_DECREF(gp_store.recs[i].name);
    } else {
        gp_store.recs[i].state = REC_DONE;
        gp_store.recs[i].flags |= REC_FAILED;
    }
}

/* Observers hear of the record before its start event is recorded (and of its end after the
 * stop event): while tracing, both cudaEventRecord calls then carry the region's external
 * correlation id, which is how a trace finds the region's interval on the GPU clock. */
int
gp_region_enter(gp_region *self)
{
    thread_t *t = thread_state();
    if (t == NULL)
        return -1;
    if (!gp_regions_enabled)
        return push_frame(t, self, -1);

    int device = -1;
    cudaEvent_t ev[2] = {0, 0};
    if (gp_device_count() > 0) {
        if (gp_require_device() < 0)
            return -1;
        device = region_device(self);
        if (device < 0 || gp_store_acquire_events(device, ev) < 0)
            return -1;
    }
    int64_t parent = innermost_record(t);
    int64_t i = gp_store_append();
    if (i < 0 || push_frame(t, self, i) < 0) {
        if (i >= 0)
            gp_store.n--;
        if (device >= 0)
            gp_event_pool_give(device, 2, ev);
        return -1;
    }
    gp_record *r = &gp_store.recs[i];
    r->name = Py_NewRef(self->name);
    r->parent = parent;
    r->thread = t->id;
    r->depth = t->depth - 1;
    r->device = (int16_t)device;
    r->ev[0] = ev[0];
    r->ev[1] = ev[1];
    r->stream = self->stream;
    r->gpu_ms = NAN;
    r->host_end_ns = 0;
    r->state = REC_OPEN;
    r->flags = self->memory ? REC_MEMORY : 0;
    gp_store.open++;
    if (gp_regions_n_observers > 0 && gp_store_notify_enter(i) < 0) {
        abandon_enter(t, self, i, device, ev);
        return -1;
    }
    if (device >= 0) {
        cudaError_t err = cudaEventRecord(ev[0], self->stream);
        if (err != cudaSuccess) {
            if (gp_regions_n_observers > 0)
                gp_store_notify_exit(i);
            abandon_enter(t, self, i, device, ev);
            char call[320];
            snprintf(call, sizeof call, "entering region '%.200s': cudaEventRecord(start, stream)",
                     self->name_utf8);
            gp_set_cuda_error(err, call, __FILE__, __LINE__);
            return -1;
        }
    }
    if (self->nvtx)
        nvtxRangePushA(self->name_utf8);
    gp_store.recs[i].host_start_ns = gp_now_ns();
    return 0;
}

static int
not_open_error(gp_region *self, thread_t *t)
{
    for (int k = t ? t->n - 2 : -1; k >= 0; k--)
        if (t->frames[k].region == self) {
            PyErr_Format(gp_GpuProfileError,
                         "region '%U' exited while region '%U', entered after it, is still open: "
                         "regions must close in the reverse order they were opened",
                         self->name, t->frames[t->n - 1].region->name);
            return -1;
        }
    PyErr_Format(gp_GpuProfileError,
                 "region '%U' exited but is not open in this thread (exited twice, or entered "
                 "in another thread)",
                 self->name);
    return -1;
}

int
gp_region_exit(gp_region *self, int raised)
{
    thread_t *t = tls;
    if (t == NULL || t->n == 0 || t->frames[t->n - 1].region != self)
        return not_open_error(self, t);
    int64_t i = t->frames[--t->n].rec;
    Py_DECREF(self); /* the frame's reference; the caller still holds one */
    if (i < 0)
        return 0;
    int64_t host_end = gp_now_ns();
    t->depth--;
    gp_store.open--;
    gp_record *r = &gp_store.recs[i];
    r->host_end_ns = host_end;
    if (raised)
        r->flags |= REC_RAISED;
    int rc = 0;
    if (r->device < 0) {
        r->state = REC_HOST;
    } else {
        cudaError_t err = cudaEventRecord(r->ev[1], self->stream);
        if (err == cudaSuccess && gp_store_pending_push(r->device, i) == 0) {
            r->state = REC_PENDING;
        } else {
            r->state = REC_DONE;
            r->flags |= REC_FAILED;
            gp_event_pool_give(r->device, 2, r->ev);
            if (err != cudaSuccess) {
                char call[320];
                snprintf(call, sizeof call,
                         "exiting region '%.200s': cudaEventRecord(stop, stream)", self->name_utf8);
                gp_set_cuda_error(err, call, __FILE__, __LINE__);
            }
            rc = -1;
        }
    }
    if (gp_regions_n_observers > 0)
        gp_store_notify_exit(i);
    if (self->nvtx)
        nvtxRangePop();
    return rc;
}

int64_t
gp_region_innermost(void)
{
    return tls ? innermost_record(tls) : -1;
}

PyObject *
gp_region_innermost_metrics(void)
{
    if (tls == NULL || tls->n == 0)
        return NULL;
    return tls->frames[tls->n - 1].region->metrics;
}

int
gp_region_stacks_init(void)
{
    static int key_created;
    if (!key_created) {
        if (pthread_key_create(&tls_key, thread_free) != 0) {
            PyErr_SetString(PyExc_OSError, "pthread_key_create failed");
            return -1;
        }
        key_created = 1;
    }
    return 0;
}
