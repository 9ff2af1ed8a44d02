// flash_wgmma's mainloop: the producer's loads (TMA into the K/V ring) and a consumer's work on
// one item (Q·Kᵀ, the online softmax, P·V with wgmma, in one of three schedules). Part of
// attention_flash_wgmma.cu (block.cuh says how the parts fit).
#pragma once

#include "attention/flash_wgmma/scheduler.cuh"

#include <type_traits>

namespace gp_attn {
// An anonymous namespace in a header: these headers are parts of one translation unit,
// attention_flash_wgmma.cu, and its kernels stay internal to it (as they were in one file).
namespace {

#if GP_SM90A

// Key tile `tile` of (head h, batch b), K then V, into ring stage s of layout L, each once the
// consumers released the stage's previous tile (release: wait for that, at parity `reuse`; the
// ring's first STAGES tiles find it empty). TMA boxes are 64 columns wide (the swizzle's span),
// so a tile of D columns takes D/64 loads into consecutive column blocks.
template <int D, typename L>
__device__ __forceinline__ void
load_kv(const Args &a, uint8_t *smem, const Barriers &bar, int s, bool release, uint32_t reuse,
        int tile, int h, int b)
{
    uint8_t *k = smem + L::K_OFF + s * L::KV_BYTES, *v = smem + L::V_OFF + s * L::KV_BYTES;
    if (release)
        mbar_wait(&bar.k_empty[s], reuse);
    mbar_arrive_expect_tx(&bar.k_full[s], L::KV_BYTES);
#pragma unroll
    for (int c = 0; c < D / kBlockCols; c++)
        tma_load_4d(k + c * kBN * 128, &a.k, &bar.k_full[s], c * kBlockCols, tile * kBN, h, b);
    if (release)
        mbar_wait(&bar.v_empty[s], reuse);
    mbar_arrive_expect_tx(&bar.v_full[s], L::KV_BYTES);
#pragma unroll
    for (int c = 0; c < D / kBlockCols; c++)
        tma_load_4d(v + c * kBN * 128, &a.v, &bar.v_full[s], c * kBlockCols, tile * kBN, h, b);
}

// The fixed kernel's producer thread: the Q tile, then K and V tile j into stage j % STAGES once
// the consumers released tile j - STAGES from it.
template <int D, int BM>
__device__ void
produce(const Args &a, uint8_t *smem, const Barriers &bar, int m0, int n_tiles)
{
    using L = Layout<D, BM>;
    const int b = blockIdx.z, h = blockIdx.y;
    mbar_arrive_expect_tx(bar.q, L::Q_BYTES);
#pragma unroll
    for (int c = 0; c < D / kBlockCols; c++)
        tma_load_4d(smem + c * BM * 128, &a.q, bar.q, c * kBlockCols, m0, h, b);
    for (int j = 0; j < n_tiles; j++) {
        const uint32_t reuse = (uint32_t)(j / L::STAGES - 1) & 1; // parity of the release
        load_kv<D, L>(a, smem, bar, j % L::STAGES, j >= L::STAGES, reuse, j, h, b);
    }
}

// The persistent kernel's producer thread: each item's Q into the Q buffer the item before the
// last has released, then its K and V tiles into the ring, which runs on across items (the
// stage and parity from g, the block's tiles so far).
template <int D, int BM>
__device__ void
produce_persistent(const Args &a, uint8_t *smem, const PBarriers &bar)
{
    using L = Layout<D, BM, 2>;
    uint32_t g = 0; // K/V tiles this block loaded so far
    int k = 0;      // items so far
    for (int64_t i = blockIdx.x; i < a.items; i += gridDim.x, k++) {
        const Item w = work_item<BM>(a, i);
        const int qb = k & 1;
        if (k >= 2)
            mbar_wait(&bar.q_empty[qb], (uint32_t)((k >> 1) - 1) & 1);
        // for the consumers, who read it once this phase of q_full completes (the arrival below
        // releases the store, their wait acquires it)
        reinterpret_cast<Item *>(smem + L::ITEM_OFF)[qb] = w;
        mbar_arrive_expect_tx(&bar.q_full[qb], L::Q_BYTES);
#pragma unroll
        for (int c = 0; c < D / kBlockCols; c++)
            tma_load_4d(smem + qb * L::Q_BYTES + c * BM * 128, &a.q, &bar.q_full[qb],
                        c * kBlockCols, w.m0, w.h, w.b);
        const int n_tiles = key_tiles(a.p, w.m0 + BM);
        for (int j = 0; j < n_tiles; j++, g++) {
            const uint32_t reuse = (g / L::STAGES - 1) & 1; // read only where g >= STAGES
            load_kv<D, L>(a, smem, bar.ring, g % L::STAGES, g >= (uint32_t)L::STAGES, reuse, j, w.h,
                          w.b);
        }
    }
}

// Per consumer thread (accumulator layout of wgmma, as mma.sync's per 8 columns): element
// 4·i + e of an m64nN accumulator is row 16·warp + lane/4 + 8·(e/2), column 8·i + 2·(lane%4) +
// e%2 of the warpgroup's 64 rows.
template <typename T, int D, int BM> struct Consumer {
    static constexpr int NS = kBN / 2, NO = D / 2; // accumulator registers of S and O
    float s[NS], o[NO];
    uint32_t pa[kBN / 16][4]; // P as wgmma A fragments, one 16-key slice each
    float m[2], l[2];         // running max (raw scores) and this thread's share of the sum

    // S = Q·Kᵀ for this warpgroup's 64 rows into s (the member, or the lookahead schedule's
    // second tile), issued and committed (not waited for).
    static __device__ __forceinline__ void issue_qk(float (&s)[NS], uint32_t q, uint32_t k)
    {
        pin(s);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            const uint32_t off = (kk % 4) * 32; // 16 elements further within the 128-byte row
            const uint64_t da = desc_sw128(q + (kk / 4) * (BM * 128) + off, 16, 1024);
            const uint64_t db = desc_sw128(k + (kk / 4) * (kBN * 128) + off, 16, 1024);
            Wgmma<T, kBN>::ss(s, da, db, kk > 0);
        }
        wgmma_commit();
        pin(s);
    }

    // O += P·V, issued and committed. V's 16-key slice kk starts 16 rows (2048 bytes) further.
    __device__ __forceinline__ void issue_pv(uint32_t v)
    {
        pin(o);
        pin(pa);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBN / 16; kk++)
            Wgmma<T, D>::rs(o, pa[kk], desc_sw128(v + kk * 16 * 128, kBN * 128, 1024), 1);
        wgmma_commit();
        pin(o);
        pin(pa);
    }

    // -inf for keys at or past n and (causal) keys after the row. r0: this thread's first row.
    __device__ __forceinline__ void mask(float (&s)[NS], int r0, int col0, int n, bool causal)
    {
#pragma unroll
        for (int i = 0; i < kBN / 8; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int row = r0 + 8 * (e >> 1), col = col0 + 8 * i + (e & 1);
                if (col >= n || (causal && col > row))
                    s[4 * i + e] = -CUDART_INF_F;
            }
    }

    // S becomes P = 2^(s·sl2 - max·sl2) against the updated running max; alpha: the factor by
    // which O and l must shrink (the old max against the new); sum: this thread's part of the
    // tile's row sums. A row whose max is still -inf keeps a zero base (no -inf - -inf).
    __device__ __forceinline__ void softmax(float (&s)[NS], float sl2, float alpha[2], float sum[2])
    {
#pragma unroll
        for (int half = 0; half < 2; half++) {
            float mx = m[half];
#pragma unroll
            for (int i = 0; i < kBN / 8; i++)
                mx = fmaxf(mx, fmaxf(s[4 * i + 2 * half], s[4 * i + 2 * half + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float base = mx == -CUDART_INF_F ? 0.0f : mx * sl2;
            alpha[half] = ex2(m[half] * sl2 - base);
            m[half] = mx;
            float acc = 0.0f;
#pragma unroll
            for (int i = 0; i < kBN / 8; i++)
#pragma unroll
                for (int e = 2 * half; e < 2 * half + 2; e++) {
                    const float x = ex2(fmaf(s[4 * i + e], sl2, -base));
                    s[4 * i + e] = x;
                    acc += x;
                }
            sum[half] = acc;
        }
    }

    // SKIP_UNCHANGED: leave O alone where every row of the warp kept its max (alpha exactly 1:
    // ex2 of 0); a warp-uniform branch, so no divergence.
    template <bool SKIP_UNCHANGED>
    __device__ __forceinline__ void rescale(const float alpha[2], const float sum[2])
    {
#pragma unroll
        for (int half = 0; half < 2; half++)
            l[half] = l[half] * alpha[half] + sum[half];
        if (SKIP_UNCHANGED && !__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f))
            return;
#pragma unroll
        for (int half = 0; half < 2; half++) {
#pragma unroll
            for (int i = 0; i < D / 8; i++) {
                o[4 * i + 2 * half] *= alpha[half];
                o[4 * i + 2 * half + 1] *= alpha[half];
            }
        }
    }

    // P in the input type, as A fragments: slice kk holds keys 16·kk .. 16·kk + 15, i.e. the
    // accumulator elements 8·kk .. 8·kk + 7 (two 8-column groups).
    __device__ __forceinline__ void to_a(const float (&s)[NS])
    {
#pragma unroll
        for (int kk = 0; kk < kBN / 16; kk++)
#pragma unroll
            for (int r = 0; r < 4; r++)
                pa[kk][r] = tc::Mma<T>::pack(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
    }

    // O / l, rounded to T, from registers for the rows that exist (epilogue.cuh).
    __device__ __forceinline__ void store(const gp_attn_params &p, int r0, int lane, int b, int h);
    // Or out through shared memory and TMA (epilogue.cuh).
    __device__ __forceinline__ void store_tma(const CUtensorMap *map, uint32_t buf, int t,
                                              int row_lo, int h, int b, int bar_id);
};

// block_tiles: the block's key tiles, key_tiles(p, m0 + BM), which the producer loads. With
// BM = BN (2 consumers) every consumer needs all of them. With BM = 192 a consumer computes its
// own rows' tiles only (causal: a warpgroup whose rows end before the block's last tile starts
// has one fewer; m0 = 0: rows 0-127 need keys 0-127 only, the block loads 0-255). The producer
// never waits for a release that such a consumer does not make: row ends differ from the block's by
// at most 128 = BN, so a consumer has at least block_tiles - 1 tiles and releases all but its last
// one (K) or two (V: the overlapped schedule's final P·V releases nothing), while the producer
// waits only for tiles STAGES (>= 2) or more before its last. The phases left incomplete are never
// waited on.
// (The fixed kernel, QBUFS = 1; the persistent one releases every tile, see below.)
//
// One work item of consumer warpgroup cw: query rows m0 .. m0 + BM - 1 of head h, batch b, whose
// Q waits in Q buffer qb (q_full, phase q_parity); tile j of the item is the block's tile g0 + j of
// the K/V ring. QBUFS = 1, the fixed kernel: one item, g0 = 0, Q buffer 0. QBUFS = 2, the
// persistent kernel: more items follow, so the consumer also releases what the fixed one leaves
// (the V of its last P·V, its Q buffer, the tiles past its rows), keeping every phase in step.
// Both are one loop, so the two kernels run the same code per tile; what differs is constexpr.
// The persistent kernel chains its items (v5): PRE, the item's S_0 = Q·K_0ᵀ was issued into c.s
// before it started (by the block's prologue or the item before); CHAIN, the next item's S_0 (nx)
// is issued behind this item's last P·V, so that Q·K_0ᵀ runs while this item waits for its P·V and
// stores O, instead of after. Chained, c outlives the item: a wgmma in flight writes c.s across
// the items' boundary.
// The turns of a block's two consumers (v11, B::turns; FA3's scheduler barrier): consumer cw
// issues the wgmmas of a step (an item's S_0; S_j with P·V_(j-1)) between take and pass, so that
// the tensor pipe takes the two consumers' products in alternation and one's softmax runs while
// the other's products do. Named barrier kTurnBarrier + cw (both consumers' 256 threads) is cw's
// turn: the other consumer arrives at it when passing, cw waits at it when taking. Consumer 0
// takes the first turn (open, before its first item) and waits for the last pass (close, after
// its last), so that every phase completes; in between both take the same number of turns, since
// both consumers of the 128-row block compute every key tile of every item. Without turns
// (ON = false) every call is empty.
template <bool ON> struct Turns {
    static __device__ __forceinline__ void open(int cw)
    {
        if (ON && cw == 0)
            named_arrive<256>(kTurnBarrier);
    }
    static __device__ __forceinline__ void take(int cw)
    {
        if constexpr (ON)
            named_sync<256>(kTurnBarrier + cw);
    }
    static __device__ __forceinline__ void pass(int cw)
    {
        if constexpr (ON)
            named_arrive<256>(kTurnBarrier + (cw ^ 1));
    }
    static __device__ __forceinline__ void close(int cw)
    {
        if (ON && cw == 0)
            named_sync<256>(kTurnBarrier);
    }
};

struct Next {
    uint32_t q;        // the next item's Q (this warpgroup's rows), a shared-memory address
    uint64_t *q_full;  // its Q buffer's full barrier
    uint32_t q_parity; // and that phase
    uint32_t g;        // its first K tile in the block's ring
};

template <typename T, int D, typename B, Schedule S, bool OUT_SMEM, int QBUFS, bool PRE, bool CHAIN>
__device__ __forceinline__ void
consume_item(Consumer<T, D, B::BM> &c, float (&s1)[Consumer<T, D, B::BM>::NS],
             const gp_attn_params &p, const CUtensorMap *o_map, uint8_t *smem, const Barriers &bar,
             uint64_t *q_full, uint32_t q_parity, uint64_t *q_empty, int qb, int m0, int h, int b,
             int block_tiles, uint32_t g0, int cw, const Next &nx)
{
    using L = Layout<D, B::BM, QBUFS>;
    using C = Consumer<T, D, B::BM>;
    constexpr bool ring = QBUFS > 1;
    static_assert(ring || !(PRE || CHAIN), "only the persistent kernel chains items");
    // The S tile an item starts in, where a chained item issues the next one's S_0: c.s, or s1
    // where c lives per item (kStatePerItem).
    constexpr bool s1_first = CHAIN && kStatePerItem<S>;
    float(&sa)[C::NS] = *(s1_first ? &s1 : &c.s);
    float(&sb)[C::NS] = *(s1_first ? &c.s : &s1);
    const int t = threadIdx.x & 127, warp = t >> 5, lane = t & 31;
    const int row_lo = m0 + 64 * cw; // this warpgroup's first row
    const int n_tiles = B::BM == kBN ? block_tiles : key_tiles(p, row_lo + 64);
    const int r0 = row_lo + 16 * warp + (lane >> 2); // this thread's first row (+8: second)
    const int n = p.seq;
    const bool causal = p.causal != 0;
    const float sl2 = p.scale * kLog2e;
    // its 64 rows in each Q column block
    const uint32_t q = smem_u32(smem) + qb * L::Q_BYTES + cw * 64 * 128;
    const uint32_t k0 = smem_u32(smem) + L::K_OFF, v0 = smem_u32(smem) + L::V_OFF;
    auto stage = [](uint32_t g) { return (int)(g % L::STAGES); };
    auto parity = [](uint32_t g) { return (g / L::STAGES) & 1; };

#pragma unroll
    for (int i = 0; i < C::NO; i++)
        c.o[i] = 0.0f;
    c.m[0] = c.m[1] = -CUDART_INF_F;
    c.l[0] = c.l[1] = 0.0f;
    float alpha[2], sum[2];
    // Tile j's scores in s, masked where it crosses the end of the sequence or the diagonal.
    auto scores_ready = [&](float(&s)[C::NS], int j) {
        const int col0 = j * kBN;
        if (col0 + kBN > n || (causal && col0 + kBN - 1 > row_lo))
            c.mask(s, r0, col0 + 2 * (lane & 3), n, causal);
        c.softmax(s, sl2, alpha, sum);
    };
    // Tiles past this warpgroup's rows (causal, 192-row block): released once loaded, so that
    // each of their barrier phases completes exactly when the block is done with it.
    auto release_skipped = [&]() {
        for (int j = n_tiles; j < block_tiles; j++) {
            const uint32_t gj = g0 + j;
            const int s = stage(gj);
            mbar_wait(&bar.k_full[s], parity(gj));
            mbar_arrive(&bar.k_empty[s]);
            mbar_wait(&bar.v_full[s], parity(gj));
            mbar_arrive(&bar.v_empty[s]);
        }
    };
    static_assert(!B::turns || (B::consumers == 2 && S == Schedule::overlapped),
                  "turns: two consumers, overlapped (the head_dim 128 block, never chained)");
    using Turn = Turns<B::turns>;
    // S_0 into sa: issued here, or (PRE) already in flight.
    auto first_scores = [&]() {
        if constexpr (!PRE) {
            mbar_wait(&bar.k_full[stage(g0)], parity(g0));
            Turn::take(cw);
            c.issue_qk(sa, q, k0 + stage(g0) * L::KV_BYTES);
            Turn::pass(cw);
        }
        wgmma_wait<0>();
        pin(sa);
        mbar_arrive(&bar.k_empty[stage(g0)]);
    };
    // After the item's last P·V is issued (its P already in pa, so sa is free): CHAIN issues the
    // next item's S_0 into sa and waits for the P·V alone (wait<1>); otherwise waits for all.
    auto finish_last_pv = [&]() {
        if constexpr (CHAIN) {
            release_skipped(); // its tiles come before the next item's in the ring
            mbar_wait(nx.q_full, nx.q_parity);
            mbar_wait(&bar.k_full[stage(nx.g)], parity(nx.g));
            c.issue_qk(sa, nx.q, k0 + stage(nx.g) * L::KV_BYTES);
            wgmma_wait<1>();
        } else {
            wgmma_wait<0>();
        }
        pin(c.o);
        pin(c.pa);
    };

    mbar_wait(q_full, q_parity);
    if constexpr (S == Schedule::overlapped) {
        first_scores();
        scores_ready(c.s, 0);
        c.template rescale<B::skip_unchanged_rescale>(alpha, sum);
        c.to_a(c.s);
        for (int j = 1; j < n_tiles; j++) {
            const uint32_t gj = g0 + j, gp = gj - 1;
            const int s = stage(gj), sp = stage(gp);
            mbar_wait(&bar.k_full[s], parity(gj));
            Turn::take(cw);
            c.issue_qk(c.s, q, k0 + s * L::KV_BYTES);
            mbar_wait(&bar.v_full[sp], parity(gp));
            c.issue_pv(v0 + sp * L::KV_BYTES);
            Turn::pass(cw);
            wgmma_wait<1>(); // S of tile j; P·V of tile j-1 may still run
            pin(c.s);
            mbar_arrive(&bar.k_empty[s]);
            scores_ready(c.s, j);
            wgmma_wait<0>();
            pin(c.o);
            pin(c.pa);
            mbar_arrive(&bar.v_empty[sp]);
            c.template rescale<B::skip_unchanged_rescale>(alpha, sum);
            c.to_a(c.s);
        }
        const uint32_t gl = g0 + n_tiles - 1;
        mbar_wait(&bar.v_full[stage(gl)], parity(gl));
        c.issue_pv(v0 + stage(gl) * L::KV_BYTES);
        finish_last_pv();
        if constexpr (ring)
            mbar_arrive(&bar.v_empty[stage(gl)]); // the fixed kernel's ring ends here
    } else if constexpr (S == Schedule::lookahead) {
        // Two S tiles: tile j's in cur while tile j+1's arrives in nxt; they alternate between sa
        // (even j) and sb (odd j), registers cannot be indexed. A step starts with S_j complete
        // and K_j released, P_(j-1)·V_(j-1) in flight (j > 0). Commit groups in flight, oldest
        // first: at a step's start [PV_(j-1)]; once QK_(j+1) is issued [PV_(j-1), QK_(j+1)],
        // so wait<1> is PV_(j-1) done (j = 0: nothing to wait for); once PV_j is issued
        // [QK_(j+1), PV_j], so wait<1> is QK_(j+1) done. The last tile's step (last) issues no
        // Q·Kᵀ of this item and waits with wait<0> (CHAIN: the next item's S_0, then wait<1>).
        // Every wait is unconditional within its step: ptxas serializes all wgmmas (C7513) when a
        // path through the branches could leave one in flight while its registers are rewritten.
        // A step of tile j; tag last (std::true_type): j = n_tiles - 1, no Q·K_(j+1)ᵀ, nxt unused.
        auto step = [&](int j, float(&cur)[C::NS], float(&nxt)[C::NS], auto tag) {
            constexpr bool LAST = decltype(tag)::value;
            const uint32_t gj = g0 + j;
            if constexpr (!LAST) {
                mbar_wait(&bar.k_full[stage(gj + 1)], parity(gj + 1));
                c.issue_qk(nxt, q, k0 + stage(gj + 1) * L::KV_BYTES);
            }
            scores_ready(cur, j); // Q·K_(j+1)ᵀ and P_(j-1)·V_(j-1) run meanwhile
            if constexpr (LAST)
                wgmma_wait<0>();
            else
                wgmma_wait<1>();
            pin(c.o);
            pin(c.pa);
            if (j > 0)
                mbar_arrive(&bar.v_empty[stage(gj - 1)]);
            c.template rescale<B::skip_unchanged_rescale>(alpha, sum);
            c.to_a(cur);
            mbar_wait(&bar.v_full[stage(gj)], parity(gj));
            c.issue_pv(v0 + stage(gj) * L::KV_BYTES);
            if constexpr (LAST) {
                finish_last_pv();
            } else {
                wgmma_wait<1>(); // S_(j+1); P_j·V_j may still run
                pin(nxt);
                mbar_arrive(&bar.k_empty[stage(gj + 1)]);
            }
        };
        const std::true_type last;
        const std::false_type middle;
        first_scores();
        // Ends in a last step only (n_tiles >= 1 as seq >= 1): a loop condition would add an exit
        // path with a P·V in flight, on which ptxas serializes every wgmma (C7514).
        for (int j = 0;; j += 2) { // S_j in sa
            if (j + 1 == n_tiles) {
                step(j, sa, sb, last);
                break;
            }
            step(j, sa, sb, middle);
            if (j + 2 == n_tiles) {
                step(j + 1, sb, sa, last);
                break;
            }
            step(j + 1, sb, sa, middle);
        }
        if constexpr (ring)
            mbar_arrive(&bar.v_empty[stage(g0 + n_tiles - 1)]); // as overlapped's last P·V
    } else {
        // Sequential: a tile's Q·Kᵀ, softmax and P·V, each waited for. Chained, the first tile's
        // S_0 is already in flight and the last tile's P·V is followed by the next item's S_0.
        // FIRST and LAST are std::integral_constant<bool, ...>, so each copy is straight code.
        auto tile = [&](int j, auto first, auto last) {
            const uint32_t gj = g0 + j;
            const int s = stage(gj);
            if constexpr (decltype(first)::value) {
                first_scores();
            } else {
                mbar_wait(&bar.k_full[s], parity(gj));
                c.issue_qk(c.s, q, k0 + s * L::KV_BYTES);
                wgmma_wait<0>();
                pin(c.s);
                mbar_arrive(&bar.k_empty[s]);
            }
            scores_ready(c.s, j);
            c.template rescale<B::skip_unchanged_rescale>(alpha, sum);
            c.to_a(c.s);
            mbar_wait(&bar.v_full[s], parity(gj));
            c.issue_pv(v0 + s * L::KV_BYTES);
            if constexpr (decltype(last)::value) {
                finish_last_pv();
            } else {
                wgmma_wait<0>();
                pin(c.o);
            }
            mbar_arrive(&bar.v_empty[s]);
        };
        const std::true_type yes;
        const std::false_type no;
        if constexpr (!PRE && !CHAIN) {
            for (int j = 0; j < n_tiles; j++)
                tile(j, no, no);
        } else if (n_tiles == 1) {
            tile(0, yes, yes);
        } else {
            tile(0, yes, no);
            for (int j = 1; j + 1 < n_tiles; j++)
                tile(j, no, no);
            tile(n_tiles - 1, no, yes);
        }
    }
    if constexpr (ring) {
        mbar_arrive(q_empty); // every S of this item has completed
        if constexpr (!CHAIN)
            release_skipped();
    }
    if constexpr (OUT_SMEM) {
        // No `row_lo < n` guard: TMA clips a box that lies wholly past the sequence, and a
        // branch here on a value ptxas cannot prove uniform takes the persistent kernels' tile
        // loops off the uniform datapath (descriptors and mbarrier addresses back in ordinary
        // registers, about 7 % slower on long items; NOTES.md, "O through shared memory").
        c.store_tma(o_map, smem_u32(smem) + L::O_OFF + cw * (64 * D * 2), t, row_lo, h, b, 1 + cw);
    } else {
        c.store(p, r0, lane, b, h);
    }
}

#endif // GP_SM90A

} // namespace
} // namespace gp_attn
