// flash_wgmma's two kernels: the fixed one (one block per query tile) and the persistent one
// (one block per SM walking work items), each a producer warpgroup and its consumers over the
// mainloop, the scheduler and the epilogue. Part of attention_flash_wgmma.cu (block.cuh says how
// the parts fit). That the fixed kernel be the persistent one with a single-tile scheduler, as
// in FlashAttention-3, changes their SASS: it waits for a measurement on the device.
#pragma once

#include "attention/flash_wgmma/epilogue.cuh"

namespace gp_attn {
// An anonymous namespace in a header: these headers are parts of one translation unit,
// attention_flash_wgmma.cu, and its kernels stay internal to it (as they were in one file).
namespace {

#if GP_SM90A

// The fixed kernel's consumer: its block's one item (consume_item with g0 = 0).
template <typename T, int D, typename B, Schedule S, bool OUT_SMEM>
__device__ void
consume(const Args &a, uint8_t *smem, const Barriers &bar, int m0, int block_tiles, int cw)
{
    Consumer<T, D, B::BM> c;
    float s1[Consumer<T, D, B::BM>::NS];
    Turns<B::turns>::open(cw);
    consume_item<T, D, B, S, OUT_SMEM, 1, false, false>(c, s1, a.p, &a.o, smem, bar, bar.q, 0,
                                                        nullptr, 0, m0, blockIdx.y, blockIdx.z,
                                                        block_tiles, 0, cw, Next{});
    Turns<B::turns>::close(cw);
}

#endif // GP_SM90A

template <typename T, int D, int CONSUMERS, Schedule S, bool OUT_SMEM>
__global__ void
__launch_bounds__(Block<CONSUMERS>::threads, 1) flash_wgmma_kernel(const __grid_constant__ Args a)
{
#if GP_SM90A
    using B = Block<CONSUMERS, kTurns<D>>;
    using L = Layout<D, B::BM>;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    const Barriers bar = Barriers::at<L::STAGES>(reinterpret_cast<uint64_t *>(smem + L::BAR_OFF));
    const gp_attn_params &p = a.p;
    // Causal blocks differ in work; the heaviest (last query rows) start first.
    const int m0 = (p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * B::BM;
    const int n_tiles = key_tiles(p, m0 + B::BM);
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        tma_prefetch_map(&a.q);
        tma_prefetch_map(&a.k);
        tma_prefetch_map(&a.v);
        if (OUT_SMEM)
            tma_prefetch_map(&a.o);
        mbar_init(bar.q, 1);
        for (int s = 0; s < L::STAGES; s++) {
            mbar_init(&bar.k_full[s], 1);
            mbar_init(&bar.v_full[s], 1);
            mbar_init(&bar.k_empty[s], 128 * B::consumers); // every consumer thread arrives
            mbar_init(&bar.v_empty[s], 128 * B::consumers);
        }
        mbar_init_fence();
    }
    __syncthreads(); // the last block-wide barrier: the producer's other warps leave below

    if (wg == 0) {
        regs_release<B::producer_regs>();
        if (threadIdx.x == 0)
            produce<D, B::BM>(a, smem, bar, m0, n_tiles);
        return;
    }
    regs_claim<B::consumer_regs>();
    consume<T, D, B, S, OUT_SMEM>(a, smem, bar, m0, n_tiles, wg - 1);
    if (OUT_SMEM && (threadIdx.x & 127) == 0)
        bulk_wait<0>(); // the O store issued last
#else
    __trap(); // built without sm_90a code; the launcher never gets here (it checks the binary)
#endif
}

// ---- the persistent kernel (v3)
// ------------------------------------------------------------------ One block per SM (grid =
// min(SMs, items)); block x takes work items x, x + grid, x + 2·grid, ... of (query tile, head,
// batch). The producer loads the next item's Q into the other of two Q buffers and its K, V tiles
// into the same ring as soon as stages free up, so the next item's loads overlap this item's last
// tiles and its O store; the ring's stage and parity come from a count of the block's tiles over
// all its items. Every consumer releases every tile the block loads (a causal 192-row block's first
// consumer waits for and releases the tiles it skips), so the barriers' phases stay in step across
// items.

#if GP_SM90A

// The persistent kernel's consumer: consume_item over the block's items; tile j of an item is the
// block's tile g0 + j. CHAIN (launch_out: at head_dim 64 but persist_lookahead; persist_lookahead
// chained, v10), the items are chained (consume_item): the prologue issues the first item's S_0,
// each item the next one's, and the last item a dummy one, waited for after the loop, so that
// every item runs the same code.
template <typename T, int D, typename B, Schedule S, bool OUT_SMEM, bool CHAIN>
__device__ void
consume_persistent(const Args &a, uint8_t *smem, const PBarriers &pb, int cw)
{
    using L = Layout<D, B::BM, 2>;
    using C = Consumer<T, D, B::BM>;
    static_assert(D == 64 || !CHAIN, "the head_dim 128 block does not chain (v8)");
    // Unchained (persist_lookahead and the head_dim 128 block), the consumer state lives per
    // item: declared across items, as chaining needs, ptxas schedules the tile loop
    // differently. persist_lookahead (3656 -> 4416 instructions) ran up to 12 % slower unchained
    // on an H100 and up to 15 % chained on an H200; the head_dim 128 block, chained, ran 7-13 %
    // slower from N = 1024 than unchained (in PC samples beside the fixed block's, same loop
    // code, its waits for the P·V and at warpgroup arrive grew; (4, 16, 4096, 128) 0.90 of cuDNN
    // against 1.03) and was no faster at N = 512 (H100, 2026-11-26, seventh session; NOTES.md,
    // "Chaining at head_dim 128"). The 192-row block (head_dim 64) still chains, and
    // persist_lookahead_chained with its state per item but for one S tile (below).
    // The item in Q buffer qb, as the producer's work_item wrote it: read once that buffer's
    // q_full phase has completed (every consumer thread would divide the same numbers otherwise).
    auto item_of = [&](int qb) { return reinterpret_cast<const Item *>(smem + L::ITEM_OFF)[qb]; };
    if constexpr (!CHAIN) {
        Turns<B::turns>::open(cw);
        uint32_t g0 = 0;
        int k = 0;
        for (int64_t i = blockIdx.x; i < a.items; i += gridDim.x, k++) {
            const int qb = k & 1;
            mbar_wait(&pb.q_full[qb], (uint32_t)(k >> 1) & 1);
            const Item w = item_of(qb);
            const int block_tiles = key_tiles(a.p, w.m0 + B::BM);
            C c;
            float s1[C::NS];
            consume_item<T, D, B, S, OUT_SMEM, 2, false, false>(
                c, s1, a.p, &a.o, smem, pb.ring, &pb.q_full[qb], (uint32_t)(k >> 1) & 1,
                &pb.q_empty[qb], qb, w.m0, w.h, w.b, block_tiles, g0, cw, Next{});
            g0 += block_tiles;
        }
        Turns<B::turns>::close(cw);
        return;
    }
    // The consumer state across items, or per item but s1 (kStatePerItem).
    [[maybe_unused]] C c_across;
    float s1[C::NS];
    const uint32_t base = smem_u32(smem);
    auto q_rows = [&](int qb) { return base + qb * L::Q_BYTES + cw * 64 * 128; };
    uint32_t g0 = 0;        // the block's K/V tiles before this item
    int k = 0;              // items before this one
    int64_t i = blockIdx.x; // the grid is at most the items: every block has one
    mbar_wait(&pb.q_full[0], 0);
    Item w = item_of(0);
    mbar_wait(&pb.ring.k_full[0], 0);
    C::issue_qk(kStatePerItem<S> ? s1 : c_across.s, q_rows(0), base + L::K_OFF);
    for (;;) {
        const int block_tiles = key_tiles(a.p, w.m0 + B::BM);
        const int qb = k & 1;
        const uint32_t q_parity = (uint32_t)(k >> 1) & 1;
        const int64_t i_next = i + gridDim.x;
        const bool more = i_next < a.items;
        // The last item chains a dummy S_0: this item's Q against its last K tile, whose barrier
        // phases have completed (no load follows), so that one copy of the item's code serves all.
        const uint32_t g_last = g0 + block_tiles - 1;
        const Next nx = more ? Next{q_rows(qb ^ 1), &pb.q_full[qb ^ 1],
                                    (uint32_t)((k + 1) >> 1) & 1, g0 + block_tiles}
                             : Next{q_rows(qb), &pb.q_full[qb], q_parity, g_last};
        auto item = [&](C &c) {
            consume_item<T, D, B, S, OUT_SMEM, 2, true, true>(
                c, s1, a.p, &a.o, smem, pb.ring, &pb.q_full[qb], q_parity, &pb.q_empty[qb], qb,
                w.m0, w.h, w.b, block_tiles, g0, cw, nx);
        };
        if constexpr (kStatePerItem<S>) {
            C c;
            item(c);
        } else {
            item(c_across);
        }
        if (!more)
            break;
        g0 += block_tiles;
        k++;
        i = i_next;
        w = item_of(qb ^ 1); // its Q's phase completed: the chained S_0 above waited for it
    }
    wgmma_wait<0>(); // the dummy S_0
}

#endif // GP_SM90A

template <typename T, int D, int CONSUMERS, Schedule S, bool OUT_SMEM, bool CHAIN>
__global__ void
__launch_bounds__(Block<CONSUMERS>::threads, 1)
    flash_wgmma_persistent_kernel(const __grid_constant__ Args a)
{
#if GP_SM90A
    using B = Block<CONSUMERS, kTurns<D>>;
    using L = Layout<D, B::BM, 2>;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    const PBarriers bar = PBarriers::at<L::STAGES>(reinterpret_cast<uint64_t *>(smem + L::BAR_OFF));
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        tma_prefetch_map(&a.q);
        tma_prefetch_map(&a.k);
        tma_prefetch_map(&a.v);
        if (OUT_SMEM)
            tma_prefetch_map(&a.o);
        for (int qb = 0; qb < 2; qb++) {
            mbar_init(&bar.q_full[qb], 1);
            mbar_init(&bar.q_empty[qb], 128 * B::consumers);
        }
        for (int s = 0; s < L::STAGES; s++) {
            mbar_init(&bar.ring.k_full[s], 1);
            mbar_init(&bar.ring.v_full[s], 1);
            mbar_init(&bar.ring.k_empty[s], 128 * B::consumers);
            mbar_init(&bar.ring.v_empty[s], 128 * B::consumers);
        }
        mbar_init_fence();
    }
    __syncthreads();

    if (wg == 0) {
        regs_release<B::producer_regs>();
        if (threadIdx.x == 0)
            produce_persistent<D, B::BM>(a, smem, bar);
        return;
    }
    regs_claim<B::consumer_regs>();
    consume_persistent<T, D, B, S, OUT_SMEM, CHAIN>(a, smem, bar, wg - 1);
    if (OUT_SMEM && (threadIdx.x & 127) == 0)
        bulk_wait<0>(); // the O store issued last
#else
    __trap();
#endif
}

} // namespace
} // namespace gp_attn
