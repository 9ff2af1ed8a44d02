// Tensor-core building blocks for the fp16/bf16 attention kernels (sm_80+ PTX: cp.async, ldmatrix,
// mma.sync.m16n8k16): shared-memory tiles, and the two warp-level products, S = Q·Kᵀ and
// O += P·V. attention_flash_tc.cu fuses them around an online softmax; attention_naive.cu uses
// them for its two GEMMs.
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16"), g = lane / 4, t = lane % 4:
//   A 16×16 (row): a0 = (g, 2t..2t+1)  a1 = (g+8, 2t..)  a2 = (g, 8+2t..)  a3 = (g+8, 8+2t..)
//   B 16×8 (col):  b0 = (k 2t..2t+1, n g)  b1 = (k 8+2t.., n g)
//   C 16×8 (f32):  c0,c1 = (g, 2t..2t+1)  c2,c3 = (g+8, 2t..2t+1)
// The C layout of two adjacent n-tiles is the A layout of one 16-wide k-chunk, so S becomes the
// A operand of P·V in registers, converted to 16 bits, without a trip through shared memory.
//
// Shared-memory tiles hold rows of D 16-bit elements as 16-byte chunks, chunk c of row r stored
// at chunk position c ^ (r % 8). ldmatrix reads one chunk from each of 8 consecutive rows per
// phase; the XOR puts those 8 chunks in 8 different bank groups, so reads (and the cp.async
// writes, which cover whole rows) are free of bank conflicts.
#pragma once

#include "attention_common.cuh"

namespace gp_attn {
namespace tc {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;

__device__ __forceinline__ uint32_t
smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

// 16 bytes global -> shared, asynchronously; `valid == false` reads nothing and writes zeros.
__device__ __forceinline__ void
cp_async16(uint32_t dst, const void *src, bool valid)
{
    const int src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

__device__ __forceinline__ void
cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Wait until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void
cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void
ldmatrix_x4(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void
ldmatrix_x4_trans(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// The 16-bit element types: packing two fp32 values into one register, and the MMA.
template <typename T> struct Mma;

template <> struct Mma<__half> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        __half2 h = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
    static __device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0,
                                               uint32_t b1)
    {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

template <> struct Mma<__nv_bfloat16> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
    static __device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0,
                                               uint32_t b1)
    {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
            "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

// Element offset of chunk `c` (8 elements) of row `r` in a swizzled tile with D columns.
template <int D>
__device__ __forceinline__ int
swz(int r, int c)
{
    static_assert(D % 64 == 0, "swizzled tiles need rows of at least 8 chunks");
    return r * D + ((c ^ (r & 7)) << 3);
}

// ROWS rows of a (batch, head) slice, starting at row0, into a swizzled tile; rows at or past
// `n` are zero-filled and never read. Every thread of the block takes part: thread t copies
// chunk t % C of rows t / C, t / C + kStep, ... (C chunks per row), so its source pointer only
// advances by kStep rows and its destinations differ by constants (kStep is a multiple of 8, so
// the swizzle of its rows is the same): few live registers across the main loop.
template <typename T, int ROWS, int D>
__device__ __forceinline__ void
load_tile_async(T *tile, const Slice<const T> &g, int row0, int n, int tid)
{
    constexpr int kChunks = D / 8;
    constexpr int kStep = kThreads / kChunks;
    static_assert(kThreads % kChunks == 0 && ROWS % kStep == 0 && kStep % 8 == 0,
                  "tile must split evenly over the block");
    const int r0 = tid / kChunks, c = tid % kChunks;
    const T *src = g.row(row0 + r0) + c * 8;
    const int64_t step = (int64_t)kStep * g.row_stride;
    const uint32_t dst = smem_u32(tile + swz<D>(r0, c));
#pragma unroll
    for (int i = 0; i < ROWS / kStep; i++) {
        const bool valid = row0 + r0 + i * kStep < n;
        cp_async16(dst + i * kStep * D * (int)sizeof(T), valid ? src : g.base, valid);
        src += step;
    }
}

// A fragments of this warp's MT×16 query rows (starting at tile row `row0`), all of head_dim.
template <typename T, int D, int MT>
__device__ __forceinline__ void
load_q_frags(uint32_t qf[MT][D / 16][4], const T *tile, int row0, int lane)
{
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            const int r = row0 + mt * 16 + (lane & 15);
            const int c = kk * 2 + (lane >> 4);
            ldmatrix_x4(qf[mt][kk], smem_u32(tile + swz<D>(r, c)));
        }
}

// s = Q·Kᵀ for this warp's rows against the BN keys of a K tile. One ldmatrix.x4 gives the two
// B fragments of 16 keys for one 16-wide slice of head_dim, reused by all MT row tiles.
template <typename T, int D, int MT, int BN>
__device__ __forceinline__ void
qk_tile(float s[MT][BN / 8][4], const uint32_t qf[MT][D / 16][4], const T *ktile, int lane)
{
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[mt][nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++)
#pragma unroll
        for (int np = 0; np < BN / 16; np++) {
            uint32_t kf[4];
            const int r = np * 16 + (lane & 7) + ((lane >> 4) << 3);
            const int c = kk * 2 + ((lane >> 3) & 1);
            ldmatrix_x4(kf, smem_u32(ktile + swz<D>(r, c)));
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                Mma<T>::mma(s[mt][2 * np], qf[mt][kk], kf[0], kf[1]);
                Mma<T>::mma(s[mt][2 * np + 1], qf[mt][kk], kf[2], kf[3]);
            }
        }
}

// The same product with Q read from its shared-memory tile (rows row0..) one 16-wide slice of
// head_dim at a time: for warps of 32 rows and head_dim 128, where Q in registers would leave
// too few for S and O.
template <typename T, int D, int MT, int BN>
__device__ __forceinline__ void
qk_tile_q_smem(float s[MT][BN / 8][4], const T *qtile, int row0, const T *ktile, int lane)
{
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[mt][nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        uint32_t qf[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
            ldmatrix_x4(qf[mt], smem_u32(qtile + swz<D>(row0 + mt * 16 + (lane & 15),
                                                        kk * 2 + (lane >> 4))));
#pragma unroll
        for (int np = 0; np < BN / 16; np++) {
            uint32_t kf[4];
            const int r = np * 16 + (lane & 7) + ((lane >> 4) << 3);
            const int c = kk * 2 + ((lane >> 3) & 1);
            ldmatrix_x4(kf, smem_u32(ktile + swz<D>(r, c)));
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                Mma<T>::mma(s[mt][2 * np], qf[mt], kf[0], kf[1]);
                Mma<T>::mma(s[mt][2 * np + 1], qf[mt], kf[2], kf[3]);
            }
        }
    }
}

// o += P·V for BN keys of a V tile. `a_frag(mt, kk, a)` supplies the A fragment of row tile mt
// and key chunk kk (16 keys). ldmatrix.trans turns row-major V into B fragments.
template <typename T, int D, int MT, int BN, typename AFrag>
__device__ __forceinline__ void
pv_tile(float o[MT][D / 8][4], AFrag a_frag, const T *vtile, int lane)
{
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
            a_frag(mt, kk, a[mt]);
#pragma unroll
        for (int dp = 0; dp < D / 16; dp++) {
            uint32_t vf[4];
            const int r = kk * 16 + (lane & 15);
            const int c = dp * 2 + (lane >> 4);
            ldmatrix_x4_trans(vf, smem_u32(vtile + swz<D>(r, c)));
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                Mma<T>::mma(o[mt][2 * dp], a[mt], vf[0], vf[1]);
                Mma<T>::mma(o[mt][2 * dp + 1], a[mt], vf[2], vf[3]);
            }
        }
    }
}

// The A fragment of key chunk kk from an fp32 S accumulator (see the layout note above).
template <typename T, int NT>
__device__ __forceinline__ void
s_to_a(const float s[NT][4], int kk, uint32_t a[4])
{
    a[0] = Mma<T>::pack(s[2 * kk][0], s[2 * kk][1]);
    a[1] = Mma<T>::pack(s[2 * kk][2], s[2 * kk][3]);
    a[2] = Mma<T>::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    a[3] = Mma<T>::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// Writes this warp's rows of O (times inv[mt][half], per row) as T: through the warp's own rows
// of the swizzled `stage` tile (which only this warp reads or writes), then 16-byte coalesced
// stores of the rows below n.
template <typename T, int D, int MT>
__device__ __forceinline__ void
store_o(const float o[MT][D / 8][4], const float inv[MT][2], T *stage, int row0, const Slice<T> &g,
        int m0, int n, int lane)
{
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int dt = 0; dt < D / 8; dt++)
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int r = row0 + mt * 16 + (lane >> 2) + 8 * half;
                const float x = o[mt][dt][2 * half] * inv[mt][half];
                const float y = o[mt][dt][2 * half + 1] * inv[mt][half];
                T *dst = stage + swz<D>(r, dt) + 2 * (lane & 3);
                *reinterpret_cast<uint32_t *>(dst) = Mma<T>::pack(x, y);
            }
    __syncwarp();
    constexpr int kChunks = D / 8;
#pragma unroll
    for (int i = lane; i < MT * 16 * kChunks; i += 32) {
        const int r = row0 + i / kChunks, c = i % kChunks;
        if (m0 + r < n)
            *reinterpret_cast<uint4 *>(g.row(m0 + r) + c * 8) =
                *reinterpret_cast<const uint4 *>(stage + swz<D>(r, c));
    }
}

} // namespace tc
} // namespace gp_attn
