// Naive attention: three kernels and the whole N×N score matrix in an fp32 workspace, the way a
// framework computes attention without a fused kernel. Memory-bound on purpose: per (batch, head)
// it moves 16·N² bytes of scores (write S, read S, write P, read P) against 8·N·D of Q, K, V, O.
// Causal or not, the full matrix is computed and moved; the mask is applied in the softmax.
//
// Versions:
//   v1  CUDA cores only: scores = scale·Q·Kᵀ tiled in shared memory (64×64 tile, 4×4 per
//       thread), a row softmax, O = P·V the same way. The two products run at CUDA-core rate,
//       which for 16-bit inputs on Hopper is slower than the memory traffic they feed, so v1 is
//       compute-bound where it should be memory-bound. Kept as the path for fp32 inputs and for
//       head_dims other than 64 and 128 (any up to 256).
//   v2  fp16/bf16 with head_dim 64 or 128: both products on tensor cores with the building
//       blocks of flash_tc (attention_tc.cuh): a block of 64 query rows streams K (or V) tiles
//       through cp.async double buffers; scores leave the mma accumulators as 8-byte stores (a
//       quad of threads fills one 32-byte sector); P·V reads P from global memory straight into
//       mma A fragments, rounded to the input dtype as a framework holding P in that dtype
//       would. The softmax (both versions) reads each row once for its max and sum (online),
//       once more, from L2, to write P in place, in float4 vectors.
//   v3  fewer bytes, each moved once (fp16/bf16, head_dim 64/128): the softmax writes P in the
//       input dtype (what P·V rounds it to anyway) in place over the first half of its S row,
//       so P costs 2 + 2 bytes per score instead of 4 + 4; and for seq <= 4096 it holds the row
//       in registers between its max/sum pass and its write pass (one warp per row), so S is
//       read from DRAM once: the two-pass version re-read it from L2, but ~8000 rows of 16 KB in
//       flight do not fit in L2 and the re-read went to DRAM. P·V loads P tiles with cp.async
//       (16-byte chunks, zero-filled past the row) and ldmatrix.x4 instead of 4-byte loads.
//       12 bytes per score in all (S: write 4, read 4; P: write 2, read 2), against 16.
//   v4  head_dim 128: P·V blocks of 128 query rows (32 per warp) instead of 64. Measured on an
//       H200 (gpuprofile.profile), v3's P·V took 1.09 ms at seq 4096 where its P read needs
//       0.55 ms and its MMAs 0.43: every 64-row block re-read all of V from L2, 24 KB per tile
//       for 64 MMAs per warp. Twice the rows halve the V re-reads and double the work per tile
//       (242 registers, 2 blocks per SM).
// The workspace row stride is seq rounded up to 8 floats, so every row is 16-byte aligned, and so
// is every 8-element chunk of a 16-bit P row; the padding columns are never part of a softmax and
// are written as zero probabilities.
#include "attention_tc.cuh"

namespace gp_attn {
namespace {

__host__ __device__ __forceinline__ int
ws_ld(int n)
{
    return (n + 7) & ~7;
}

// Scores of one (batch, head) in the workspace.
__device__ __forceinline__ float *
ws_slice(float *ws, const gp_attn_params &p, int b, int h)
{
    return ws + ((int64_t)b * p.heads + h) * p.seq * ws_ld(p.seq);
}

__device__ __forceinline__ float
ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// ---- v1: CUDA cores --------------------------------------------------------------------------

constexpr int kSimtTile = 64, kSimtK = 16, kSimtThreads = 256;

// Thread (ty, tx) of a 16×16 grid owns rows ty + 16i and columns tx + 16j of a 64×64 tile: the
// shared-memory reads of a warp then hit distinct banks or broadcast.
template <typename T>
__global__ void
__launch_bounds__(kSimtThreads) scores_simt_kernel(const gp_attn_params p, float *ws)
{
    __shared__ float sq[kSimtTile][kSimtK + 1], sk[kSimtTile][kSimtK + 1];
    const int n = p.seq, ld = ws_ld(n), d_total = p.head_dim;
    const int col_tiles = (n + kSimtTile - 1) / kSimtTile;
    const int row0 = (blockIdx.x / col_tiles) * kSimtTile;
    const int col0 = (blockIdx.x % col_tiles) * kSimtTile;
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int b = blockIdx.z, h = blockIdx.y;
    const Slice<const T> q = slice<const T>(p.q, p.q_stride, b, h);
    const Slice<const T> k = slice<const T>(p.k, p.k_stride, b, h);

    float acc[4][4] = {};
    for (int d0 = 0; d0 < d_total; d0 += kSimtK) {
        for (int i = tid; i < kSimtTile * kSimtK; i += kSimtThreads) {
            const int r = i / kSimtK, c = i % kSimtK, d = d0 + c;
            const bool in_d = d < d_total;
            sq[r][c] = row0 + r < n && in_d ? Elem<T>::to_float(q.row(row0 + r)[d]) : 0.0f;
            sk[r][c] = col0 + r < n && in_d ? Elem<T>::to_float(k.row(col0 + r)[d]) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int c = 0; c < kSimtK; c++) {
            float a[4], bk[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                a[i] = sq[ty + 16 * i][c];
                bk[i] = sk[tx + 16 * i][c];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] = fmaf(a[i], bk[j], acc[i][j]);
        }
        __syncthreads();
    }
    float *s = ws_slice(ws, p, b, h);
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
            if (r < n && c < n)
                s[(int64_t)r * ld + c] = acc[i][j] * p.scale;
        }
}

// O = P·V for a 64-row × 64-column tile of O (head_dim is split into 64-column tiles).
template <typename T>
__global__ void
__launch_bounds__(kSimtThreads) pv_simt_kernel(const gp_attn_params p, float *ws)
{
    __shared__ float sp[kSimtTile][kSimtK + 1], sv[kSimtK][kSimtTile + 1];
    const int n = p.seq, ld = ws_ld(n), d_total = p.head_dim;
    const int d_tiles = (d_total + kSimtTile - 1) / kSimtTile;
    const int row0 = (blockIdx.x / d_tiles) * kSimtTile;
    const int dcol0 = (blockIdx.x % d_tiles) * kSimtTile;
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int b = blockIdx.z, h = blockIdx.y;
    const Slice<const T> v = slice<const T>(p.v, p.v_stride, b, h);
    const Slice<T> o = slice<T>(p.o, p.o_stride, b, h);
    const float *prob = ws_slice(ws, p, b, h);

    float acc[4][4] = {};
    for (int k0 = 0; k0 < n; k0 += kSimtK) {
        for (int i = tid; i < kSimtTile * kSimtK; i += kSimtThreads) {
            const int r = i / kSimtK, c = i % kSimtK;
            sp[r][c] = row0 + r < n && k0 + c < n ? prob[(int64_t)(row0 + r) * ld + k0 + c] : 0.0f;
        }
        for (int i = tid; i < kSimtK * kSimtTile; i += kSimtThreads) {
            const int r = i / kSimtTile, c = i % kSimtTile, d = dcol0 + c;
            sv[r][c] = k0 + r < n && d < d_total ? Elem<T>::to_float(v.row(k0 + r)[d]) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int c = 0; c < kSimtK; c++) {
            float a[4], bv[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                a[i] = sp[ty + 16 * i][c];
                bv[i] = sv[c][tx + 16 * i];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] = fmaf(a[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int r = row0 + ty + 16 * i, d = dcol0 + tx + 16 * j;
            if (r < n && d < d_total)
                o.row(r)[d] = Elem<T>::from_float(acc[i][j]);
        }
}

// ---- the softmax (both versions) -------------------------------------------------------------

constexpr int kSoftmaxWarps = 4;

// Folds the (max, sum) pair (m2, l2) into (m, l). A max of -inf (nothing seen yet) scales by 0.
__device__ __forceinline__ void
combine(float &m, float &l, float m2, float l2)
{
    const float mn = fmaxf(m, m2);
    const float base = mn == -CUDART_INF_F ? 0.0f : mn * kLog2e;
    l = l * ex2(fmaf(m, kLog2e, -base)) + l2 * ex2(fmaf(m2, kLog2e, -base));
    m = mn;
}

// Probabilities out, four at a time: as fp32 over S itself, or as 16-bit values over the first
// half of the row.
__device__ __forceinline__ void
store4(float *p, int c4, const float pr[4])
{
    reinterpret_cast<float4 *>(p)[c4] = make_float4(pr[0], pr[1], pr[2], pr[3]);
}
template <typename PT>
__device__ __forceinline__ void
store4(PT *p, int c4, const float pr[4])
{
    reinterpret_cast<uint2 *>(p)[c4] =
        make_uint2(tc::Mma<PT>::pack(pr[0], pr[1]), tc::Mma<PT>::pack(pr[2], pr[3]));
}

// Folds four scores of a row into its (max, sum); columns after `last` are not part of it.
__device__ __forceinline__ void
accumulate4(float &m, float &l, const float4 x4, int c4, int last)
{
    const float x[4] = {x4.x, x4.y, x4.z, x4.w};
    float mx = -CUDART_INF_F;
#pragma unroll
    for (int e = 0; e < 4; e++)
        if (4 * c4 + e <= last)
            mx = fmaxf(mx, x[e]);
    float sum = 0.0f;
    const float base = mx == -CUDART_INF_F ? 0.0f : mx * kLog2e;
#pragma unroll
    for (int e = 0; e < 4; e++)
        if (4 * c4 + e <= last)
            sum += ex2(fmaf(x[e], kLog2e, -base));
    combine(m, l, mx, sum);
}

__device__ __forceinline__ void
probs4(float pr[4], const float4 x4, int c4, int last, float base, float inv)
{
    const float x[4] = {x4.x, x4.y, x4.z, x4.w};
#pragma unroll
    for (int e = 0; e < 4; e++)
        pr[e] = 4 * c4 + e <= last ? ex2(fmaf(x[e], kLog2e, -base)) * inv : 0.0f;
}

// One warp per score row. Columns after `last` (the causal mask, the padding) get probability 0.
// VEC > 0: the row (at most 32·VEC float4) stays in registers between the two passes, so it is
// read once. VEC == 0: any length; the second pass re-reads the row (from L2 if it is still
// there), and with 16-bit P a __syncwarp orders each step's reads before its writes, which land
// on floats that this or an earlier step has read. fmaxf ignores NaN, but a NaN score still
// reaches the sum, so it poisons the row as it should.
template <typename PT, int VEC>
__global__ void __launch_bounds__(32 * kSoftmaxWarps)
    softmax_kernel(float *ws, int64_t rows, int n, int causal)
{
    const int64_t row = (int64_t)blockIdx.x * kSoftmaxWarps + (threadIdx.x >> 5);
    if (row >= rows)
        return;
    const int lane = threadIdx.x & 31, ld = ws_ld(n), n4 = ld / 4;
    const int last = causal ? (int)(row % n) : n - 1;
    const float4 *r4 = reinterpret_cast<const float4 *>(ws + row * ld);
    PT *out = reinterpret_cast<PT *>(ws + row * ld);

    float m = -CUDART_INF_F, l = 0.0f;
    float4 keep[VEC > 0 ? VEC : 1];
    if constexpr (VEC > 0) {
#pragma unroll
        for (int i = 0; i < VEC; i++) {
            const int c4 = lane + 32 * i;
            keep[i] = c4 < n4 ? r4[c4] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int i = 0; i < VEC; i++)
            accumulate4(m, l, keep[i], lane + 32 * i, last);
    } else {
#pragma unroll 4
        for (int c4 = lane; c4 < n4; c4 += 32)
            accumulate4(m, l, r4[c4], c4, last);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        combine(m, l, __shfl_xor_sync(0xffffffffu, m, off), __shfl_xor_sync(0xffffffffu, l, off));

    const float inv = 1.0f / l;
    const float base = m == -CUDART_INF_F ? 0.0f : m * kLog2e;
    float pr[4];
    if constexpr (VEC > 0) {
        // Every lane's reads of the row were consumed by the shuffles above: writes may begin.
#pragma unroll
        for (int i = 0; i < VEC; i++) {
            const int c4 = lane + 32 * i;
            probs4(pr, keep[i], c4, last, base, inv);
            if (c4 < n4)
                store4(out, c4, pr);
        }
    } else {
        for (int c0 = 0; c0 < n4; c0 += 32) {
            const int c4 = c0 + lane;
            const float4 x4 = c4 < n4 ? r4[c4] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (sizeof(PT) < sizeof(float))
                __syncwarp();
            probs4(pr, x4, c4, last, base, inv);
            if (c4 < n4)
                store4(out, c4, pr);
        }
    }
}

// The softmax of every row, P as PT; the row stays in registers where seq allows it.
template <typename PT>
cudaError_t
launch_softmax(const gp_attn_params &p, float *ws, cudaStream_t stream)
{
    const int64_t rows = (int64_t)p.batch * p.heads * p.seq;
    const dim3 grid((unsigned)((rows + kSoftmaxWarps - 1) / kSoftmaxWarps));
    const dim3 block(32 * kSoftmaxWarps);
    const int n4 = ws_ld(p.seq) / 4;
    if (n4 <= 32 * 2)
        softmax_kernel<PT, 2><<<grid, block, 0, stream>>>(ws, rows, p.seq, p.causal);
    else if (n4 <= 32 * 8)
        softmax_kernel<PT, 8><<<grid, block, 0, stream>>>(ws, rows, p.seq, p.causal);
    else if (n4 <= 32 * 32)
        softmax_kernel<PT, 32><<<grid, block, 0, stream>>>(ws, rows, p.seq, p.causal);
    else
        softmax_kernel<PT, 0><<<grid, block, 0, stream>>>(ws, rows, p.seq, p.causal);
    return cudaGetLastError();
}

// ---- v2: tensor cores ------------------------------------------------------------------------

using namespace tc;
constexpr int kTcRows = kWarps * 16, kTcKeys = 64; // a block: 64 query rows, 64-key tiles

template <typename T, int D>
__global__ void
__launch_bounds__(kThreads, 2) scores_tc_kernel(const gp_attn_params p, float *ws)
{
    constexpr int NT = kTcKeys / 8;
    extern __shared__ uint4 smem_raw[];
    T *sq = reinterpret_cast<T *>(smem_raw);
    T *sk = sq + kTcRows * D; // two buffers
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int b = blockIdx.z, h = blockIdx.y, n = p.seq, ld = ws_ld(n);
    const int m0 = blockIdx.x * kTcRows;
    const Slice<const T> q = slice<const T>(p.q, p.q_stride, b, h);
    const Slice<const T> k = slice<const T>(p.k, p.k_stride, b, h);
    float *s_out = ws_slice(ws, p, b, h);
    const int n_tiles = (n + kTcKeys - 1) / kTcKeys;

    load_tile_async<T, kTcRows, D>(sq, q, m0, n, tid);
    cp_async_commit();
    load_tile_async<T, kTcKeys, D>(sk, k, 0, n, tid);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    uint32_t qf[1][D / 16][4];
    load_q_frags<T, D, 1>(qf, sq, warp * 16, lane);

    const int row = m0 + warp * 16 + (lane >> 2);
    for (int j = 0; j < n_tiles; j++) {
        cp_async_wait<0>();
        __syncthreads(); // tile j visible; tile j-1's buffer free
        if (j + 1 < n_tiles)
            load_tile_async<T, kTcKeys, D>(sk + ((j + 1) % 2) * kTcKeys * D, k, (j + 1) * kTcKeys,
                                           n, tid);
        cp_async_commit();
        float s[1][NT][4];
        qk_tile<T, D, 1, kTcKeys>(s, qf, sk + (j % 2) * kTcKeys * D, lane);
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int r = row + 8 * half, c = j * kTcKeys + nt * 8 + 2 * (lane & 3);
                // c is even and ld a multiple of 4, so c < n keeps c + 1 inside the row.
                if (r < n && c < n)
                    *reinterpret_cast<float2 *>(s_out + (int64_t)r * ld + c) =
                        make_float2(s[0][nt][2 * half] * p.scale, s[0][nt][2 * half + 1] * p.scale);
            }
    }
}

// The P tile of rows m0.., keys k0.. (ROWS × kTcKeys 16-bit values, row pitch 2·ld) into a
// swizzled tile; rows at or past n and chunks at or past the row's ld values read as zeros.
template <typename T, int ROWS>
__device__ __forceinline__ void
load_p_async(T *tile, const T *prob, int m0, int k0, int n, int ld, int tid)
{
    constexpr int kChunks = kTcKeys / 8;
#pragma unroll
    for (int i = tid; i < ROWS * kChunks; i += kThreads) {
        const int r = i / kChunks, c = i % kChunks;
        const bool valid = m0 + r < n && k0 + 8 * c < ld;
        const T *src = valid ? prob + (int64_t)(m0 + r) * 2 * ld + k0 + 8 * c : prob;
        cp_async16(smem_u32(tile + swz<kTcKeys>(r, c)), src, valid);
    }
}

// MT row tiles of 16 per warp: a block of 64·MT query rows. With MT = 2 (head_dim 128) each V tile
// read from L2 feeds twice the MMAs, and V is re-read by half as many blocks.
template <typename T, int D, int MT>
__global__ void
__launch_bounds__(kThreads, 2) pv_tc_kernel(const gp_attn_params p, float *ws)
{
    constexpr int kRows = kWarps * 16 * MT;
    constexpr int kPTile = kRows * kTcKeys, kVTile = kTcKeys * D;
    static_assert(kRows * D <= 2 * kVTile, "O is staged in the two V buffers");
    extern __shared__ uint4 smem_raw[];
    // Two stages of (V tile, P tile); the V buffers stage O at the end.
    T *sv = reinterpret_cast<T *>(smem_raw), *sp = sv + 2 * kVTile;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int b = blockIdx.z, h = blockIdx.y, n = p.seq, ld = ws_ld(n);
    const int m0 = blockIdx.x * kRows;
    const Slice<const T> v = slice<const T>(p.v, p.v_stride, b, h);
    // The softmax left P as T values at the start of each fp32 row: a row pitch of 2·ld values.
    const T *prob = reinterpret_cast<const T *>(ws_slice(ws, p, b, h));
    const int n_tiles = (n + kTcKeys - 1) / kTcKeys;

    float acc[MT][D / 8][4] = {};
    load_p_async<T, kRows>(sp, prob, m0, 0, n, ld, tid);
    load_tile_async<T, kTcKeys, D>(sv, v, 0, n, tid);
    cp_async_commit();
    for (int j = 0; j < n_tiles; j++) {
        cp_async_wait<0>();
        __syncthreads(); // tile j visible to all; every warp is done with tile j-1's buffers
        if (j + 1 < n_tiles) {
            const int nb = (j + 1) % 2;
            load_p_async<T, kRows>(sp + nb * kPTile, prob, m0, (j + 1) * kTcKeys, n, ld, tid);
            load_tile_async<T, kTcKeys, D>(sv + nb * kVTile, v, (j + 1) * kTcKeys, n, tid);
        }
        cp_async_commit();
        const T *ptile = sp + (j % 2) * kPTile;
        pv_tile<T, D, MT, kTcKeys>(
            acc,
            [&](int mt, int kk, uint32_t a[4]) {
                ldmatrix_x4(a, smem_u32(ptile + swz<kTcKeys>(warp * 16 * MT + mt * 16 + (lane & 15),
                                                             kk * 2 + (lane >> 4))));
            },
            sv + (j % 2) * kVTile, lane);
    }
    cp_async_wait<0>();
    __syncthreads(); // every warp is done with both V buffers
    float one[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
        one[mt][0] = one[mt][1] = 1.0f;
    store_o<T, D, MT>(acc, one, sv, warp * 16 * MT, slice<T>(p.o, p.o_stride, b, h), m0, n, lane);
}

// ---- launchers -------------------------------------------------------------------------------

bool
use_tensor_cores(const gp_attn_params &p)
{
    return p.dtype != GP_ATTN_F32 && (p.head_dim == 64 || p.head_dim == 128) &&
           gp_attn_rows_aligned16(&p);
}

template <typename T, int D>
cudaError_t
launch_tc(const gp_attn_params &p, float *ws, cudaStream_t stream)
{
    const dim3 grid = grid_for(p, kTcRows);
    const size_t smem_s = (size_t)(kTcRows + 2 * kTcKeys) * D * sizeof(T);
    cudaError_t err =
        launch_with_smem(scores_tc_kernel<T, D>, grid, dim3(kThreads), smem_s, stream, p, ws);
    if (err != cudaSuccess)
        return err;
    if ((err = launch_softmax<T>(p, ws, stream)) != cudaSuccess)
        return err;
    constexpr int kMT = D == 128 ? 2 : 1;
    const size_t smem_v = (size_t)2 * (kTcKeys * D + kWarps * 16 * kMT * kTcKeys) * sizeof(T);
    return launch_with_smem(pv_tc_kernel<T, D, kMT>, grid_for(p, kWarps * 16 * kMT), dim3(kThreads),
                            smem_v, stream, p, ws);
}

template <typename T>
cudaError_t
launch_simt(const gp_attn_params &p, float *ws, cudaStream_t stream)
{
    const int col_tiles = (p.seq + kSimtTile - 1) / kSimtTile;
    scores_simt_kernel<T><<<grid_for(p, kSimtTile, col_tiles), kSimtThreads, 0, stream>>>(p, ws);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return err;
    if ((err = launch_softmax<float>(p, ws, stream)) != cudaSuccess)
        return err;
    const int d_tiles = (p.head_dim + kSimtTile - 1) / kSimtTile;
    pv_simt_kernel<T><<<grid_for(p, kSimtTile, d_tiles), kSimtThreads, 0, stream>>>(p, ws);
    return cudaGetLastError();
}

template <typename T>
cudaError_t
launch_16bit(const gp_attn_params &p, float *ws, cudaStream_t stream)
{
    if (!use_tensor_cores(p))
        return launch_simt<T>(p, ws, stream);
    return p.head_dim == 64 ? launch_tc<T, 64>(p, ws, stream) : launch_tc<T, 128>(p, ws, stream);
}

} // namespace
} // namespace gp_attn

extern "C" int
gp_attn_naive_supports(const gp_attn_params *p)
{
    if (!gp_attn::common_shape_ok(*p) || p->head_dim > GP_ATTN_NAIVE_MAX_HEAD_DIM)
        return 0;
    // Grid limits: x counts 64-row tiles times 64-column tiles, and softmax blocks of 4 rows.
    const int64_t tiles = (p->seq + 63) / 64;
    const int64_t rows = (int64_t)p->batch * p->heads * p->seq;
    return tiles * tiles <= INT32_MAX && rows / gp_attn::kSoftmaxWarps < INT32_MAX;
}

extern "C" size_t
gp_attn_naive_workspace_bytes(const gp_attn_params *p)
{
    return (size_t)p->batch * p->heads * p->seq * gp_attn::ws_ld(p->seq) * sizeof(float);
}

extern "C" cudaError_t
gp_attn_naive(const gp_attn_params *p, void *workspace, cudaStream_t stream)
{
    if (!gp_attn_naive_supports(p) || workspace == NULL)
        return cudaErrorInvalidValue;
    float *ws = static_cast<float *>(workspace);
    switch (p->dtype) {
    case GP_ATTN_F32:
        return gp_attn::launch_simt<float>(*p, ws, stream);
    case GP_ATTN_F16:
        return gp_attn::launch_16bit<__half>(*p, ws, stream);
    default:
        return gp_attn::launch_16bit<__nv_bfloat16>(*p, ws, stream);
    }
}
