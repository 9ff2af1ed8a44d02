/* Which attention kernel runs: the implementations' names, what each takes, and the choice of
 * impl="auto". Used by attention.c (the Python functions and launches).
 *
 * impl="auto" takes flash_tc, flash, naive in that order, the first that supports the arguments;
 * where it took flash_tc and the device runs flash_wgmma (sm_90a), it takes flash_wgmma
 * (gp_attn_prefer_wgmma, decided with the arrays' device current). */
#ifndef GP_WORKLOADS_ATTENTION_CHOICE_H
#define GP_WORKLOADS_ATTENTION_CHOICE_H

#include "attention/attention.h"

enum { IMPL_NAIVE, IMPL_FLASH, IMPL_FLASH_TC, IMPL_FLASH_WGMMA, IMPL_AUTO, IMPL_COUNT };
extern const char *const gp_attn_impl_names[IMPL_COUNT];

/* The IMPL_* of a name; -1 with ValueError for an unknown one. */
int gp_attn_parse_impl(const char *name, int *out);
/* Whether impl takes these arguments (shape, dtype, strides, alignment; not the device). */
int gp_attn_supported(int impl, const gp_attn_params *p);
/* The requested impl if it takes the arguments, or auto's first that does; -1 with ValueError
 * saying why not. */
int gp_attn_choose_impl(int requested, const gp_attn_params *p, int *chosen);
/* auto on Hopper: flash_wgmma in place of flash_tc where the current device runs it. */
void gp_attn_prefer_wgmma(int requested, const gp_attn_params *p, int *impl);

#endif
