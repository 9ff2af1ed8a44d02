// Pieces every attention family shares: element types, the (batch, head) slice of a tensor, the
// launch grid and the error checks around a launch. Device code only sees gp_attn_params.
#pragma once

#include "attention.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>
#include <stdint.h>

namespace gp_attn {

constexpr float kLog2e = 1.4426950408889634f;

// Element conversion to and from fp32, for the three dtypes.
template <typename T> struct Elem;
template <> struct Elem<float> {
    static __device__ __forceinline__ float to_float(float x)
    {
        return x;
    }
    static __device__ __forceinline__ float from_float(float x)
    {
        return x;
    }
};
template <> struct Elem<__half> {
    static __device__ __forceinline__ float to_float(__half x)
    {
        return __half2float(x);
    }
    static __device__ __forceinline__ __half from_float(float x)
    {
        return __float2half_rn(x);
    }
};
template <> struct Elem<__nv_bfloat16> {
    static __device__ __forceinline__ float to_float(__nv_bfloat16 x)
    {
        return __bfloat162float(x);
    }
    static __device__ __forceinline__ __nv_bfloat16 from_float(float x)
    {
        return __float2bfloat16_rn(x);
    }
};

// The (batch, head) slice of one tensor: its first row and the distance between rows.
template <typename T> struct Slice {
    T *base;
    int64_t row_stride;
    __device__ __forceinline__ T *row(int r) const
    {
        return base + (int64_t)r * row_stride;
    }
};

template <typename T>
__device__ __forceinline__ Slice<T>
slice(const void *ptr, const int64_t stride[3], int b, int h)
{
    T *base = (T *)ptr + (int64_t)b * stride[0] + (int64_t)h * stride[1];
    return Slice<T>{base, stride[2]};
}

// Grid: x walks the query tiles (times `x_mult` column tiles where a kernel needs them), y the
// heads, z the batch; gp_attn_params keeps batch and heads within the 65535 limit of y and z.
inline dim3
grid_for(const gp_attn_params &p, int rows_per_block, int x_mult = 1)
{
    const unsigned tiles = (unsigned)((p.seq + rows_per_block - 1) / rows_per_block);
    return dim3(tiles * (unsigned)x_mult, (unsigned)p.heads, (unsigned)p.batch);
}

// Shapes every family rejects: empty, too many heads or batches, a non-positive scale.
inline bool
common_shape_ok(const gp_attn_params &p)
{
    return p.batch > 0 && p.heads > 0 && p.seq > 0 && p.head_dim > 0 &&
           p.batch <= GP_ATTN_MAX_BATCH && p.heads <= GP_ATTN_MAX_HEADS && p.scale > 0.0f &&
           (unsigned)p.dtype <= (unsigned)GP_ATTN_BF16;
}

// Kernels that need more than 48 KB of dynamic shared memory must say so before each launch
// (the attribute is per device, and the caller may have switched devices).
template <typename... Params, typename... Args>
inline cudaError_t
launch_with_smem(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                 Args... args)
{
    if (smem > 48 * 1024) {
        cudaError_t err =
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess)
            return err;
    }
    kernel<<<grid, block, smem, stream>>>(args...);
    return cudaGetLastError();
}

} // namespace gp_attn
