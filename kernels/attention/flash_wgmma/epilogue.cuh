// flash_wgmma's epilogue: O / l leaves a consumer warpgroup from registers, or through shared
// memory and one TMA store per 64-column block. Part of attention_flash_wgmma.cu (block.cuh says
// how the parts fit).
#pragma once

#include "attention/flash_wgmma/mainloop.cuh"

namespace gp_attn {
// An anonymous namespace in a header: these headers are parts of one translation unit,
// attention_flash_wgmma.cu, and its kernels stay internal to it (as they were in one file).
namespace {

#if GP_SM90A

// O / l, rounded to T, for the rows that exist.
template <typename T, int D, int BM>
__device__ __forceinline__ void
Consumer<T, D, BM>::store(const gp_attn_params &p, int r0, int lane, int b, int h)
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
template <typename T, int D, int BM>
__device__ __forceinline__ void
Consumer<T, D, BM>::store_tma(const CUtensorMap *map, uint32_t buf, int t, int row_lo, int h, int b,
                              int bar_id)
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
            stmatrix_x4(buf + (i / 8) * (64 * 128) + row * 128 + (((i & 7) ^ (row & 7)) << 4), r);
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

#endif // GP_SM90A

} // namespace
} // namespace gp_attn
