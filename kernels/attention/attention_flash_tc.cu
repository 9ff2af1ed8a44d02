// Flash attention on tensor cores: fp16/bf16 inputs, fp32 accumulation, mma.sync (sm_80+).
//
// Versions:
//   v1  One block of 4 warps per BM query rows; each warp owns 16·MT rows. Q is loaded once into
//       registers as mma A fragments (ldmatrix). K and V tiles of BN rows stream through shared
//       memory with cp.async in a STAGES-deep ring (one __syncthreads per tile), XOR-swizzled
//       so ldmatrix (x4 for K, x4.trans for V) is conflict-free. S = Q·Kᵀ stays in registers;
//       the online softmax keeps the row max in raw score units and folds scale·log2(e) into one
//       FFMA before ex2.approx; row max needs 2 shuffles within the quad that shares a row, and
//       the row sum stays per-thread until the end. S converts in registers to the A fragments
//       of P·V; O accumulates in fp32 and is divided by the row sum once, then leaves through
//       shared memory as 16-byte stores. Causal: query tiles run heaviest first, key tiles past
//       the diagonal are never loaded, a warp skips tiles wholly above its rows, and only tiles
//       that cross the diagonal or the end of the sequence are masked. Ragged sequences: rows
//       past the end are zero-filled by cp.async and their scores set to -inf.
//       head_dim 64: MT=2 (BM=128), BN=64, 3 stages; head_dim 128: MT=1, BN=64, 2 stages.
//       230 / 248 registers, 2 blocks (8 warps) per SM.
//   v2  Fewer registers: the tile loader keeps one advancing source pointer per thread instead
//       of one per chunk (head_dim 128: 230 -> 202). At head_dim 128, 16-row warps with the Q
//       tile aliased into the last K buffer, 3 blocks per SM (measured slower than v3; removed).
//   v3  head_dim 128 (runs on main): 32 rows per warp, 64-key tiles, Q re-read from shared
//       memory every tile (twice the FLOPs per byte read from shared memory), and the lazy
//       rescale (the running max moves only when a row's max grew by more than 2^8, so most
//       tiles skip rescaling O). head_dim 64 runs v1's shape with v2's loader.
#include "attention_tc.cuh"

namespace gp_attn {
namespace {

using namespace tc;

// Tile configurations: 16·MT query rows per warp, BN-key tiles, STAGES buffers, Q in registers
// (or re-read from shared memory every tile), MIN_BLOCKS blocks per SM to fit registers for.
// LAZY: the running max only moves when some row's max grew by more than kLazyLog2 (see
// online_softmax), so most tiles skip the rescale of O.
template <int MT_, int BN_, int STAGES_, bool Q_REGS_, int MIN_BLOCKS_, bool LAZY_>
struct TcConfig {
    static constexpr int MT = MT_, BN = BN_, STAGES = STAGES_, MIN_BLOCKS = MIN_BLOCKS_;
    static constexpr int BM = kWarps * 16 * MT;
    static constexpr bool Q_REGS = Q_REGS_, LAZY = LAZY_;
    template <typename T, int D> static constexpr size_t smem_bytes()
    {
        return (size_t)(BM + 2 * STAGES * BN) * D * sizeof(T);
    }
};

// Lazy rescaling: probabilities are taken against a stale max as long as no score exceeds it by
// more than 2^8 in probability, so P <= 256: exact in fp32 sums, and within the range of fp16
// and bf16 with the same relative rounding as P <= 1. O and the row sum share the stale base,
// so the final division cancels it.
constexpr float kLazyLog2 = 8.0f;

__device__ __forceinline__ float
ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// -inf for the scores of keys at or past n, and (causal) of keys after the query.
// row0: this thread's first row (row tile 0, fragment row g); col0: its first column.
template <int MT, int NT>
__device__ __forceinline__ void
mask_scores(float s[MT][NT][4], int row0, int col0, int n, bool causal)
{
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int row = row0 + mt * 16 + (e >> 1) * 8;
                const int col = col0 + nt * 8 + (e & 1);
                if (col >= n || (causal && col > row))
                    s[mt][nt][e] = -CUDART_INF_F;
            }
}

// The max of this thread's row (mt, half) over the tile, shared by the quad that holds the row.
template <int MT, int NT>
__device__ __forceinline__ float
row_max(const float s[MT][NT][4], int mt, int half)
{
    float x = -CUDART_INF_F;
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
        x = fmaxf(x, fmaxf(s[mt][nt][2 * half], s[mt][nt][2 * half + 1]));
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

// One tile of the online softmax. m: running row max (raw scores), l: this thread's share of the
// running row sum. s becomes P = 2^(s·sl2 - m·sl2); O is rescaled by the change of max.
// LAZY: the warp keeps its maxima (no rescale) unless some row's new max exceeds the old by more
// than kLazyLog2 in log2 units; a vote keeps the branch uniform. The rare rescale recomputes the
// row maxima rather than keep them in registers through the vote. A -inf max (nothing seen yet)
// always moves, so a base is never -inf once a finite score was seen.
template <bool LAZY, int MT, int NT, int DT>
__device__ __forceinline__ void
online_softmax(float s[MT][NT][4], float m[MT][2], float l[MT][2], float o[MT][DT][4], float sl2)
{
    bool rescale = true;
    if constexpr (LAZY) {
        bool grow = false;
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int half = 0; half < 2; half++)
                // +inf when m is -inf and the max is not; NaN (false) when both are -inf.
                grow |= (row_max<MT, NT>(s, mt, half) - m[mt][half]) * sl2 > kLazyLog2;
        rescale = __any_sync(0xffffffffu, grow);
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            if (rescale) {
                const float m_new = fmaxf(m[mt][half], row_max<MT, NT>(s, mt, half));
                // A row with every score so far -inf keeps a zero base: no -inf - -inf occurs.
                const float base = m_new == -CUDART_INF_F ? 0.0f : m_new * sl2;
                const float alpha = ex2(m[mt][half] * sl2 - base);
                m[mt][half] = m_new;
                l[mt][half] *= alpha;
#pragma unroll
                for (int dt = 0; dt < DT; dt++) {
                    o[mt][dt][2 * half] *= alpha;
                    o[mt][dt][2 * half + 1] *= alpha;
                }
            }
            const float base = m[mt][half] == -CUDART_INF_F ? 0.0f : m[mt][half] * sl2;
            float sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 2 * half; e < 2 * half + 2; e++) {
                    const float p = ex2(fmaf(s[mt][nt][e], sl2, -base));
                    s[mt][nt][e] = p;
                    sum += p;
                }
            l[mt][half] += sum;
        }
}

// Hopper's 228 KB of shared memory per SM holds three 64 KB blocks; Ampere's 164 KB holds two,
// and there a 168-register cap would only cost spills.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define GP_TC_MIN_BLOCKS(n) ((n) < 2 ? (n) : 2)
#else
#define GP_TC_MIN_BLOCKS(n) (n)
#endif

template <typename T, int D, typename C>
__global__ void
__launch_bounds__(kThreads, GP_TC_MIN_BLOCKS(C::MIN_BLOCKS)) flash_tc_kernel(const gp_attn_params p)
{
    constexpr int MT = C::MT, BN = C::BN, STAGES = C::STAGES, BM = C::BM;
    constexpr int NT = BN / 8, DT = D / 8;
    constexpr bool Q_REGS = C::Q_REGS;
    extern __shared__ uint4 smem_raw[];
    T *sk = reinterpret_cast<T *>(smem_raw);
    T *sv = sk + STAGES * BN * D;
    T *sq = sv + STAGES * BN * D;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int b = blockIdx.z, h = blockIdx.y, n = p.seq;
    // Causal blocks differ in work; the heaviest (last query rows) start first.
    const int m0 = (p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BM;
    const Slice<const T> k = slice<const T>(p.k, p.k_stride, b, h);
    const Slice<const T> v = slice<const T>(p.v, p.v_stride, b, h);
    const int kv_end = p.causal ? min(n, m0 + BM) : n;
    const int n_tiles = (kv_end + BN - 1) / BN;

    load_tile_async<T, BM, D>(sq, slice<const T>(p.q, p.q_stride, b, h), m0, n, tid);
    cp_async_commit();
#pragma unroll
    for (int st = 0; st < STAGES - 1; st++) {
        if (st < n_tiles) {
            load_tile_async<T, BN, D>(sk + st * BN * D, k, st * BN, n, tid);
            load_tile_async<T, BN, D>(sv + st * BN * D, v, st * BN, n, tid);
        }
        cp_async_commit();
    }
    cp_async_wait<STAGES - 1>(); // the Q group
    __syncthreads();

    const int warp_row = warp * 16 * MT; // first row of this warp within the tile
    uint32_t qf[Q_REGS ? MT : 1][Q_REGS ? D / 16 : 1][4];
    if constexpr (Q_REGS)
        load_q_frags<T, D, MT>(qf, sq, warp_row, lane);

    float acc[MT][DT][4];
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[mt][dt][e] = 0.0f;
        m[mt][0] = m[mt][1] = -CUDART_INF_F;
        l[mt][0] = l[mt][1] = 0.0f;
    }
    const float sl2 = p.scale * kLog2e;
    const int row_lo = m0 + warp_row, row_hi = row_lo + 16 * MT - 1; // this warp's rows

    for (int j = 0; j < n_tiles; j++) {
        // Tile j has landed for every thread, and every warp is done with tile j-1, whose
        // buffer receives tile j + STAGES - 1.
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const int jn = j + STAGES - 1;
        if (jn < n_tiles) {
            load_tile_async<T, BN, D>(sk + (jn % STAGES) * BN * D, k, jn * BN, n, tid);
            load_tile_async<T, BN, D>(sv + (jn % STAGES) * BN * D, v, jn * BN, n, tid);
        }
        cp_async_commit();

        const int col0 = j * BN;
        if (p.causal && col0 > row_hi)
            continue; // every key of this tile comes after every row of this warp
        float s[MT][NT][4];
        if constexpr (Q_REGS)
            qk_tile<T, D, MT, BN>(s, qf, sk + (j % STAGES) * BN * D, lane);
        else
            qk_tile_q_smem<T, D, MT, BN>(s, sq, warp_row, sk + (j % STAGES) * BN * D, lane);
        if (col0 + BN > n || (p.causal && col0 + BN - 1 > row_lo))
            mask_scores<MT, NT>(s, row_lo + (lane >> 2), col0 + 2 * (lane & 3), n, p.causal);
        online_softmax<C::LAZY, MT, NT, DT>(s, m, l, acc, sl2);
        pv_tile<T, D, MT, BN>(
            acc, [&](int mt, int kk, uint32_t a[4]) { s_to_a<T, NT>(s[mt], kk, a); },
            sv + (j % STAGES) * BN * D, lane);
    }
    cp_async_wait<0>();

    float inv[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            float sum = l[mt][half];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            inv[mt][half] = 1.0f / sum;
        }
    // The output's slice is computed here, not kept in registers through the loop.
    store_o<T, D, MT>(acc, inv, sq, warp_row, slice<T>(p.o, p.o_stride, b, h), m0, n, lane);
}

template <typename T, int D, typename C>
cudaError_t
launch(const gp_attn_params &p, cudaStream_t stream)
{
    return launch_with_smem(flash_tc_kernel<T, D, C>, grid_for(p, C::BM), dim3(kThreads),
                            C::template smem_bytes<T, D>(), stream, p);
}

// The configuration per head_dim, chosen on an H200 (2026-11-22, docs/benchmarks.md) among the
// tile shapes, pipeline depths and Q placements of the versions above (the alternatives left main
// with issue 24; git history keeps them): at head_dim 64 v1's shape (324.6 TFLOP/s, non-causal,
// seq 4096); at head_dim 128 v3, FlashAttention-2's shape with the lazy rescale (363.2, against
// 300.5 for v2's 16-row warps).
template <typename T>
cudaError_t
launch_dtype(const gp_attn_params &p, cudaStream_t stream)
{
    if (p.head_dim == 64)
        return launch<T, 64, TcConfig<2, 64, 3, true, 2, false>>(p, stream);
    return launch<T, 128, TcConfig<2, 64, 2, false, 2, true>>(p, stream);
}
} // namespace
} // namespace gp_attn

extern "C" int
gp_attn_flash_tc_supports(const gp_attn_params *p)
{
    return gp_attn::common_shape_ok(*p) && (p->dtype == GP_ATTN_F16 || p->dtype == GP_ATTN_BF16) &&
           (p->head_dim == 64 || p->head_dim == 128) && gp_attn_rows_aligned16(p);
}

extern "C" cudaError_t
gp_attn_flash_tc(const gp_attn_params *p, cudaStream_t stream)
{
    if (!gp_attn_flash_tc_supports(p))
        return cudaErrorInvalidValue;
    if (p->dtype == GP_ATTN_F16)
        return gp_attn::launch_dtype<__half>(*p, stream);
    return gp_attn::launch_dtype<__nv_bfloat16>(*p, stream);
}
