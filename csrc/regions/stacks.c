/* Region stacks, enter and exit (stacks.h).
 *
 * A context's stack is a chain of immutable frames held by one context variable: entering sets
 * the variable to a new frame whose parent is the innermost open one, so a task created inside
 * a region starts with that region as its parent, and a copy of a context never sees what the
 * original pushes later. Exiting marks the frame closed without touching the variable (half the
 * cost): closed frames are skipped when the innermost open frame is looked for and dropped from
 * the chain by the next enter. A frame is open while a thread's open list holds it. */
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

typedef struct thread_s thread_t;

typedef struct frame_s {
    PyObject_HEAD
    struct frame_s *parent; /* strong; the innermost open frame when this one was entered (once
                               closed, relinked past closed ones: open_frame) */
    gp_region *region;      /* strong */
    thread_t *owner;        /* whose open list holds this frame; NULL once closed */
    struct frame_s *prev, *next;
    int64_t rec;
    int32_t depth;
} frame_t;

struct thread_s {
    frame_t *first, *last; /* open frames in order of entry; the list holds a reference each */
    uint64_t id;
    thread_t *next_dead; /* in the list of ended threads */
};

static PyTypeObject *FrameType;
static PyObject *stack_var; /* the context variable: the top frame, unset or None when empty */
static _Thread_local thread_t *tls;
static pthread_key_t tls_key;

/* ---- threads ------------------------------------------------------------------------------- */

/* Threads that ended with regions open, handed over without the GIL by their key destructor. */
static pthread_mutex_t dead_lock = PTHREAD_MUTEX_INITIALIZER;
static thread_t *dead;

static void
thread_free(void *p)
{
    thread_t *t = p;
    if (t->first == NULL) {
        free(t);
        return;
    }
    pthread_mutex_lock(&dead_lock);
    t->next_dead = dead;
    dead = t;
    pthread_mutex_unlock(&dead_lock);
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

static void
link_frame(thread_t *t, frame_t *f)
{
    f->owner = t;
    f->prev = t->last;
    f->next = NULL;
    if (t->last != NULL)
        t->last->next = f;
    else
        t->first = f;
    t->last = f;
}

/* Marks `f` closed; the caller owns the list's reference from here on. */
static void
unlink_frame(frame_t *f)
{
    thread_t *t = f->owner;
    if (f->prev != NULL)
        f->prev->next = f->next;
    else
        t->first = f->next;
    if (f->next != NULL)
        f->next->prev = f->prev;
    else
        t->last = f->prev;
    f->owner = NULL;
    f->prev = f->next = NULL;
}

/* Under the GIL (store.c calls it before records() and reset()): the regions of ended threads
 * are closed as failed. */
static void
close_dead_threads(void)
{
    pthread_mutex_lock(&dead_lock);
    thread_t *t = dead;
    dead = NULL;
    pthread_mutex_unlock(&dead_lock);
    while (t != NULL) {
        thread_t *next = t->next_dead;
        while (t->first != NULL) {
            frame_t *f = t->first;
            unlink_frame(f);
            gp_store_close_failed(f->rec);
            Py_DECREF(f);
        }
        free(t);
        t = next;
    }
}

/* ---- frames -------------------------------------------------------------------------------- */

/* Freeing a frame frees its parent when that was the last reference: deep chains are freed in
 * a loop (frames queued past a small depth), not by a recursion as deep as the chain. */
static _Thread_local int dealloc_depth;
static _Thread_local frame_t *dealloc_queue;

static void
frame_dealloc(PyObject *op)
{
    frame_t *f = (frame_t *)op;
    if (dealloc_depth > 64) {
        f->next = dealloc_queue;
        dealloc_queue = f;
        return;
    }
    dealloc_depth++;
    for (;;) {
        PyTypeObject *tp = Py_TYPE(f);
        Py_XDECREF(f->parent);
        Py_DECREF(f->region);
        PyObject_Free(f);
        Py_DECREF(tp);
        if (dealloc_depth > 1 || dealloc_queue == NULL)
            break;
        f = dealloc_queue;
        dealloc_queue = f->next;
    }
    dealloc_depth--;
}

static PyObject *
frame_repr(PyObject *op)
{
    frame_t *f = (frame_t *)op;
    return PyUnicode_FromFormat("<region frame %R, %s>", f->region->name,
                                f->owner ? "open" : "closed");
}

static PyType_Slot frame_slots[] = {
    {Py_tp_dealloc, frame_dealloc},
    {Py_tp_repr, frame_repr},
    {0, NULL},
};

static PyType_Spec frame_spec = {
    .name = "gpuprofile._RegionFrame",
    .basicsize = sizeof(frame_t),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = frame_slots,
};

/* The innermost open frame from `f` down. The closed frames passed over are pointed straight at
 * it, so that closing a deep stack one region at a time stays linear: a closed frame's parent
 * only serves this search, and a frame never opens again. */
static frame_t *
open_frame(frame_t *f)
{
    frame_t *g = f;
    while (g != NULL && g->owner == NULL)
        g = g->parent;
    frame_t *held = NULL; /* the frame being relinked, kept alive by the reference we took */
    while (f != g && f->parent != g) {
        frame_t *next = f->parent; /* its reference becomes ours */
        f->parent = (frame_t *)Py_XNewRef(g);
        Py_XDECREF(held); /* may free frames (and run Python): `next` is ours */
        held = f = next;
    }
    Py_XDECREF(held);
    return g;
}

/* The innermost open frame of the calling context (borrowed: the context holds the chain), or
 * NULL; -1 with an exception. */
static int
context_top(frame_t **top)
{
    PyObject *v = NULL;
    if (PyContextVar_Get(stack_var, NULL, &v) < 0)
        return -1;
    *top = v != NULL && Py_IS_TYPE(v, FrameType) ? open_frame((frame_t *)v) : NULL;
    Py_XDECREF(v);
    return 0;
}

static int
set_top(frame_t *f)
{
    PyObject *token = PyContextVar_Set(stack_var, f ? (PyObject *)f : Py_None);
    if (token == NULL)
        return -1;
    Py_DECREF(token);
    return 0;
}

/* ---- enter and exit ------------------------------------------------------------------------ */

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

/* Takes back record `i` of an enter that failed: dropped if it is still the last one, else
 * (Python run meanwhile, by observers or a garbage collection, entered regions after it) kept
 * as a failed record. `device`: the pool that lent `ev`, -1 when there are none. */
static void
drop_record(int64_t i, int device, cudaEvent_t ev[2])
{
    gp_store.open--;
    if (device >= 0)
        gp_event_pool_give(device, 2, ev);
    if ((size_t)i == gp_store.n - 1) {
        gp_store.n--;
        Py_DECREF(gp_store.recs[i].name);
    } else {
        gp_store.recs[i].state = REC_DONE;
        gp_store.recs[i].flags |= REC_FAILED;
    }
}

/* Undoes an enter whose observers or start event failed (observers already told to exit). */
static void
abandon_enter(frame_t *f, int device, cudaEvent_t ev[2])
{
    int64_t i = f->rec;
    unlink_frame(f); /* closed: the context skips it */
    Py_DECREF(f);
    drop_record(i, device, ev);
}

/* A new open frame for record `i` on top of the calling context's stack. */
static frame_t *
push_frame(thread_t *t, gp_region *self, frame_t *parent, int64_t i)
{
    frame_t *f = PyObject_New(frame_t, FrameType);
    if (f == NULL)
        return NULL;
    f->parent = (frame_t *)Py_XNewRef(parent);
    f->region = (gp_region *)Py_NewRef(self);
    f->rec = i;
    f->depth = parent ? parent->depth + 1 : 0;
    f->owner = NULL;
    if (set_top(f) < 0) {
        Py_DECREF(f);
        return NULL;
    }
    link_frame(t, f); /* the list takes our reference; the context holds its own */
    return f;
}

/* Observers hear of the record before its start event is recorded (and of its end after the
 * stop event): while tracing, both cudaEventRecord calls then carry the region's external
 * correlation id, which is how a trace finds the region's interval on the GPU clock.
 *
 * With the CUPTI region clock on (a profile traces with regions), a GPU region records no
 * events at all: its GPU time is the span of the traced work attributed to it, filled in when
 * the profile stops (store.c, _regions_fill_cupti). Regions with metrics keep their events. */
int
gp_region_enter(gp_region *self)
{
    if (!gp_regions_enabled) {
        self->entered_disabled++;
        return 0;
    }
    thread_t *t = thread_state();
    if (t == NULL)
        return -1;
    int device = -1;
    int evdev = -1; /* the device whose pool lent `ev`; -1: no events */
    cudaEvent_t ev[2] = {0, 0};
    if (gp_device_count() > 0) {
        if (gp_require_device() < 0)
            return -1;
        device = region_device(self);
        if (device < 0)
            return -1;
        if (!gp_regions_cupti_clock || self->metrics != NULL) {
            if (gp_store_acquire_events(device, ev) < 0)
                return -1;
            evdev = device;
        }
    }
    frame_t *parent = NULL;
    int64_t i = -1;
    if (context_top(&parent) < 0 || (i = gp_store_append()) < 0) {
        if (evdev >= 0)
            gp_event_pool_give(evdev, 2, ev);
        return -1;
    }
    /* The record is complete before anything that may run Python (allocating the frame may
     * collect garbage, and another thread may then read or grow the store). */
    gp_record *r = &gp_store.recs[i];
    r->name = Py_NewRef(self->name);
    r->parent = parent ? parent->rec : -1;
    r->thread = t->id;
    r->depth = parent ? parent->depth + 1 : 0;
    r->device = (int16_t)device;
    r->ev[0] = ev[0];
    r->ev[1] = ev[1];
    r->stream = self->stream;
    r->gpu_ms = NAN;
    r->host_start_ns = r->host_end_ns = 0;
    r->state = REC_OPEN;
    r->flags = self->memory ? REC_MEMORY : 0;
    if (device >= 0 && evdev < 0)
        r->flags |= REC_CUPTI;
    gp_store.open++;
    frame_t *f = push_frame(t, self, parent, i);
    if (f == NULL) {
        drop_record(i, evdev, ev);
        return -1;
    }
    if (gp_regions_n_observers > 0 && gp_store_notify_enter(i) < 0) {
        abandon_enter(f, evdev, ev);
        return -1;
    }
    if (evdev >= 0) {
        cudaError_t err = cudaEventRecord(ev[0], self->stream);
        if (err != cudaSuccess) {
            if (gp_regions_n_observers > 0)
                gp_store_notify_exit(i);
            abandon_enter(f, evdev, ev);
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

/* The frame an exit of `self` closes when it is not the innermost one: the innermost open frame
 * of `self` in this context (regions closed out of order, e.g. by a generator), else the newest
 * one this thread opened in another context (entered in one callback, exited in another). */
static frame_t *
find_frame(thread_t *t, frame_t *top, gp_region *self)
{
    for (frame_t *f = top; f != NULL; f = f->parent)
        if (f->region == self && f->owner == t)
            return f;
    for (frame_t *f = t->last; f != NULL; f = f->prev)
        if (f->region == self)
            return f;
    return NULL;
}

static int
close_record(gp_region *self, int64_t i, int raised)
{
    int64_t host_end = gp_now_ns();
    gp_store.open--;
    gp_record *r = &gp_store.recs[i];
    r->host_end_ns = host_end;
    if (raised)
        r->flags |= REC_RAISED;
    int rc = 0;
    if (r->device < 0) {
        r->state = REC_HOST;
    } else if (r->flags & REC_CUPTI) {
        r->state = REC_DONE; /* no GPU time until the profile fills it in */
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

int
gp_region_exit(gp_region *self, int raised)
{
    if (!gp_regions_enabled && self->entered_disabled > 0) {
        self->entered_disabled--;
        return 0;
    }
    thread_t *t = tls;
    frame_t *f = NULL;
    if (t != NULL && t->first != NULL) {
        frame_t *top;
        if (context_top(&top) < 0)
            return -1;
        f = top != NULL && top->region == self && top->owner == t ? top : find_frame(t, top, self);
    }
    if (f == NULL) {
        if (self->entered_disabled > 0) {
            self->entered_disabled--;
            return 0;
        }
        PyErr_Format(gp_GpuProfileError,
                     "region '%U' exited but is not open in this thread (exited twice, or "
                     "entered in another thread)",
                     self->name);
        return -1;
    }
    unlink_frame(f); /* closed before the observers run: they ask for the innermost open one */
    int rc = close_record(self, f->rec, raised);
    Py_DECREF(f); /* the list's reference; the caller still holds one to `self` */
    return rc;
}

int64_t
gp_region_innermost(void)
{
    frame_t *top;
    if (context_top(&top) < 0) {
        PyErr_Clear();
        return -1;
    }
    return top ? top->rec : -1;
}

PyObject *
gp_region_innermost_metrics(void)
{
    frame_t *top;
    if (context_top(&top) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return top ? top->region->metrics : NULL;
}

int
gp_region_stacks_init(PyObject *module)
{
    static int key_created;
    if (!key_created) {
        if (pthread_key_create(&tls_key, thread_free) != 0) {
            PyErr_SetString(PyExc_OSError, "pthread_key_create failed");
            return -1;
        }
        key_created = 1;
    }
    if (FrameType == NULL) {
        FrameType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &frame_spec, NULL);
        if (FrameType == NULL)
            return -1;
    }
    if (stack_var == NULL && (stack_var = PyContextVar_New("gpuprofile.regions", NULL)) == NULL)
        return -1;
    gp_store_set_dead_threads_hook(close_dead_threads);
    return 0;
}
