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
//       Configurations (kernels/NOTES.md has the register and shared-memory budget):
//         head_dim 64:  MT=2 (BM=128), BN=64, 3 stages  -> 64 KB shared memory per block
//         head_dim 128: MT=1 (BM=64),  BN=64, 2 stages  -> 80 KB shared memory per block
#include "attention_tc.cuh"

namespace gp_attn {
namespace {

using namespace tc;

template <int D> struct FlashTcConfig;
template <> struct FlashTcConfig<64> {
    static constexpr int MT = 2, BN = 64, STAGES = 3;
};
template <> struct FlashTcConfig<128> {
    static constexpr int MT = 1, BN = 64, STAGES = 2;
};

__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// -inf for the scores of keys at or past n, and (causal) of keys after the query.
// row0: this thread's first row (row tile 0, fragment row g); col0: its first column.
template <int MT, int NT>
__device__ __forceinline__ void mask_scores(float s[MT][NT][4], int row0, int col0, int n,
                                            bool causal)
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

// One tile of the online softmax. m: running row max (raw scores), l: this thread's share of the
// running row sum. s becomes P = 2^(s·sl2 - m·sl2); O is rescaled by the change of max.
template <int MT, int NT, int DT>
__device__ __forceinline__ void online_softmax(float s[MT][NT][4], float m[MT][2], float l[MT][2],
                                               float o[MT][DT][4], float sl2)
{
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            float mx = -CUDART_INF_F;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
                mx = fmaxf(mx, fmaxf(s[mt][nt][2 * half], s[mt][nt][2 * half + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmaxf(m[mt][half], mx);
            // A row with every score so far -inf keeps a zero base so that no -inf - -inf occurs.
            const float base = m_new == -CUDART_INF_F ? 0.0f : m_new * sl2;
            const float alpha = ex2(m[mt][half] * sl2 - base);
            m[mt][half] = m_new;
            float sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 2 * half; e < 2 * half + 2; e++) {
                    const float p = ex2(fmaf(s[mt][nt][e], sl2, -base));
                    s[mt][nt][e] = p;
                    sum += p;
                }
            l[mt][half] = l[mt][half] * alpha + sum;
#pragma unroll
            for (int dt = 0; dt < DT; dt++) {
                o[mt][dt][2 * half] *= alpha;
                o[mt][dt][2 * half + 1] *= alpha;
            }
        }
}

template <typename T, int D, int MT, int BN, int STAGES>
__global__ void __launch_bounds__(kThreads, 2) flash_tc_kernel(const gp_attn_params p)
{
    constexpr int BM = kWarps * 16 * MT, NT = BN / 8, DT = D / 8;
    extern __shared__ uint4 smem_raw[];
    T *sq = reinterpret_cast<T *>(smem_raw);
    T *sk = sq + BM * D;
    T *sv = sk + STAGES * BN * D;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int b = blockIdx.z, h = blockIdx.y, n = p.seq;
    // Causal blocks differ in work; the heaviest (last query rows) start first.
    const int m0 = (p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BM;
    const Slice<const T> q = slice<const T>(p.q, p.q_stride, b, h);
    const Slice<const T> k = slice<const T>(p.k, p.k_stride, b, h);
    const Slice<const T> v = slice<const T>(p.v, p.v_stride, b, h);
    const Slice<T> o = slice<T>(p.o, p.o_stride, b, h);
    const int kv_end = p.causal ? min(n, m0 + BM) : n;
    const int n_tiles = (kv_end + BN - 1) / BN;

    load_tile_async<T, BM, D>(sq, q, m0, n, tid);
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
    uint32_t qf[MT][D / 16][4];
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
        qk_tile<T, D, MT, BN>(s, qf, sk + (j % STAGES) * BN * D, lane);
        if (col0 + BN > n || (p.causal && col0 + BN - 1 > row_lo))
            mask_scores<MT, NT>(s, row_lo + (lane >> 2), col0 + 2 * (lane & 3), n, p.causal);
        online_softmax<MT, NT, DT>(s, m, l, acc, sl2);
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
    store_o<T, D, MT>(acc, inv, sq, warp_row, o, m0, n, lane);
}

template <typename T, int D> cudaError_t launch(const gp_attn_params &p, cudaStream_t stream)
{
    using C = FlashTcConfig<D>;
    constexpr int BM = kWarps * 16 * C::MT;
    const size_t smem = (size_t)(BM + 2 * C::STAGES * C::BN) * D * sizeof(T);
    return launch_with_smem(flash_tc_kernel<T, D, C::MT, C::BN, C::STAGES>, grid_for(p, BM),
                            dim3(kThreads), smem, stream, p);
}

template <typename T> cudaError_t launch_dtype(const gp_attn_params &p, cudaStream_t stream)
{
    return p.head_dim == 64 ? launch<T, 64>(p, stream) : launch<T, 128>(p, stream);
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
