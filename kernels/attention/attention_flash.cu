// Flash attention on CUDA cores: one fused kernel, fp32 arithmetic for any input dtype.
//
// Versions:
//   v1  (the textbook version) one thread per query row, K and V tiles in shared memory, the
//       online softmax per row: simple, but each thread's work is a row of dot products read
//       one element at a time from shared memory, so it runs at shared-memory, not FMA, speed.
//       Not kept: v2 is the same algorithm and only the work split changed.
//   v2  register tiling: a block of 128 threads owns 64 query rows and streams 64-key tiles.
//       Thread (ty, tx) of an 8×16 grid computes an 8×4 block of S (rows ty+8i, keys tx+16j)
//       and an 8×(head_dim/16) block of O (rows ty+8i, columns 4tx + 64c ..), so each float4
//       read from shared memory feeds 4 to 16 FMAs. A row's 16 threads sit in one half-warp, so
//       the row max takes 4 shuffles; the row sum stays per-thread until the end. P goes through
//       shared memory (in the space of the K tile, no longer needed) because P·V needs the whole
//       row of P in each thread. Rows of every tile are padded by 4 floats, and a thread's rows
//       are interleaved (ty + 8i, not 8ty + i): the two half-warps of a warp then read adjacent
//       rows, 4 banks apart, instead of rows 8 apart, which pad to the same banks; and float4
//       reads of 16 different K rows hit distinct banks. Causal: query tiles run heaviest first
//       and key tiles past the diagonal are skipped.
//   v3  (where rows are 16-byte aligned; v2 runs elsewhere) the next K and V tiles
//       are loaded into registers in 16-byte pieces while the current tile is computed, and
//       converted into shared memory after the last barrier of the tile: v2 waits for every tile's
//       loads (two blocks per SM at head_dim 128 cannot hide that) and issues 2-byte loads for
//       16-bit data.
#include "attention_common.cuh"

namespace gp_attn {
namespace {

constexpr int kThreads = 128, kRows = 64, kKeys = 64;

__device__ __forceinline__ float
ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// ROWS rows of a slice, from row0, into an fp32 tile with row pitch D + 4; rows past n are zero.
template <typename T, int ROWS, int D>
__device__ __forceinline__ void
load_rows(float *tile, const Slice<const T> &g, int row0, int n)
{
    constexpr int kVec = D / 4;
    for (int i = threadIdx.x; i < ROWS * kVec; i += kThreads) {
        const int r = i / kVec, c = (i % kVec) * 4;
        float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (row0 + r < n) {
            const T *src = g.row(row0 + r) + c;
            x = make_float4(Elem<T>::to_float(src[0]), Elem<T>::to_float(src[1]),
                            Elem<T>::to_float(src[2]), Elem<T>::to_float(src[3]));
        }
        *reinterpret_cast<float4 *>(tile + r * (D + 4) + c) = x;
    }
}

// v3: the same tile in 16-byte pieces (rows 16-byte aligned), in two steps so that the loads of
// the next tile can be in flight while the current one is computed: fetch() into registers,
// put() into shared memory after the barrier that frees the tile.
template <typename T, int ROWS, int D> struct TileFetch {
    static constexpr int kPer = 16 / sizeof(T);                // elements per 16-byte piece
    static constexpr int kPieces = ROWS * D / kPer / kThreads; // per thread
    static_assert(ROWS * D % (kPer * kThreads) == 0, "tile must split evenly");
    uint4 buf[kPieces];

    __device__ __forceinline__ void fetch(const Slice<const T> &g, int row0, int n)
    {
#pragma unroll
        for (int k = 0; k < kPieces; k++) {
            const int i = threadIdx.x + k * kThreads, r = i / (D / kPer),
                      c = (i % (D / kPer)) * kPer;
            buf[k] = row0 + r < n ? *reinterpret_cast<const uint4 *>(g.row(row0 + r) + c)
                                  : make_uint4(0u, 0u, 0u, 0u);
        }
    }
    __device__ __forceinline__ void put(float *tile) const
    {
#pragma unroll
        for (int k = 0; k < kPieces; k++) {
            const int i = threadIdx.x + k * kThreads, r = i / (D / kPer),
                      c = (i % (D / kPer)) * kPer;
            const T *e = reinterpret_cast<const T *>(&buf[k]);
#pragma unroll
            for (int q = 0; q < kPer; q += 4)
                *reinterpret_cast<float4 *>(tile + r * (D + 4) + c + q) =
                    make_float4(Elem<T>::to_float(e[q]), Elem<T>::to_float(e[q + 1]),
                                Elem<T>::to_float(e[q + 2]), Elem<T>::to_float(e[q + 3]));
        }
    }
};

// s[i][j] = q[ty+8i]·k[tx+16j] over the whole head_dim.
template <int D>
__device__ __forceinline__ void
scores(float s[8][4], const float *sq, const float *sk, int ty, int tx)
{
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            s[i][j] = 0.0f;
#pragma unroll 4
    for (int d = 0; d < D; d += 4) {
        float4 kv[4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            kv[j] = *reinterpret_cast<const float4 *>(sk + (tx + 16 * j) * (D + 4) + d);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const float4 qv = *reinterpret_cast<const float4 *>(sq + (ty + 8 * i) * (D + 4) + d);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                s[i][j] = fmaf(qv.x, kv[j].x, s[i][j]);
                s[i][j] = fmaf(qv.y, kv[j].y, s[i][j]);
                s[i][j] = fmaf(qv.z, kv[j].z, s[i][j]);
                s[i][j] = fmaf(qv.w, kv[j].w, s[i][j]);
            }
        }
    }
}

// Online softmax of one tile for this thread's 8 rows (see attention_flash_tc.cu for the
// reasoning; here a row spans the 16 lanes of a half-warp).
template <int DC>
__device__ __forceinline__ void
online_softmax(float s[8][4], float m[8], float l[8], float o[8][DC], float sl2)
{
#pragma unroll
    for (int i = 0; i < 8; i++) {
        float mx = fmaxf(fmaxf(s[i][0], s[i][1]), fmaxf(s[i][2], s[i][3]));
#pragma unroll
        for (int off = 8; off > 0; off >>= 1)
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
        const float m_new = fmaxf(m[i], mx);
        const float base = m_new == -CUDART_INF_F ? 0.0f : m_new * sl2;
        const float alpha = ex2(m[i] * sl2 - base);
        m[i] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            s[i][j] = ex2(fmaf(s[i][j], sl2, -base));
            sum += s[i][j];
        }
        l[i] = l[i] * alpha + sum;
#pragma unroll
        for (int c = 0; c < DC; c++)
            o[i][c] *= alpha;
    }
}

// o[i][4c+e] += Σ_j P[ty+8i][j] · V[j][4tx + 64c + e] over the tile's keys.
template <int D>
__device__ __forceinline__ void
accumulate_pv(float o[8][D / 16], const float *sp, const float *sv, int ty, int tx)
{
    constexpr int C = D / 64;
#pragma unroll 2
    for (int j = 0; j < kKeys; j += 4) {
        float4 vv[4][C];
#pragma unroll
        for (int jj = 0; jj < 4; jj++)
#pragma unroll
            for (int c = 0; c < C; c++)
                vv[jj][c] =
                    *reinterpret_cast<const float4 *>(sv + (j + jj) * (D + 4) + 4 * tx + 64 * c);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const float4 pv =
                *reinterpret_cast<const float4 *>(sp + (ty + 8 * i) * (kKeys + 4) + j);
            const float pj[4] = {pv.x, pv.y, pv.z, pv.w};
#pragma unroll
            for (int jj = 0; jj < 4; jj++)
#pragma unroll
                for (int c = 0; c < C; c++) {
                    o[i][4 * c + 0] = fmaf(pj[jj], vv[jj][c].x, o[i][4 * c + 0]);
                    o[i][4 * c + 1] = fmaf(pj[jj], vv[jj][c].y, o[i][4 * c + 1]);
                    o[i][4 * c + 2] = fmaf(pj[jj], vv[jj][c].z, o[i][4 * c + 2]);
                    o[i][4 * c + 3] = fmaf(pj[jj], vv[jj][c].w, o[i][4 * c + 3]);
                }
        }
    }
}

template <typename T, int D, bool PREFETCH>
__global__ void
__launch_bounds__(kThreads, 2) flash_kernel(const gp_attn_params p)
{
    constexpr int DC = D / 16; // O columns per thread
    static_assert(kRows * (kKeys + 4) <= kKeys * (D + 4), "P must fit in the K tile");
    extern __shared__ float4 smem_f4[];
    float *sq = reinterpret_cast<float *>(smem_f4);
    float *sk = sq + kRows * (D + 4);
    float *sv = sk + kKeys * (D + 4);
    float *sp = sk; // P replaces K once the scores are computed

    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int b = blockIdx.z, h = blockIdx.y, n = p.seq;
    const int m0 = (p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * kRows;
    const Slice<const T> k = slice<const T>(p.k, p.k_stride, b, h);
    const Slice<const T> v = slice<const T>(p.v, p.v_stride, b, h);
    load_rows<T, kRows, D>(sq, slice<const T>(p.q, p.q_stride, b, h), m0, n);

    float o[8][DC] = {}, m[8], l[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        m[i] = -CUDART_INF_F;
        l[i] = 0.0f;
    }
    const float sl2 = p.scale * kLog2e;
    const int kv_end = p.causal ? min(n, m0 + kRows) : n;
    TileFetch<T, kKeys, D> next_k, next_v;
    if constexpr (PREFETCH) {
        next_k.fetch(k, 0, n);
        next_v.fetch(v, 0, n);
    }
    for (int col0 = 0; col0 < kv_end; col0 += kKeys) {
        if constexpr (PREFETCH) {
            next_k.put(sk);
            next_v.put(sv);
        } else {
            load_rows<T, kKeys, D>(sk, k, col0, n);
            load_rows<T, kKeys, D>(sv, v, col0, n);
        }
        __syncthreads();
        if (PREFETCH && col0 + kKeys < kv_end) { // in flight through this tile's arithmetic
            next_k.fetch(k, col0 + kKeys, n);
            next_v.fetch(v, col0 + kKeys, n);
        }
        float s[8][4];
        scores<D>(s, sq, sk, ty, tx);
        if (col0 + kKeys > n || (p.causal && col0 + kKeys - 1 > m0))
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int row = m0 + ty + 8 * i, col = col0 + tx + 16 * j;
                    if (col >= n || (p.causal && col > row))
                        s[i][j] = -CUDART_INF_F;
                }
        online_softmax<DC>(s, m, l, o, sl2);
        __syncthreads(); // every thread is done reading K
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int j = 0; j < 4; j++)
                sp[(ty + 8 * i) * (kKeys + 4) + tx + 16 * j] = s[i][j];
        __syncthreads();
        accumulate_pv<D>(o, sp, sv, ty, tx);
        __syncthreads(); // before the next tile overwrites K, V and P
    }

    const Slice<T> out = slice<T>(p.o, p.o_stride, b, h);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        float sum = l[i];
#pragma unroll
        for (int off = 8; off > 0; off >>= 1)
            sum += __shfl_xor_sync(0xffffffffu, sum, off);
        const int row = m0 + ty + 8 * i;
        if (row >= n)
            continue;
        const float inv = 1.0f / sum;
#pragma unroll
        for (int c = 0; c < DC / 4; c++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                out.row(row)[4 * tx + 64 * c + e] = Elem<T>::from_float(o[i][4 * c + e] * inv);
    }
}

template <typename T, int D>
cudaError_t
launch(const gp_attn_params &p, cudaStream_t stream)
{
    const size_t smem = (size_t)(kRows + 2 * kKeys) * (D + 4) * sizeof(float);
    // The prefetching v3 where every row is 16-byte aligned (measured faster on an H200 at both
    // head dims: 35.4 / 36.7 against 31.6 / 27.2 TFLOP/s); v2 elsewhere. fp32 inputs at
    // head_dim 128 would need 128 more registers for v3 and keep v2.
    if constexpr (sizeof(T) == 2 || D == 64)
        if (gp_attn_rows_aligned16(&p))
            return launch_with_smem(flash_kernel<T, D, true>, grid_for(p, kRows), dim3(kThreads),
                                    smem, stream, p);
    return launch_with_smem(flash_kernel<T, D, false>, grid_for(p, kRows), dim3(kThreads), smem,
                            stream, p);
}

template <typename T>
cudaError_t
launch_dtype(const gp_attn_params &p, cudaStream_t stream)
{
    return p.head_dim == 64 ? launch<T, 64>(p, stream) : launch<T, 128>(p, stream);
}

} // namespace
} // namespace gp_attn

extern "C" int
gp_attn_flash_supports(const gp_attn_params *p)
{
    return gp_attn::common_shape_ok(*p) && (p->head_dim == 64 || p->head_dim == 128);
}

extern "C" cudaError_t
gp_attn_flash(const gp_attn_params *p, cudaStream_t stream)
{
    if (!gp_attn_flash_supports(p))
        return cudaErrorInvalidValue;
    switch (p->dtype) {
    case GP_ATTN_F32:
        return gp_attn::launch_dtype<float>(*p, stream);
    case GP_ATTN_F16:
        return gp_attn::launch_dtype<__half>(*p, stream);
    default:
        return gp_attn::launch_dtype<__nv_bfloat16>(*p, stream);
    }
}
