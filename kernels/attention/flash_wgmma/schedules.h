/* flash_wgmma's schedules, defined once: the table below is what the launcher instantiates (each
 * row's kernel configuration per head_dim, as template arguments), what the per-shape rule
 * returns (its numbers), what the shipped build contains (the O stores the rule reaches, ships),
 * and what Python reads (_C.ATTENTION_WGMMA_SCHEDULES: the benchmarks, the tests, the docs).
 * A new schedule is a row here, its kernel code (mainloop.cuh / scheduler.cuh) and the rule
 * (rule.cu).
 *
 * Valid C and C++ (static const in C, constexpr in C++, so the launcher can take template
 * arguments from it); nothing here needs a device.
 *
 * The shipped build instantiates a configuration only in the O stores the rule can pick for it
 * (ships); a build with GPUPROFILE_ATTN_LAB=1 (the nvcc macro GP_ATTN_LAB) instantiates every
 * configuration both ways, for the benchmarks that force a schedule (_C._testing.attention). */
#ifndef GP_KERNELS_FLASH_WGMMA_SCHEDULES_H
#define GP_KERNELS_FLASH_WGMMA_SCHEDULES_H

#include "attention/attention.h" /* the schedules' numbers, GP_ATTN_WGMMA_* */

#ifdef __cplusplus
#define GP_ATTN_TABLE constexpr
#define GP_ATTN_INLINE constexpr inline
#else
#define GP_ATTN_TABLE const
#define GP_ATTN_INLINE inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* A consumer warpgroup's order of work per key tile (the kernel's Schedule, block.cuh): S, softmax
 * and P·V in sequence; S_j issued before P·V_(j-1); or S_(j+1) issued before the softmax of S_j. */
enum { GP_ATTN_WGMMA_SEQUENTIAL, GP_ATTN_WGMMA_OVERLAPPED, GP_ATTN_WGMMA_LOOKAHEAD };
/* The O stores a configuration ships with (bits): from registers, through shared memory. */
enum { GP_ATTN_WGMMA_SHIPS_REGS = 1, GP_ATTN_WGMMA_SHIPS_SMEM = 2 };

/* One schedule at one head_dim: its kernel's template arguments, and the O stores that the rule
 * reaches (ships; 0: the rule never runs this schedule at this head_dim, lab builds only). */
typedef struct {
    int consumers;  /* 64-row consumer warpgroups per block: 2 (128 rows) or 3 (192); 0: not at
                       this head_dim */
    int order;      /* GP_ATTN_WGMMA_SEQUENTIAL, _OVERLAPPED or _LOOKAHEAD */
    int persistent; /* one block per SM walks (query tile, head, batch) items; else one block
                       per query tile */
    int chained;    /* persistent: an item's first Q·Kᵀ is issued behind the last P·V of the one
                       before */
    int ships;      /* GP_ATTN_WGMMA_SHIPS_* */
    const char *words;
} gp_attn_wgmma_config;

typedef struct {
    int number; /* GP_ATTN_WGMMA_*: the row's place + 1 */
    const char *name;
    gp_attn_wgmma_config at[2]; /* head_dim 64, head_dim 128 */
} gp_attn_wgmma_schedule_row;

#define GP_ATTN_WGMMA_SCHEDULES (GP_ATTN_WGMMA_VARIANTS - 1)
#define GP_ATTN_WGMMA_KEY_TILE 128 /* keys per K/V tile, every schedule */

/* At head_dim 128 a consumer's O takes 64 registers: the 192-row block (160 registers per
 * consumer) does not fit it, nor do two S tiles (lookahead); bm128 and persist_bm128 are there
 * the fixed and the persistent block themselves. */
static GP_ATTN_TABLE gp_attn_wgmma_schedule_row gp_attn_wgmma_schedules[GP_ATTN_WGMMA_SCHEDULES] = {
    {GP_ATTN_WGMMA_PERSIST,
     "persist",
     {{3, GP_ATTN_WGMMA_SEQUENTIAL, 1, 1, GP_ATTN_WGMMA_SHIPS_REGS,
       "192-row blocks, persistent, items chained"},
      {2, GP_ATTN_WGMMA_OVERLAPPED, 1, 0, GP_ATTN_WGMMA_SHIPS_SMEM, "128-row blocks, persistent"}}},
    {GP_ATTN_WGMMA_BM128,
     "bm128",
     {{2, GP_ATTN_WGMMA_OVERLAPPED, 0, 0, GP_ATTN_WGMMA_SHIPS_SMEM,
       "128-row blocks, one per query tile"},
      {2, GP_ATTN_WGMMA_OVERLAPPED, 0, 0, 0, "128-row blocks, one per query tile"}}},
    {GP_ATTN_WGMMA_PERSIST_BM128,
     "persist_bm128",
     {{2, GP_ATTN_WGMMA_OVERLAPPED, 1, 1, GP_ATTN_WGMMA_SHIPS_SMEM,
       "128-row blocks, persistent, items chained"},
      {2, GP_ATTN_WGMMA_OVERLAPPED, 1, 0, 0, "128-row blocks, persistent"}}},
    {GP_ATTN_WGMMA_FIXED,
     "fixed",
     {{3, GP_ATTN_WGMMA_SEQUENTIAL, 0, 0, 0, "192-row blocks, one per query tile"},
      {2, GP_ATTN_WGMMA_OVERLAPPED, 0, 0, GP_ATTN_WGMMA_SHIPS_SMEM,
       "128-row blocks, one per query tile"}}},
    {GP_ATTN_WGMMA_PERSIST_LOOKAHEAD,
     "persist_lookahead",
     {{2, GP_ATTN_WGMMA_LOOKAHEAD, 1, 0, GP_ATTN_WGMMA_SHIPS_REGS,
       "128-row blocks, persistent, two S tiles per consumer"},
      {0, 0, 0, 0, 0, "head_dim 64 only"}}},
    {GP_ATTN_WGMMA_PERSIST_LOOKAHEAD_CHAINED,
     "persist_lookahead_chained",
     {{2, GP_ATTN_WGMMA_LOOKAHEAD, 1, 1, GP_ATTN_WGMMA_SHIPS_REGS | GP_ATTN_WGMMA_SHIPS_SMEM,
       "128-row blocks, persistent, two S tiles per consumer, items chained"},
      {0, 0, 0, 0, 0, "head_dim 64 only"}}},
};

/* The row of schedule number 1..6, or NULL. */
static GP_ATTN_INLINE const gp_attn_wgmma_schedule_row *
gp_attn_wgmma_row(int schedule)
{
    return schedule >= 1 && schedule <= GP_ATTN_WGMMA_SCHEDULES
               ? &gp_attn_wgmma_schedules[schedule - 1]
               : 0;
}

/* Schedule number 1..6 at head_dim 64 or 128, or NULL where it does not take that head_dim. */
static GP_ATTN_INLINE const gp_attn_wgmma_config *
gp_attn_wgmma_config_at(int schedule, int head_dim)
{
    const gp_attn_wgmma_schedule_row *row = gp_attn_wgmma_row(schedule);
    if (row == 0 || (head_dim != 64 && head_dim != 128) || row->at[head_dim == 128].consumers == 0)
        return 0;
    return &row->at[head_dim == 128];
}

/* Whether a build (lab: built with GP_ATTN_LAB) has configuration c with this O store. */
static GP_ATTN_INLINE int
gp_attn_wgmma_built(const gp_attn_wgmma_config *c, int out_smem, int lab)
{
    return c != 0 && c->consumers != 0 &&
           (lab || (c->ships & (out_smem ? GP_ATTN_WGMMA_SHIPS_SMEM : GP_ATTN_WGMMA_SHIPS_REGS)));
}

#ifdef __cplusplus
}
#endif

#endif
