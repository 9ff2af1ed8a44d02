// flash_wgmma's block and layout: the tile sizes, the consumer schedules' names, the block's
// warpgroups and registers, the shared-memory layout, the kernel arguments and the barriers.
// Part of attention_flash_wgmma.cu (FlashAttention-3's hopper/ split: block and layout here,
// mainloop.cuh, scheduler.cuh, epilogue.cuh, kernel.cuh, the host launch in the .cu and the pure
// host rule in rule.cu).
#pragma once

#include "attention/attention_sm90.cuh"
#include "attention/flash_wgmma/schedules.h"

namespace gp_attn {
// An anonymous namespace in a header: these headers are parts of one translation unit,
// attention_flash_wgmma.cu, and its kernels stay internal to it (as they were in one file).
namespace {

constexpr int kBN = GP_ATTN_WGMMA_KEY_TILE; // keys per tile
// Named barriers: 1 + cw, consumer cw's O store (store_tma); kTurnBarrier + cw, its turn (v11,
// Turns).
constexpr int kTurnBarrier = 3;

// A consumer's order of work per key tile j (the versions above): S_j, softmax, P·V_j in
// sequence; S_j issued before P·V_(j-1) (overlapped); or (lookahead, v4) S_(j+1) issued before
// the softmax of S_j, so that Q·K_(j+1)ᵀ and P_(j-1)·V_(j-1) run while it does.
enum class Schedule { sequential, overlapped, lookahead };

// Where a persistent consumer chains its items, its state (Consumer) outlives them, since a wgmma
// in flight writes c.s across their boundary; but the lookahead schedule's lives per item, and
// only s1, the S tile its items start in, outlives them: its whole state declared across items
// made ptxas schedule the tile loop worse (consume_item, consume_persistent; NOTES.md,
// "persist_lookahead chained").
template <Schedule S> constexpr bool kStatePerItem = S == Schedule::lookahead;

// Whether a block's consumers take turns issuing their wgmmas (v11): at head_dim 128, where it
// measured 1.5-4 % faster at N <= 2048 (persistent) and within 0.01 or up to 2 % faster beyond
// (fixed), each forced beside the same block without turns in one process (H100 and H200,
// 2026-11-27; NOTES.md, "Turns at head_dim 128"). The head_dim 64 blocks were not measured with
// turns.
template <int D> constexpr bool kTurns = D == 128;

// The block's shape: CONSUMERS warpgroups of 64 query rows each, plus the producer warpgroup.
// setmaxnreg moves registers from the producer to the consumers; the pool is the launch's
// register count (ptxas -v: 168 at 384 threads, 128 at 512, both the __launch_bounds__ cap)
// times the threads, and the hand-over must fit it:
//   2 consumers (v1): 24·128 + 2·240·128 = 64 512 <= 168·384 = 64 512
//   3 consumers (v2): 24·128 + 3·160·128 = 64 512 <= 128·512 = 65 536
// The 3-consumer block also skips O's rescale where no row of a warp raised its max (exact:
// the skipped factor is 1); the 2-consumer block keeps its measured code unchanged.
// TURNS (v11): the consumers take turns issuing their wgmmas (Turns), what the head_dim 128
// block does, fixed or persistent (kTurns).
template <int CONSUMERS, bool TURNS = false> struct Block {
    static constexpr int consumers = CONSUMERS;
    static constexpr bool turns = TURNS;
    static constexpr int threads = 128 * (CONSUMERS + 1);
    static constexpr int BM = 64 * CONSUMERS; // query rows per block
    static constexpr int launch_regs = CONSUMERS == 2 ? 168 : 128;
    static constexpr int producer_regs = 24;
    static constexpr int consumer_regs = CONSUMERS == 2 ? 240 : 160;
    static constexpr bool skip_unchanged_rescale = CONSUMERS == 3;
    static_assert(CONSUMERS == 2 || CONSUMERS == 3, "64·CONSUMERS rows: 128 or 192");
    static_assert(launch_regs * threads <= 65536 && launch_regs % 8 == 0, "one block per SM");
    static_assert(producer_regs * 128 + consumer_regs * 128 * CONSUMERS <= launch_regs * threads,
                  "setmaxnreg hand-over larger than the launch's register pool");
};

// Shared memory, from a 1024-byte aligned base: Q (BM×D), STAGES K tiles, STAGES V tiles (BN×D
// each, as D/64 column blocks), then the mbarriers; where O leaves by TMA (OUT_SMEM), O last
// (BM×D: each consumer's 64 rows, as D/64 column blocks). Every tile starts on a 1024-byte
// boundary (BM·128 and BN·128 bytes are multiples of 1024).
// The persistent kernels (QBUFS = 2) keep two Q tiles, so that the next work item's Q loads while
// the consumers still read the current one; their barriers are the K/V ones followed by
// Q full and Q empty per Q buffer.
template <int D, int BM, int QBUFS = 1> struct Layout {
    static constexpr int STAGES = D == 64 ? 4 : 2;
    static constexpr uint32_t Q_BYTES = BM * D * 2, KV_BYTES = kBN * D * 2;
    static constexpr uint32_t K_OFF = QBUFS * Q_BYTES, V_OFF = K_OFF + STAGES * KV_BYTES;
    static constexpr uint32_t BAR_OFF = V_OFF + STAGES * KV_BYTES;
    // Q full; K full, K empty, V full, V empty (persistent: then Q full, Q empty per Q buffer)
    static constexpr int BARS = 1 + 4 * STAGES + (QBUFS > 1 ? 2 * QBUFS : 0);
    // persistent: each Q buffer's item (m0, h, b), written by the producer before its Q load
    static constexpr uint32_t ITEM_OFF = BAR_OFF + BARS * 8;
    static constexpr uint32_t END = ITEM_OFF + (QBUFS > 1 ? QBUFS * 16 : 0);
    static constexpr uint32_t O_OFF = (END + 1023) / 1024 * 1024;
    static constexpr size_t smem(bool out_smem) // + alignment of the base
    {
        return (out_smem ? O_OFF + BM * D * 2 : END) + 1024;
    }
    static_assert(smem(true) <= 227 * 1024, "more shared memory than an H100 block has");
};

struct Args {
    CUtensorMap q, k, v; // 4-D maps (head_dim, seq, heads, batch); boxes of 64 × BM or BN rows
    CUtensorMap o;       // and of the output, boxes of 64 × 64 rows (one consumer's)
    gp_attn_params p;
    int m_tiles;   // persistent kernels: query tiles per (batch, head)
    int64_t items; // and work items, m_tiles · heads · batch (below 2^31, launch_persistent)
    int group;     // and (causal) the (batch, head) pairs whose items go out together (work_item)
    // or (causal, paired = 1) items in twos of equal work (work_item): the grid's first
    // two_rounds rounds take twos; the items from `rest` on go to the blocks of the last round
    // (last_round of them) in twos where rest_twos (the rest is a round and a partial one), one
    // to each block otherwise
    int paired, two_rounds, rest, last_round, rest_twos;
    // the divisions of work_item: by m_tiles, heads, group, group · m_tiles and the grid
    sm90::FastDiv by_m_tiles, by_heads, by_group, by_group_tiles, by_grid;
};

using namespace sm90;

#if GP_SM90A

struct Barriers {
    uint64_t *q, *k_full, *k_empty, *v_full, *v_empty;
    template <int STAGES> static __device__ Barriers at(uint64_t *base)
    {
        return Barriers{base, base + 1, base + 1 + STAGES, base + 1 + 2 * STAGES,
                        base + 1 + 3 * STAGES};
    }
};

struct PBarriers {
    Barriers ring;
    uint64_t *q_full, *q_empty; // per Q buffer
    template <int STAGES> static __device__ PBarriers at(uint64_t *base)
    {
        return PBarriers{Barriers::at<STAGES>(base), base + 1 + 4 * STAGES, base + 3 + 4 * STAGES};
    }
};

// Key tiles that the rows below row_end need: every tile, or (causal) those that start at or
// before the last of those rows.
__device__ __forceinline__ int
key_tiles(const gp_attn_params &p, int row_end)
{
    const int kv_end = p.causal ? min(p.seq, row_end) : p.seq;
    return (kv_end + kBN - 1) / kBN;
}

#endif // GP_SM90A

} // namespace
} // namespace gp_attn
