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
//       NOTES.md); the tests and benchmarks force one (_C._testing.attention, schedules.h).
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
//
// The parts, cut as FlashAttention-3's hopper/ folder is (flash_wgmma/): block.cuh (the block and
// its shared-memory layout), scheduler.cuh (the order of a persistent block's work items),
// mainloop.cuh (the producer's loads, a consumer's tile loop), epilogue.cuh (the O store),
// kernel.cuh (the two kernels), this file (the host launch) and rule.cu (the pure host rule that
// picks a schedule per shape); schedules.h is the table of schedules they share.

// The block constants are used in device code only; nvcc's host pass calls them unused.
#pragma nv_diag_suppress 177

#include "attention/flash_wgmma/kernel.cuh"

// GPUPROFILE_ATTN_LAB=1 at build time (setup.py): every configuration of the table both ways, for
// the benchmarks that force a schedule; without it, what the rule reaches (schedules.h).
#ifndef GP_ATTN_LAB
#define GP_ATTN_LAB 0
#endif

#include <atomic>
#include <limits.h>
#include <string.h>

namespace gp_attn {
namespace {

// ---- host (the tensor maps' encoding: attention_sm90.cuh) -------------------------------------

// runnable_here for the current device, asked once per device: every instantiation comes from
// this one translation unit, so they share the binary version. 0: not asked yet, 1: yes, -1: no.
// The kernel asked about is one every build has: fixed at head_dim 128, O through shared memory.
static_assert(gp_attn_wgmma_built(&gp_attn_wgmma_schedules[GP_ATTN_WGMMA_FIXED - 1].at[1], 1, 0) !=
                  0,
              "runnable_on_current_device asks about a kernel the shipped build has");
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
            runnable_here(flash_wgmma_kernel<__nv_bfloat16, 128, 2, Schedule::overlapped, true>) &&
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
    a.paired = gp_attn_flash_wgmma_paired(&p, a.m_tiles, a.items, sms);
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

// One configuration's kernel: the fixed or the persistent one, O stored through shared memory
// (OUT_SMEM) or from registers.
template <typename T, int D, int CONSUMERS, Schedule S, bool PERSISTENT, bool CHAIN, bool OUT_SMEM>
cudaError_t
launch_kernel(const gp_attn_params &p, cudaStream_t stream)
{
    static_assert(PERSISTENT || !CHAIN, "only the persistent kernel chains items");
    if constexpr (PERSISTENT)
        return launch_persistent<T, D, CONSUMERS, S, OUT_SMEM, CHAIN>(p, stream);
    else
        return launch<T, D, CONSUMERS, S, OUT_SMEM>(p, stream);
}

// Row I of the table of schedules (schedules.h) at head_dim D, O stored as asked: its template
// arguments come from the row, and only the configurations this build has are instantiated (the
// shipped build: what the rule reaches, the row's `ships`; GP_ATTN_LAB: every one both ways).
// cudaErrorNotSupported for one it does not have.
template <typename T, int I, int D>
cudaError_t
launch_config(const gp_attn_params &p, bool out_smem, cudaStream_t stream)
{
    constexpr const gp_attn_wgmma_config *c = &gp_attn_wgmma_schedules[I].at[D == 128];
    constexpr Schedule S = static_cast<Schedule>(c->order);
    if constexpr (gp_attn_wgmma_built(c, 1, GP_ATTN_LAB) != 0) {
        if (out_smem)
            return launch_kernel<T, D, c->consumers, S, c->persistent != 0, c->chained != 0, true>(
                p, stream);
    }
    if constexpr (gp_attn_wgmma_built(c, 0, GP_ATTN_LAB) != 0) {
        if (!out_smem)
            return launch_kernel<T, D, c->consumers, S, c->persistent != 0, c->chained != 0, false>(
                p, stream);
    }
    return cudaErrorNotSupported;
}

// Schedule number `schedule` (1..6, the table's rows from I on).
template <typename T, int I = 0>
cudaError_t
launch_schedule(const gp_attn_params &p, int schedule, bool out_smem, cudaStream_t stream)
{
    if constexpr (I == GP_ATTN_WGMMA_SCHEDULES) {
        return cudaErrorNotSupported;
    } else {
        static_assert(gp_attn_wgmma_schedules[I].number == I + 1, "rows in the schedules' order");
        if (schedule != I + 1)
            return launch_schedule<T, I + 1>(p, schedule, out_smem, stream);
        return p.head_dim == 64 ? launch_config<T, I, 64>(p, out_smem, stream)
                                : launch_config<T, I, 128>(p, out_smem, stream);
    }
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
gp_attn_flash_wgmma_lab(void)
{
    return GP_ATTN_LAB;
}

extern "C" int
gp_attn_flash_wgmma_runnable(void)
{
    return gp_attn::runnable_on_current_device() ? 1 : 0;
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
        return gp_attn::launch_schedule<__half>(*p, schedule, out_smem, stream);
    return gp_attn::launch_schedule<__nv_bfloat16>(*p, schedule, out_smem, stream);
}
