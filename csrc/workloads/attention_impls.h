/* The attention implementations, defined once: the table below is what `impl=` accepts, what the
 * CLI offers and the docs list (Python reads it as _C.ATTENTION_IMPLS), and it holds each one's
 * checks, workspace and launcher. One entry per kernel family (kernels/attention/attention.h),
 * each running its fastest measured configuration.
 *
 * impl="auto" takes flash_tc, flash, naive in that order, the first that supports the arguments;
 * where it took flash_tc and the device runs flash_wgmma (sm_90a), it takes flash_wgmma
 * (gp_attn_prefer_wgmma, decided with the arrays' device current). */
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
/* The requested impl if it takes the arguments, or auto's first that does; -1 with ValueError
 * saying why not. */
int gp_attn_choose_impl(int requested, const gp_attn_params *p, int *chosen);
/* _variant (_C._attention's hidden keyword, the benchmarks' only): one of flash_wgmma's schedules
 * (GP_ATTN_WGMMA_*) in place of the one chosen per shape. 0, or 1..VARIANTS-1 with impl
 * flash_wgmma, and a head_dim that schedule takes; -1 with ValueError otherwise. */
int gp_attn_check_variant(int variant, int requested, const char *impl_name,
                          const gp_attn_params *p);
/* auto on Hopper: flash_wgmma in place of flash_tc where the current device runs it. */
void gp_attn_prefer_wgmma(int requested, const gp_attn_params *p, int *impl);
/* Why auto takes `chosen` for these arguments (the entries passed over and why, from the table
 * and the checks' messages); on_device: whether the current device was asked. New reference. */
PyObject *gp_attn_auto_reason(const gp_attn_params *p, int chosen, int on_device);
/* The current device's SM count; -1 with an exception. */
int gp_attn_current_sms(void);
/* reason + "; its schedule for this shape (causal=..., N SMs): name (words)": the flash_wgmma
 * schedule that p's shape runs on the current device (gp_attn_flash_wgmma_schedule). New
 * reference, NULL with an exception. */
PyObject *gp_attn_with_wgmma_schedule(PyObject *reason, const gp_attn_params *p);
/* The table as a tuple of dicts (name, takes, devices, workspace, tensor_cores); new reference. */
PyObject *gp_attn_impls_as_python(void);

#endif
