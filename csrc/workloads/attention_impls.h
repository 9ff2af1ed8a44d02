/* The attention implementations, defined once: the table below is what `impl=` accepts, what the
 * CLI offers and the docs list (Python reads it as _C.ATTENTION_IMPLS), and it holds each one's
 * checks, workspace and launcher. One entry per kernel family (kernels/attention/attention.h),
 * each running its fastest measured configuration.
 *
 * impl="auto" takes the first entry by `priority` that supports the arguments and runs on the
 * device: entries without a `runnable` check are decided before any device work
 * (gp_attn_choose_impl), the ones with it (flash_wgmma: sm_90a) once the arrays' device is
 * current (gp_attn_prefer_runnable). */
#ifndef GP_WORKLOADS_ATTENTION_IMPLS_H
#define GP_WORKLOADS_ATTENTION_IMPLS_H

#include <Python.h>

#include "attention/attention.h"

typedef struct {
    const char *name;      /* impl= */
    const char *takes;     /* the arguments it takes, in words */
    const char *devices;   /* the devices it runs on, in words */
    const char *workspace; /* what its device workspace holds; NULL: it needs none */
    int tensor_cores;
    int priority; /* auto's order: 1 first */
    /* Whether the current device runs it (NULL: every device the build runs on); asked only where
     * auto would take it, with the arrays' device current. */
    int (*runnable)(void);
    /* Whether it takes these arguments (shape, dtype, strides, alignment; not the device). */
    int (*supports)(const gp_attn_params *p);
    size_t (*workspace_bytes)(const gp_attn_params *p); /* NULL where workspace is NULL */
    cudaError_t (*launch)(const gp_attn_params *p, void *workspace, cudaStream_t stream);
} gp_attn_impl;

enum { IMPL_NAIVE, IMPL_FLASH, IMPL_FLASH_TC, IMPL_FLASH_WGMMA, IMPL_COUNT };
enum { IMPL_AUTO = IMPL_COUNT }; /* a choice among the table, not an entry of it */
extern const gp_attn_impl gp_attn_impls[IMPL_COUNT];

/* The IMPL_* (or IMPL_AUTO) of a name; -1 with ValueError for an unknown one. */
int gp_attn_parse_impl(const char *name, int *out);
/* The name of an IMPL_* or IMPL_AUTO. */
const char *gp_attn_impl_name(int impl);
/* The requested impl if it takes the arguments, or auto's first (by priority) that does among the
 * entries without a runnable check; -1 with ValueError saying why not. */
int gp_attn_choose_impl(int requested, const gp_attn_params *p, int *chosen);
/* auto with the arrays' device current: an entry ahead of *impl by priority that takes the
 * arguments and whose runnable check says yes (flash_wgmma on Hopper), in its place. */
void gp_attn_prefer_runnable(int requested, const gp_attn_params *p, int *impl);
/* The schedule (0 per shape, or GP_ATTN_WGMMA_*) and O store (0 the rule's, or one of
 * GP_ATTN_WGMMA_OUT_*) that _C._testing.attention_wgmma forces, as gp_attn_params.variant, if
 * this build has that kernel for p's head_dim (and, with the rule's O store, p's shape); -1 with
 * ValueError naming the schedule and what the build has otherwise. */
int gp_attn_wgmma_forced(int schedule, int out, const gp_attn_params *p);
/* The schedule of a name (a row of the table, or with per_shape nonzero also "per_shape"), or -1
 * with a ValueError that names `query` and the names it takes. */
int gp_attn_wgmma_schedule_by_name(const char *name, const char *query, int per_shape);
enum { GP_ATTN_NAMES_ALL = 0, GP_ATTN_NAMES_PER_SHAPE = 1, GP_ATTN_NAMES_PERSISTENT = 2 };
/* The table's names, "persist, bm128, ...": every row; with per_shape first; or the rows whose
 * kernel is persistent. New reference. */
PyObject *gp_attn_wgmma_schedule_names(int which);
/* Why auto takes `chosen` for these arguments (the entries passed over and why, from the table
 * and the checks' messages); on_device: whether the current device was asked. New reference. */
PyObject *gp_attn_auto_reason(const gp_attn_params *p, int chosen, int on_device);
/* The current device's SM count; -1 with an exception. */
int gp_attn_current_sms(void);
/* reason + "; its schedule for this shape (causal=..., N SMs): name (words)": the flash_wgmma
 * schedule that p's shape runs on the current device (gp_attn_flash_wgmma_schedule). New
 * reference, NULL with an exception. */
PyObject *gp_attn_with_wgmma_schedule(PyObject *reason, const gp_attn_params *p);
/* The table as a tuple of dicts (name, takes, devices, workspace, tensor_cores, priority); new
 * reference. */
PyObject *gp_attn_impls_as_python(void);
/* flash_wgmma's table of schedules (flash_wgmma/schedules.h) as a tuple of dicts (name, number,
 * head_dims, configs: {head_dim: {consumers, rows, order, persistent, chained, ships, words}});
 * new reference. */
PyObject *gp_attn_wgmma_schedules_as_python(void);

#endif
