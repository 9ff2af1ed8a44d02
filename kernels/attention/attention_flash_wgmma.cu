// Flash attention for Hopper (sm_90a): TMA loads, warpgroup MMA (wgmma), warp specialization.
// fp16/bf16 inputs, head_dim 64 or 128, fp32 accumulation (kernels/attention/NOTES.md).
//
// Versions (each runs on main at the head_dim it won; docs/benchmarks.md, "flash_wgmma"):
//   v1  head_dim 128. A block of three warpgroups owns BM = 128 query rows of one (batch, head):
//       - warpgroup 0, the producer, gives most of its registers back (setmaxnreg) and one thread
//         issues every load: the Q tile once, then K and V tiles of BN = 128 keys with TMA
//         (cp.async.bulk.tensor, 128-byte swizzle, tensor maps built on the host) into a ring of
//         STAGES buffers (4 at head_dim 64, 2 at 128). K and V have their own full/empty mbarrier
//         pairs per stage, so a K buffer is refilled as soon as S = Q·Kᵀ has read it.
//       - warpgroups 1 and 2, the consumers, take 64 query rows each: S = Q·Kᵀ as wgmma
//         m64n128k16 with both operands in shared memory, the online softmax on the fp32
//         accumulators in registers (row max over the quad of threads that share a row, exp2
//         with the scale folded into one FFMA), P converted in registers to the A operand of
//         O += P·V, a wgmma m64nDk16 whose B (V, N-major) comes from shared memory.
//       Overlapped: S for tile j is issued before P·V of tile j-1, and the softmax of tile j runs
//       while P·V still runs; O is rescaled only after it finished (faster than running S,
//       softmax and P·V in sequence: 638 against 566 TFLOP/s at N = 4096 on an H100).
//       Ragged sequences: TMA zero-fills rows past the end (also of the Q tile); their scores are
//       set to -inf, and their output rows are not stored. Causal: heaviest query tiles first,
//       no key tile past the block's last row is loaded; tiles crossing the diagonal are masked.
//       With BM = BN and tiles aligned to them, every row sees at least one key of every tile it
//       computes, so no row's running max is ever -inf after its first tile.
//       O leaves from registers: each thread stores pairs of adjacent outputs (4 bytes).
//   v2  head_dim 64: BM = 192 query rows, three consumer warpgroups + the producer = 512 threads.
//       At D = 64 the exponentials of a tile (MUFU, 16/clk/SM) take as long as its wgmma; with
//       three consumers two of them can keep the tensor pipe busy while the third runs its
//       softmax. Registers: launched at 128 (the __launch_bounds__ cap at 512 threads), the
//       producer keeps 24, consumers take 160 (24·128 + 3·160·128 = 64 512 <= 65 536), too few
//       for O at head_dim 128. S, softmax and P·V run in sequence within a consumer (faster here
//       than overlapped, and than v1's block: 445 against 409 and 392 TFLOP/s at N = 4096). O's
//       rescale is skipped in a warp where no row raised its max (alpha is exactly 1 there, so
//       the result is bit for bit the same).
//       Causal with BM != BN: a consumer computes only the key tiles up to its own last row
//       (see consume). Every tile it computes starts at or before its first row (64-row
//       warpgroups, 128-key tiles), so as in v1 every row's running max is finite after tile 0
//       for finite inputs; the -inf guard of softmax stays for Inf in Q or K (NOTES.md).
//   v3  issue 27: persistent blocks (grid = SMs, each walks (query tile, head, batch) work
//       items, two Q buffers so the next item's loads overlap this one's last tiles and O
//       store), for both blocks above, and the 128-row overlapped block at head_dim 64
//       (persistent or not). The schedule is chosen per shape (gp_attn_flash_wgmma_schedule,
//       NOTES.md); _variant 1-4 of _C._attention force one (attention.h).
//   v4  issue 27 (_variant 5, persist_lookahead; what head_dim 64 runs but where 192-row items
//       fill the waves better): the persistent 128-row block with two S tiles per consumer:
//       S_(j+1) = Q·K_(j+1)ᵀ is issued before the softmax of S_j, then P_j·V_j, so the tensor
//       pipe has both of those products (Q·K_(j+1)ᵀ and P_(j-1)·V_(j-1)) to run while the
//       exponentials of tile j do (FA3's intra-warpgroup overlap one tile deeper than overlapped;
//       NOTES.md has the floors and the registers: 2·64 for S, 32 for O, 32 for P, within the 240
//       a 2-consumer thread has).
//       The barriers' phases are those of overlapped (same tiles, same releases); only the order
//       of the waits within a tile changed. head_dim 128 (O 64 registers) is refused.
//   v5  issue 27: the persistent kernels but v4 chain their items (the next item's S_0 issued
//       behind this item's last P·V, consume_item), and causal 128-row items go out in groups
//       of heads whose K and V fit the L2, odd rounds of the stride backwards (work_item).
//   v6  issue 27: the producer computes each item's (query tile, head, batch) with divisions by
//       constants (FastDiv) and hands it to the consumers in shared memory beside the item's Q
//       buffer; before, every consumer thread did 64-bit divisions between items.
//   v7  issue 27: O leaves through shared memory (stmatrix into each consumer's 64-row buffer, a
//       named barrier, one TMA store per 64-column block) where an item has few key tiles, from
//       registers elsewhere: every kernel is built both ways (OUT_SMEM), and
//       gp_attn_flash_wgmma_out_smem picks per shape, since some kernels built with it run
//       their tile loops slower on long items (NOTES.md, "O through shared memory").
//   v8  issue 27: the head_dim 128 persistent block no longer chains its items: chained, ptxas
//       scheduled its tile loop so that it ran 7-13 % slower from N = 1024, and it now wins over
//       the fixed block up to N = 2048 (NOTES.md, "Chaining at head_dim 128").
//   v9  issue 27: causal items of the persistent kernels in twos of equal work, a query tile
//       with its complement on one block (work_item, paired), where the order by L2 groups
//       left the blocks' loads up to 11 % apart (NOTES.md, "Causal items in twos").
//   v10 issue 27 (_variant 6, persist_lookahead_chained): v4 with its items chained as in v5, only
//       the S tile an item starts in outliving items (CHAIN, consume_persistent); what head_dim
//       64 runs up to N = 2048, where an item's start and end weigh more than its tile loop's
//       schedule (NOTES.md, "persist_lookahead chained").
//   v11 issue 27: the head_dim 128 blocks' consumers (fixed and persistent) take turns issuing
//       their wgmmas (named barriers, consume_item), FA3's scheduler barrier on top of the
//       overlapped schedule: the persistent block 1.02-1.05 of cuDNN at N = 512 to 2048 against
//       0.99-1.02, and ahead of the fixed block without causal up to N = 8192 (NOTES.md, "Turns
//       at head_dim 128"). The ping-pong removed below took turns too, but waited for each
//       product.
//   Measured and removed (git history before issue 24): v1's block at head_dim 64, v2 overlapped,
//   and a ping-pong schedule of the consumers (named barriers), which was no faster.
#include "attention_sm90.cuh"

// The block constants below are used in device code only; nvcc's host pass calls them unused.
#pragma nv_diag_suppress 177

#include <atomic>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

namespace gp_attn {
namespace {

constexpr int kBN = 128; // keys per tile
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

// The producer thread: the Q tile, then K and V tile j into stage j % STAGES once the consumers
// released tile j - STAGES from it. TMA boxes are 64 columns wide (the swizzle's span), so a tile
// of D columns takes D/64 loads into consecutive column blocks.
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
        const int s = j % L::STAGES;
        const uint32_t reuse = (uint32_t)(j / L::STAGES - 1) & 1; // parity of the release
        uint8_t *k = smem + L::K_OFF + s * L::KV_BYTES, *v = smem + L::V_OFF + s * L::KV_BYTES;
        if (j >= L::STAGES)
            mbar_wait(&bar.k_empty[s], reuse);
        mbar_arrive_expect_tx(&bar.k_full[s], L::KV_BYTES);
#pragma unroll
        for (int c = 0; c < D / kBlockCols; c++)
            tma_load_4d(k + c * kBN * 128, &a.k, &bar.k_full[s], c * kBlockCols, j * kBN, h, b);
        if (j >= L::STAGES)
            mbar_wait(&bar.v_empty[s], reuse);
        mbar_arrive_expect_tx(&bar.v_full[s], L::KV_BYTES);
#pragma unroll
        for (int c = 0; c < D / kBlockCols; c++)
            tma_load_4d(v + c * kBN * 128, &a.v, &bar.v_full[s], c * kBlockCols, j * kBN, h, b);
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

    // O / l, rounded to T, for the rows that exist.
    __device__ __forceinline__ void store(const gp_attn_params &p, int r0, int lane, int b, int h)
    {
        const Slice<T> out = slice<T>(p.o, p.o_stride, b, h);
#pragma unroll
        for (int half = 0; half < 2; half++) {
            float sum = l[half];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            const float inv = 1.0f / sum;
            const int row = r0 + 8 * half;
            if (row >= p.seq)
                continue;
            T *dst = out.row(row) + 2 * (lane & 3);
#pragma unroll
            for (int i = 0; i < D / 8; i++) {
                const uint32_t pair =
                    tc::Mma<T>::pack(o[4 * i + 2 * half] * inv, o[4 * i + 2 * half + 1] * inv);
                *reinterpret_cast<uint32_t *>(dst + 8 * i) = pair;
            }
        }
    }

    // Or out through shared memory: this warpgroup's 64 rows into its part of the O buffer (at
    // `buf`, laid out as a TMA load of the same box would leave them: 64-column blocks of 64 rows
    // × 128 bytes, each row's 16-byte chunks swizzled by the row), then one TMA store per column
    // block by the warpgroup's first thread, which TMA clips at the end of the sequence. Before
    // writing, that thread waits until its previous store has read the buffer; named barrier
    // `bar_id` (the warpgroup's 128 threads) orders the two. stmatrix writes each 8×8 matrix's 8
    // rows of 16 bytes into 8 different chunks of the swizzle: no bank conflicts.
    __device__ __forceinline__ void store_tma(const CUtensorMap *map, uint32_t buf, int t,
                                              int row_lo, int h, int b, int bar_id)
    {
        const int warp = t >> 5, lane = t & 31;
        float inv[2];
#pragma unroll
        for (int half = 0; half < 2; half++) {
            float sum = l[half];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            inv[half] = 1.0f / sum;
        }
        if (t == 0)
            bulk_wait_read<0>();
        named_sync<128>(bar_id);
        {
            const int q = lane >> 3, row = 16 * warp + (lane & 7) + 8 * (q & 1);
#pragma unroll
            for (int j = 0; j < D / 16; j++) {
                uint32_t r[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int i = 2 * j + (e >> 1), half = e & 1;
                    r[e] = tc::Mma<T>::pack(o[4 * i + 2 * half] * inv[half],
                                            o[4 * i + 2 * half + 1] * inv[half]);
                }
                const int i = 2 * j + (q >> 1);
                stmatrix_x4(buf + (i / 8) * (64 * 128) + row * 128 + (((i & 7) ^ (row & 7)) << 4),
                            r);
            }
        }
        fence_async_shared();
        named_sync<128>(bar_id);
        if (t == 0) {
#pragma unroll
            for (int c = 0; c < D / kBlockCols; c++)
                tma_store_4d(map, buf + c * (64 * 128), c * kBlockCols, row_lo, h, b);
            bulk_commit();
        }
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

// ---- v3 (issue 27, under measurement: _variant 1 and 3): persistent blocks ----------------------
// One block per SM (grid = min(SMs, items)); block x takes work items x, x + grid, x + 2·grid, ...
// of (query tile, head, batch). The producer loads the next item's Q into the other of two Q
// buffers and its K, V tiles into the same ring as soon as stages free up, so the next item's
// loads overlap this item's last tiles and its O store; the ring's stage and parity come from a
// count of the block's tiles over all its items. Every consumer releases every tile the block
// loads (a causal 192-row block's first consumer waits for and releases the tiles it skips), so
// the barriers' phases stay in step across items.

#if GP_SM90A

struct PBarriers {
    Barriers ring;
    uint64_t *q_full, *q_empty; // per Q buffer
    template <int STAGES> static __device__ PBarriers at(uint64_t *base)
    {
        return PBarriers{Barriers::at<STAGES>(base), base + 1 + 4 * STAGES, base + 3 + 4 * STAGES};
    }
};

struct Item {
    int m0, h, b;
};

// Work item i, the k-th item of block x = i mod grid (i = x + k · grid, the grid's stride).
// Causal and paired (v9): a (batch, head)'s query tiles go in twos of equal work, a tile with its
// complement (m_tiles - 1 with 0, m_tiles - 2 with 1, ...; with an odd m_tiles the middle tile of
// an even (batch, head) goes with that of the next, whose order starts with it), and the twos
// in the order of the (batch, head) pairs. Block x takes two x + j · grid in its rounds 2j and
// 2j + 1 for the first a.two_rounds rounds, so every block gets the same work there; what is
// left (a round and a partial one, or the partial one) goes out in the same order, a two to each
// block of the partial round and one item to the others (or one item each). Every block keeps
// the stride's item count: the consumers count their items as in the other orders, and ptxas
// builds the same tile loop (a count of their own changed persist_lookahead's schedule and ran it
// up to 17 % slower on an H100). A (batch, head)'s twos go to neighbouring blocks, which share
// its K and V in L2.
// Causal otherwise: the (batch, head) pairs go in groups of a.group, and within a group the
// query tiles heaviest first (m_tiles - 1 first, for every pair of the group, then m_tiles - 2,
// ...), so blocks that run together share a few heads' K and V in L2, and the snake below hands
// each block a mix of heavy and light items. Not causal: the query tiles of one (batch, head)
// are consecutive items, so blocks running together share its K and V in L2.
template <int BM>
__device__ __forceinline__ Item
work_item(const Args &a, int64_t item)
{
    const gp_attn_params &p = a.p;
    const uint32_t bh = (uint32_t)p.batch * p.heads, items = (uint32_t)a.items;
    uint32_t i = (uint32_t)item, mt, r;
    if (p.causal && a.paired) {
        // i becomes the item's place in the order of twos
        const uint32_t grid = gridDim.x, k = a.by_grid.div(i), x = i - k * grid;
        const uint32_t rest = (uint32_t)a.rest, last = (uint32_t)a.last_round;
        if (k < (uint32_t)a.two_rounds)
            i = 2 * ((k >> 1) * grid + x) + (k & 1);
        else if (a.rest_twos && x < last) // a two: this round's item and the next one's
            i = rest + 2 * x + (k - (uint32_t)a.two_rounds);
        else if (a.rest_twos)
            i = rest + 2 * last + (x - last);
        else
            i = rest + x;
        const uint32_t m_tiles = (uint32_t)a.m_tiles;
        r = a.by_m_tiles.div(i);
        uint32_t at = i - r * m_tiles; // the tile's place in its (batch, head)'s order
        if ((m_tiles & 1) && (r & 1) && at-- == 0)
            mt = m_tiles >> 1; // an odd (batch, head)'s first: the middle tile
        else
            mt = (at & 1) ? at >> 1 : m_tiles - 1 - (at >> 1);
    } else if (p.causal) {
        // Odd rounds of the grid's stride run backwards (a snake), so the block that takes the
        // heaviest item of one round takes the lightest of the next: over two rounds every block
        // gets about the same work, where in-order strides gave block 0 the heaviest item of
        // every round (the last round, when partial, stays in order: its items are the fewest).
        const uint32_t grid = gridDim.x, round = a.by_grid.div(i);
        if ((round & 1) && (round + 1) * grid <= items)
            i = round * grid + (grid - 1 - (i - round * grid));
        const uint32_t per_group = (uint32_t)a.group * a.m_tiles, g = a.by_group_tiles.div(i);
        const uint32_t first = g * a.group, within = i - g * per_group;
        // the last group may have fewer pairs: a plain division there
        const uint32_t pairs = bh - first < (uint32_t)a.group ? bh - first : a.group;
        const uint32_t q = pairs == (uint32_t)a.group ? a.by_group.div(within) : within / pairs;
        mt = a.m_tiles - 1 - q;
        r = first + (within - q * pairs);
    } else {
        r = a.by_m_tiles.div(i);
        mt = i - r * a.m_tiles;
    }
    const uint32_t b = a.by_heads.div(r);
    return Item{(int)mt * BM, (int)(r - b * p.heads), (int)b};
}

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
            const int s = g % L::STAGES;
            const uint32_t reuse = (g / L::STAGES - 1) & 1; // read only where g >= STAGES
            uint8_t *kb = smem + L::K_OFF + s * L::KV_BYTES, *vb = smem + L::V_OFF + s * L::KV_BYTES;
            if (g >= (uint32_t)L::STAGES)
                mbar_wait(&bar.ring.k_empty[s], reuse);
            mbar_arrive_expect_tx(&bar.ring.k_full[s], L::KV_BYTES);
#pragma unroll
            for (int c = 0; c < D / kBlockCols; c++)
                tma_load_4d(kb + c * kBN * 128, &a.k, &bar.ring.k_full[s], c * kBlockCols, j * kBN,
                            w.h, w.b);
            if (g >= (uint32_t)L::STAGES)
                mbar_wait(&bar.ring.v_empty[s], reuse);
            mbar_arrive_expect_tx(&bar.ring.v_full[s], L::KV_BYTES);
#pragma unroll
            for (int c = 0; c < D / kBlockCols; c++)
                tma_load_4d(vb + c * kBN * 128, &a.v, &bar.ring.v_full[s], c * kBlockCols, j * kBN,
                            w.h, w.b);
        }
    }
}

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
    uint32_t g0 = 0; // the block's K/V tiles before this item
    int k = 0;       // items before this one
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
    const PBarriers bar =
        PBarriers::at<L::STAGES>(reinterpret_cast<uint64_t *>(smem + L::BAR_OFF));
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

// ---- host (the tensor maps' encoding: attention_sm90.cuh) -------------------------------------

// runnable_here for the current device, asked once per device: every instantiation comes from
// this one translation unit, so they share the binary version. 0: not asked yet, 1: yes, -1: no.
bool
runnable_on_current_device()
{
    constexpr int kMaxDevices = 64;
    static std::atomic<int> known[kMaxDevices];
    int device;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
        (void)cudaGetLastError();
        return false;
    }
    int state = known[device].load(std::memory_order_relaxed);
    if (state == 0) {
        state =
            runnable_here(flash_wgmma_kernel<__nv_bfloat16, 128, 2, Schedule::overlapped, false>) &&
                    encoder() != nullptr
                ? 1
                : -1;
        known[device].store(state, std::memory_order_relaxed);
    }
    return state == 1;
}

template <typename T, int D, int CONSUMERS, Schedule S, bool OUT_SMEM>
cudaError_t
launch(const gp_attn_params &p, cudaStream_t stream)
{
    using B = Block<CONSUMERS>;
    auto kernel = flash_wgmma_kernel<T, D, CONSUMERS, S, OUT_SMEM>;
    if (!runnable_on_current_device())
        return cudaErrorNotSupported;
    Args a;
    memset(&a, 0, sizeof a);
    a.p = p;
    if (!encode(&a.q, p.q, p.q_stride, p, B::BM) || !encode(&a.k, p.k, p.k_stride, p, kBN) ||
        !encode(&a.v, p.v, p.v_stride, p, kBN) ||
        (OUT_SMEM && !encode(&a.o, p.o, p.o_stride, p, 64)))
        return cudaErrorNotSupported;
    return launch_with_smem(kernel, grid_for(p, B::BM), dim3(B::threads),
                            Layout<D, B::BM>::smem(OUT_SMEM), stream, a);
}

// The (batch, head) pairs per group of causal work items (work_item): as many as keep their K and
// V within a quarter of the L2 (the rest holds Q, O and the other blocks' traffic), but at least
// enough for two rounds of items over the grid, so that heaviest-first still balances the blocks.
// causal_group_all: one group of every pair (non-causal items, 192-row blocks, an L2 unknown).
int
causal_group_all(const gp_attn_params &p)
{
    const int64_t bh = (int64_t)p.batch * p.heads;
    return bh > INT_MAX ? INT_MAX : (int)bh;
}

int
causal_group(const gp_attn_params &p, int m_tiles, int sms, int device)
{
    int l2 = 0;
    if (!p.causal || cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device) != cudaSuccess ||
        l2 <= 0) {
        (void)cudaGetLastError();
        return causal_group_all(p);
    }
    const int64_t per_pair = 2 * (int64_t)p.seq * p.head_dim * 2; // K and V, 2-byte elements
    const int64_t for_balance = (2 * (int64_t)sms + m_tiles - 1) / m_tiles;
    int64_t g = (int64_t)l2 / 4 / per_pair;
    g = g > for_balance ? g : for_balance;
    g = g < causal_group_all(p) ? g : causal_group_all(p);
    return g < 1 ? 1 : (int)g;
}

// Whether causal items go out in twos of equal work (work_item, v9): where a (batch, head) has at
// most 16 query tiles and the twos fill the SMs' rounds to within 5 % (a block's last two,
// where others have none, is the whole loss). The order by L2 groups hands the blocks unequal
// items heaviest first; modelled (an item costing its key tiles plus about one tile for its
// start and end), its heaviest block's load was 7-11 % over the mean at N = 512 to 2048 in the
// grid's shapes (4096 items on 132 SMs), against 3 % for twos, and 1 % against 3 % from N = 4096.
// Measured (H100, 2026-11-26; kernels/attention/NOTES.md, "Causal items in twos"), twos against
// the groups: head_dim 64 causal 0.91 -> 0.97 of cuDNN at N = 512, 0.93 -> 0.99 at 1024, 0.95 ->
// 1.01 at 2048 (O through shared memory), head_dim 128 0.93 -> 1.06 at 512, 0.99 -> 1.13 at 2048.
bool
paired(const gp_attn_params &p, int m_tiles, int64_t items, int sms)
{
    const int64_t twos = (items + 1) / 2, rounds = (twos + sms - 1) / sms;
    return p.causal && m_tiles <= 16 && twos >= sms && rounds * sms * 20 <= twos * 21;
}

// The persistent kernel: as many blocks as SMs, or work items if fewer.
template <typename T, int D, int CONSUMERS, Schedule S, bool OUT_SMEM, bool CHAIN>
cudaError_t
launch_persistent(const gp_attn_params &p, cudaStream_t stream)
{
    using B = Block<CONSUMERS>;
    auto kernel = flash_wgmma_persistent_kernel<T, D, CONSUMERS, S, OUT_SMEM, CHAIN>;
    if (!runnable_on_current_device())
        return cudaErrorNotSupported;
    int device, sms;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err != cudaSuccess)
        return err;
    Args a;
    memset(&a, 0, sizeof a);
    a.p = p;
    a.m_tiles = (p.seq + B::BM - 1) / B::BM;
    a.items = (int64_t)a.m_tiles * p.heads * p.batch;
    // 192-row blocks keep one group: grouped, the causal (4, 32, 4096, 64) read 0.84 of cuDNN
    // against 0.92 (H200, 2026-11-26); 128-row blocks gained up to 8 % from it.
    a.group = B::BM == kBN ? causal_group(p, a.m_tiles, sms, device) : causal_group_all(p);
    if (a.items >= (int64_t)1 << 31) // 2^31 · 128 query rows do not fit a device's memory
        return cudaErrorNotSupported;
    const unsigned blocks = (unsigned)(a.items < sms ? a.items : sms);
    a.paired = paired(p, a.m_tiles, a.items, sms);
    if (a.paired) { // work_item: the rounds in twos, then the rest
        const int64_t rounds = (a.items + blocks - 1) / blocks;
        a.two_rounds = (int)((rounds - 1) / 2 * 2);
        a.last_round = (int)(a.items - (rounds - 1) * blocks);
        a.rest_twos = a.two_rounds + 2 == rounds;
        a.rest = a.two_rounds * (int)blocks;
    }
    a.by_m_tiles = sm90::fast_div((uint32_t)a.m_tiles);
    a.by_heads = sm90::fast_div((uint32_t)p.heads);
    a.by_group = sm90::fast_div((uint32_t)a.group);
    a.by_group_tiles = sm90::fast_div((uint32_t)a.group * (uint32_t)a.m_tiles);
    a.by_grid = sm90::fast_div(blocks);
    if (!encode(&a.q, p.q, p.q_stride, p, B::BM) || !encode(&a.k, p.k, p.k_stride, p, kBN) ||
        !encode(&a.v, p.v, p.v_stride, p, kBN) ||
        (OUT_SMEM && !encode(&a.o, p.o, p.o_stride, p, 64)))
        return cudaErrorNotSupported;
    return launch_with_smem(kernel, dim3(blocks), dim3(B::threads),
                            Layout<D, B::BM, 2>::smem(OUT_SMEM), stream, a);
}

// One schedule's kernel, with O stored through shared memory (OUT_SMEM) or from registers.
// Persistent kernels chain their items (CHAIN) at head_dim 64 but under persist_lookahead, which
// chains only as persist_lookahead_chained (v10); the head_dim 128 block never (v8).
template <typename T, int D, int CONSUMERS, Schedule S, bool PERSISTENT,
          bool CHAIN = (PERSISTENT && D == 64 && S != Schedule::lookahead)>
cudaError_t
launch_out(const gp_attn_params &p, bool out_smem, cudaStream_t stream)
{
    static_assert(PERSISTENT || !CHAIN, "only the persistent kernel chains items");
    if constexpr (PERSISTENT)
        return out_smem ? launch_persistent<T, D, CONSUMERS, S, true, CHAIN>(p, stream)
                        : launch_persistent<T, D, CONSUMERS, S, false, CHAIN>(p, stream);
    else
        return out_smem ? launch<T, D, CONSUMERS, S, true>(p, stream)
                        : launch<T, D, CONSUMERS, S, false>(p, stream);
}

template <typename T>
cudaError_t
launch_dtype(const gp_attn_params &p, int schedule, bool out_smem, cudaStream_t stream)
{
    // The schedules (attention.h, GP_ATTN_WGMMA_*): persist the fixed block persistent, bm128
    // the 128-row overlapped block (head_dim 64: flash_wgmma_v4 of git history), persist_bm128
    // that block persistent, persist_lookahead that block with two S tiles per consumer (v4).
    constexpr Schedule seq = Schedule::sequential, ovl = Schedule::overlapped;
    switch (schedule) {
    case GP_ATTN_WGMMA_PERSIST:
        if (p.head_dim == 64)
            return launch_out<T, 64, 3, seq, true>(p, out_smem, stream);
        return launch_out<T, 128, 2, ovl, true>(p, out_smem, stream);
    case GP_ATTN_WGMMA_BM128:
        if (p.head_dim == 64)
            return launch_out<T, 64, 2, ovl, false>(p, out_smem, stream);
        return launch_out<T, 128, 2, ovl, false>(p, out_smem, stream);
    case GP_ATTN_WGMMA_PERSIST_BM128:
        if (p.head_dim == 64)
            return launch_out<T, 64, 2, ovl, true>(p, out_smem, stream);
        return launch_out<T, 128, 2, ovl, true>(p, out_smem, stream);
    case GP_ATTN_WGMMA_PERSIST_LOOKAHEAD: // head_dim 64 only (v4)
        if (p.head_dim == 64)
            return launch_out<T, 64, 2, Schedule::lookahead, true>(p, out_smem, stream);
        return cudaErrorNotSupported;
    case GP_ATTN_WGMMA_PERSIST_LOOKAHEAD_CHAINED: // head_dim 64 only (v10)
        if (p.head_dim == 64)
            return launch_out<T, 64, 2, Schedule::lookahead, true, true>(p, out_smem, stream);
        return cudaErrorNotSupported;
    default:
        break;
    }
    // fixed: the fastest block on an H100 at each head_dim over the long-sequence sweep
    // (docs/benchmarks.md, "flash_wgmma"): 192 rows in sequence at 64, 128 rows overlapped at 128
    // (a 192-row block does not fit O's registers at 128: a consumer gets 160).
    if (p.head_dim == 64)
        return launch_out<T, 64, 3, seq, false>(p, out_smem, stream);
    return launch_out<T, 128, 2, ovl, false>(p, out_smem, stream);
}

// The fixed kernel's run time with blocks of `rows` query rows on `sms` SMs, in units of one
// query row times one key tile (a 192-row block's tile is 1.5 times a 128-row block's): blocks
// go out in launch order (blockIdx.x fastest; causal: heaviest first within each (batch, head),
// flash_wgmma_kernel) to the SM that frees first, one block per SM. A causal block of query
// tile i computes the key tiles up to its last row (key_tiles), so block i of n has about
// (i + 1) / n of a full block's work; a row past the sequence's end costs as much as any.
// Without causal every block is equal: waves · block. With causal the blocks are handed out as
// the hardware would, in a min-heap of the SMs' finishing times, unless Graham's bounds of list
// scheduling (the average load, the heaviest block; at most their sum) already decide against
// `limit`: the 192-row run over the 128-row run, compared with `limit` by the caller. Returns
// the ratio of the two runs, or a negative number where the heap's memory was not there.
double
makespan_ratio(const gp_attn_params *p, int sms, double limit)
{
    const int n = p->seq, rows[2] = {192, 128};
    const double heads = (double)p->batch * p->heads;
    double work[2], heaviest[2];
    int64_t blocks[2];
    for (int r = 0; r < 2; r++) {
        const int tiles = (n + rows[r] - 1) / rows[r];
        blocks[r] = (int64_t)tiles * p->batch * p->heads;
        double per_head = 0.0;
        for (int i = 0; i < tiles; i++) {
            const int end = p->causal && (int64_t)(i + 1) * rows[r] < n ? (i + 1) * rows[r] : n;
            per_head += (double)rows[r] * ((end + kBN - 1) / kBN);
        }
        work[r] = heads * per_head;
        heaviest[r] = (double)rows[r] * ((n + kBN - 1) / kBN);
    }
    if (!p->causal) {
        const double waves192 = (double)((blocks[0] + sms - 1) / sms);
        const double waves128 = (double)((blocks[1] + sms - 1) / sms);
        return waves192 * heaviest[0] / (waves128 * heaviest[1]);
    }
    double lo[2], hi[2];
    for (int r = 0; r < 2; r++) {
        lo[r] = work[r] / sms > heaviest[r] ? work[r] / sms : heaviest[r];
        hi[r] = work[r] / sms + heaviest[r];
    }
    if (hi[0] <= limit * lo[1])
        return hi[0] / lo[1];
    if (lo[0] > limit * hi[1])
        return lo[0] / hi[1];
    double run[2];
    for (int r = 0; r < 2; r++) {
        const int tiles = (n + rows[r] - 1) / rows[r];
        const int64_t slots = blocks[r] < sms ? blocks[r] : sms;
        double *heap = (double *)calloc((size_t)slots, sizeof(double)); // finishing times
        if (heap == NULL)
            return -1.0;
        for (int64_t bh = 0; bh < (int64_t)p->batch * p->heads; bh++)
            for (int x = 0; x < tiles; x++) {
                const int i = tiles - 1 - x;
                const int end = (int64_t)(i + 1) * rows[r] < n ? (i + 1) * rows[r] : n;
                double t = heap[0] + (double)rows[r] * ((end + kBN - 1) / kBN);
                int64_t at = 0; // the earliest SM takes the block: sift its new time down
                for (;;) {
                    const int64_t c = 2 * at + 1;
                    if (c >= slots)
                        break;
                    const int64_t m = c + 1 < slots && heap[c + 1] < heap[c] ? c + 1 : c;
                    if (heap[m] >= t)
                        break;
                    heap[at] = heap[m];
                    at = m;
                }
                heap[at] = t;
            }
        run[r] = 0.0;
        for (int64_t s = 0; s < slots; s++)
            run[r] = heap[s] > run[r] ? heap[s] : run[r];
        free(heap);
    }
    return run[0] / run[1];
}

} // namespace
} // namespace gp_attn

extern "C" int
gp_attn_flash_wgmma_supports(const gp_attn_params *p)
{
    if (!gp_attn::common_shape_ok(*p) || (p->dtype != GP_ATTN_F16 && p->dtype != GP_ATTN_BF16) ||
        (p->head_dim != 64 && p->head_dim != 128) || !gp_attn_rows_aligned16(p))
        return 0;
    // TMA strides: unsigned byte counts below 2^40.
    const int64_t *strides[4] = {p->q_stride, p->k_stride, p->v_stride, p->o_stride};
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < 3; i++)
            if (strides[t][i] < 0 || strides[t][i] >= ((int64_t)1 << 39))
                return 0;
    return 1;
}

extern "C" long long
gp_attn_fast_div(long long d, long long n)
{
    if (d < 1 || d > UINT32_MAX || n < 0 || n >= ((long long)1 << 31))
        return -1;
    return gp_attn::sm90::fast_div((uint32_t)d).div((uint32_t)n);
}

extern "C" int
gp_attn_flash_wgmma_runnable(void)
{
    return gp_attn::runnable_on_current_device() ? 1 : 0;
}

// The schedule of _variant 0 (what impl="auto" and impl="flash_wgmma" run), per shape, from
// issue 27's grids on an H100 with every schedule forced (2026-11-26, persistent items chained
// but at head_dim 128 and in persist_lookahead, each item's tile, head and batch from the
// producer; kernels/attention/NOTES.md, "Schedule per shape", has every ratio behind these
// choices).
// head_dim 64:
//   non-causal: persist_lookahead (128 rows, two S tiles per consumer, persistent) unless the
//     192-row block's items fill this many SMs' waves better than 128-row items (makespan_ratio
//     below kPersistWaves), then persist (the 192-row block, persistent and chained): where
//     both fill their waves alike persist_lookahead does a row's key tile as fast or faster
//     (0.99-1.03 of cuDNN at N = 512 to 4096 against persist's 0.90-1.00, ratio 1.03-1.125),
//     and in (1, 1, 16384) (86 items against 128, one wave each, ratio 1.5: 1.04 against 0.71);
//     persist wins in (1, 3, 8192) (129 items in one wave against 192 in two, 0.75: 1.33
//     against 1.04) and, within the noise, at N = 8192 and 16384 (0.984: 1.02-1.04 against
//     1.00-1.05).
//   causal: up to N = 512 persist_bm128 (the 128-row overlapped block, persistent, its items
//     chained and in twos): items of 1 to 4 key tiles, whose starts and ends the chaining hides
//     (1.04 of cuDNN against persist_lookahead's 0.97, both dtypes, twice; at N = 1024
//     persist_lookahead leads, 0.99 against 0.975, and non-causal at 512, 1.01-1.02 against
//     0.94; H100, ninth session). Beyond: persist_lookahead, its items in twos up to N = 2048
//     where they fill the waves, else grouped by L2 (work_item): 0.99 at 1024, 1.01 at 2048
//     (in twos, eighth session; persist 0.79-0.93), 1.04 from 4096 (persist 0.90-1.02); unless
//     the 192-row blocks would take more than kBm128Speed times as long as 128-row blocks on
//     this many SMs beyond N = 4096 (makespan_ratio: blocks in launch order, causal ones weighed
//     by their key tiles) and 128-row items outnumber the SMs: then bm128 (blocks handed out as
//     SMs free balance unequal causal items better than the static stride: (1, 3, 8192) 1.15
//     against persist_lookahead's 1.09).
//   persist_lookahead runs chained (persist_lookahead_chained) up to kChainedSeq = 2048, causal
//     up to kChainedCausalSeq = 4096: both forced in one process, twice, H100, tenth session:
//     non-causal 512 1.04-1.08 against 1.00-1.01, 1024 1.02-1.03 against 1.00-1.01, causal 1024
//     1.013-1.014 against 0.990-0.995, 2048 1.03-1.05 against 1.01-1.02 (an H200 agrees), causal
//     4096 1.053-1.076 against 1.039-1.053 (and on an H200, eleventh session, rounds paired,
//     1.008-1.015 against 1.004, where the unchained kernel read 0.9997 in the whole grid);
//     beyond, within the spread either way ((1, 1, 16384) 1.03 against 1.04), and the unchained
//     tile loop stays.
// head_dim 128: persist (the 128-row block, persistent, unchained since v8) up to N = 2048, and
//   without causal up to 8192; else fixed. Both blocks' consumers take turns since v11
//   (eleventh session, H100, rounds paired): persist 1.02-1.06 of cuDNN up to 2048 against
//   1.00-1.02 without turns; non-causal 4096 1.013-1.046 against the fixed block's 0.999-1.023,
//   8192 1.010-1.046 against 1.007-1.016; 16384 within the spread either way (no H200 reading),
//   where the fixed block stays. Causal, with its items in twos (v9; eighth session): 1.06 at
//   512, 1.11-1.12 at 1024, 1.12-1.14 at 2048 against 0.84-1.02; from 4096 fixed ahead
//   (1.035-1.039 against 0.968-0.969 at 4096 with turns). Before the turns (seventh session)
//   persist led non-causal only up to 2048 and was within 0.02 of fixed beyond. sms: the
//   device's SM count.
extern "C" int
gp_attn_flash_wgmma_schedule(const gp_attn_params *p, int sms)
{
    constexpr double kBm128Speed = 1.25, kPersistWaves = 1.0;
    constexpr int kChainedSeq = 2048, kChainedCausalSeq = 4096;
    const int n = p->seq;
    if (p->head_dim != 64)
        return n <= (p->causal ? 2048 : 8192) ? GP_ATTN_WGMMA_PERSIST : GP_ATTN_WGMMA_FIXED;
    const int lookahead = n <= (p->causal ? kChainedCausalSeq : kChainedSeq)
                              ? GP_ATTN_WGMMA_PERSIST_LOOKAHEAD_CHAINED
                              : GP_ATTN_WGMMA_PERSIST_LOOKAHEAD;
    if (!p->causal)
        return sms > 0 && gp_attn::makespan_ratio(p, sms, kPersistWaves) < kPersistWaves
                   ? GP_ATTN_WGMMA_PERSIST
                   : lookahead;
    if (n <= 512)
        return GP_ATTN_WGMMA_PERSIST_BM128;
    if (n > 4096 && sms > 0 && gp_attn::makespan_ratio(p, sms, kBm128Speed) > kBm128Speed) {
        const int64_t items128 =
            (int64_t)((n + gp_attn::kBN - 1) / gp_attn::kBN) * p->batch * p->heads;
        if (items128 > sms)
            return GP_ATTN_WGMMA_BM128;
    }
    return lookahead;
}

// How O leaves (v7): through shared memory and TMA for the head_dim 128 blocks (fixed and
// persist) at every length, and for persist_lookahead (chained or not: the chained form was
// measured with this rule, not against it) where an item has at most 4 key tiles (N <= 512) or,
// causal, up to N = 2048; from registers for persist_lookahead beyond that and
// for the 192-row persistent block, whose shared-memory builds run long items 1-9 % slower.
// From the whole grid with each way forced, twice, after the store's guard went (H100,
// 2026-11-26, seventh session; mean ratios to cuDNN): head_dim 128 persist at N = 512 1.006
// against 0.89, fixed at 2048 0.96-0.99 against 0.92-0.94, persist_lookahead at 512 1.02 against
// 0.98-0.99 and at 2048 1.01 against 1.03-1.04, the 192-row block at N = 8192 1.01-1.02 against
// 1.05 (NOTES.md, "O through shared memory"). Causal persist_lookahead with its items in twos
// (eighth session, the causal cases twice): 0.97 against 0.91 at 512, 0.99 against 0.95 at 1024,
// 1.01 against 1.00-1.01 at 2048; beyond, the two ways within 0.03 either way.
extern "C" int
gp_attn_flash_wgmma_out_smem(const gp_attn_params *p, int schedule)
{
    const int n = p->seq;
    switch (schedule) {
    case GP_ATTN_WGMMA_PERSIST_LOOKAHEAD:
    case GP_ATTN_WGMMA_PERSIST_LOOKAHEAD_CHAINED:
        return n <= (p->causal ? 2048 : 512);
    case GP_ATTN_WGMMA_PERSIST:
        return p->head_dim == 128;
    default:
        return 1;
    }
}

// How a persistent schedule's blocks take their items for p's shape on `sms` SMs (work_item).
extern "C" const char *
gp_attn_flash_wgmma_order(const gp_attn_params *p, int schedule, int sms)
{
    if ((schedule != GP_ATTN_WGMMA_PERSIST && schedule != GP_ATTN_WGMMA_PERSIST_BM128 &&
         schedule != GP_ATTN_WGMMA_PERSIST_LOOKAHEAD &&
         schedule != GP_ATTN_WGMMA_PERSIST_LOOKAHEAD_CHAINED) ||
        sms < 1)
        return NULL;
    if (!p->causal)
        return "in order";
    // the 192-row block at head_dim 64 under persist, 128-row items otherwise (launch_dtype)
    const int rows = schedule == GP_ATTN_WGMMA_PERSIST && p->head_dim == 64 ? gp_attn::Block<3>::BM
                                                                            : gp_attn::kBN;
    const int m_tiles = (p->seq + rows - 1) / rows;
    const int64_t items = (int64_t)m_tiles * p->batch * p->heads;
    return gp_attn::paired(*p, m_tiles, items, sms) ? "twos" : "heaviest first";
}

extern "C" const char *
gp_attn_flash_wgmma_schedule_name(int schedule)
{
    static const char *const names[GP_ATTN_WGMMA_VARIANTS] = {"per_shape",
                                                              "persist",
                                                              "bm128",
                                                              "persist_bm128",
                                                              "fixed",
                                                              "persist_lookahead",
                                                              "persist_lookahead_chained"};
    return schedule >= 0 && schedule < GP_ATTN_WGMMA_VARIANTS ? names[schedule] : "unknown";
}

extern "C" cudaError_t
gp_attn_flash_wgmma_launch(const gp_attn_params *p, cudaStream_t stream)
{
    const int out = p->variant & (GP_ATTN_WGMMA_OUT_SMEM | GP_ATTN_WGMMA_OUT_REGS);
    int schedule = p->variant & ~out;
    if (!gp_attn_flash_wgmma_supports(p) || schedule < 0 || schedule >= GP_ATTN_WGMMA_VARIANTS ||
        out == (GP_ATTN_WGMMA_OUT_SMEM | GP_ATTN_WGMMA_OUT_REGS))
        return cudaErrorNotSupported;
    if (schedule == GP_ATTN_WGMMA_PER_SHAPE) {
        int device, sms;
        cudaError_t err = cudaGetDevice(&device);
        if (err == cudaSuccess)
            err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
        if (err != cudaSuccess)
            return err;
        schedule = gp_attn_flash_wgmma_schedule(p, sms);
    }
    const bool out_smem =
        out ? out == GP_ATTN_WGMMA_OUT_SMEM : gp_attn_flash_wgmma_out_smem(p, schedule) != 0;
    if (p->dtype == GP_ATTN_F16)
        return gp_attn::launch_dtype<__half>(*p, schedule, out_smem, stream);
    return gp_attn::launch_dtype<__nv_bfloat16>(*p, schedule, out_smem, stream);
}
