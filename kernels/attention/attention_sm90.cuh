// Hopper (sm_90a) building blocks for attention_flash_wgmma.cu: mbarriers, TMA tile loads,
// warpgroup MMA (wgmma) with its shared-memory descriptors, and register reallocation between
// warpgroups. All of it is PTX that only sm_90a has, so the device functions exist only when the
// file is compiled for compute_90a (GP_SM90A); other passes see the host side alone: the tensor
// maps' encoding and the check that the device runs this build's sm_90a code.
//
// Shared-memory tiles use the 128-byte swizzle that TMA (CU_TENSOR_MAP_SWIZZLE_128B) writes and
// wgmma reads: a tile is stored as column blocks of 64 16-bit elements (128 bytes, one row of
// the swizzle), each block holding all the tile's rows; 8 consecutive rows form a 1024-byte atom
// in which 16-byte chunk c of row r sits at chunk position c ^ (r % 8). Every block starts on a
// 1024-byte boundary, so the hardware's XOR (taken from address bits) matches TMA's.
#pragma once

#include "attention_tc.cuh" // tc::Mma<T>::pack: two fp32 values to a 16-bit pair

#include <cuda.h> // CUtensorMap and the encode function's types only; libcuda is never linked

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GP_SM90A 1
#else
#define GP_SM90A 0
#endif

namespace gp_attn {
namespace sm90 {

// n / d for n < 2^31 as a multiply-high and a shift, d fixed at launch (the producer of a
// persistent block maps each work item to its query tile, head and batch; a 64-bit division is
// a call of about a hundred instructions). With l = ceil(log2 d) and m = ceil(2^(31 + l) / d) <
// 2^32, floor(n·m / 2^(31 + l)) = floor(n / d) for every n < 2^31 (Granlund and Montgomery's
// bound; tests/kernels/test_attention_fast_div.py checks every d up to 4096 and next to each
// power of two through gp_attn_fast_div, the host twin). fast_div(d) makes the constants.
struct FastDiv {
    uint32_t d, mul, shift; // d = 1: mul unused
    __host__ __device__ __forceinline__ uint32_t div(uint32_t n) const
    {
#if defined(__CUDA_ARCH__)
        const uint32_t hi = __umulhi(n, mul);
#else
        const uint32_t hi = (uint32_t)(((uint64_t)n * mul) >> 32);
#endif
        return d == 1 ? n : hi >> shift;
    }
};

inline FastDiv
fast_div(uint32_t d)
{
    FastDiv f{d < 1 ? 1u : d, 0, 0};
    if (f.d == 1)
        return f;
    uint32_t l = 0;
    while ((1ull << l) < f.d)
        l++;
    f.mul = (uint32_t)(((1ull << (31 + l)) + f.d - 1) / f.d);
    f.shift = l - 1;
    return f;
}

#if GP_SM90A

__device__ __forceinline__ uint32_t
smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

// ---- mbarriers: a count of arrivals plus a count of bytes (TMA transactions) per phase ---------

__device__ __forceinline__ void
mbar_init(uint64_t *bar, uint32_t arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(arrivals)
                 : "memory");
}

// Makes the initialized barriers visible to the other threads and to the async (TMA) proxy.
__device__ __forceinline__ void
mbar_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival that also announces `bytes` of TMA data the phase must receive before it completes.
__device__ __forceinline__ void
mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
                 "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void
mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

// Waits until the phase with this parity (0 for the first, 1 for the second, ...) completed.
__device__ __forceinline__ void
mbar_wait(uint64_t *bar, uint32_t parity)
{
    const uint32_t addr = smem_u32(bar);
    uint32_t done;
    do {
        asm volatile("{\n"
                     ".reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n"
                     "}\n"
                     : "=r"(done)
                     : "r"(addr), "r"(parity)
                     : "memory");
    } while (!done);
}

// 2^x on the MUFU pipe (flush-to-zero; ex2(-inf) = 0).
__device__ __forceinline__ float
ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// ---- TMA ---------------------------------------------------------------------------------------

__device__ __forceinline__ void
tma_prefetch_map(const CUtensorMap *map)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

// The box at coordinates (c0 innermost .. c3) of a 4-D tensor map into shared memory; completion
// is counted in bytes on `bar`. Elements outside the tensor are written as zeros (and counted).
__device__ __forceinline__ void
tma_load_4d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1, int c2, int c3)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(smem_u32(dst)),
                 "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar))
                 : "memory");
}

// The box at coordinates (c0 innermost .. c3) of a 4-D tensor map from shared memory (address
// `src`) to global; elements outside the tensor are not written. The copy joins the issuing
// thread's current bulk async-group (bulk_commit, bulk_wait_read, bulk_wait). Before it,
// fence_async_shared: the threads' writes of `src` are generic-proxy stores, and TMA reads
// through the async proxy.
__device__ __forceinline__ void
tma_store_4d(const CUtensorMap *map, uint32_t src, int c0, int c1, int c2, int c3)
{
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group"
                 " [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(map),
                 "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}

__device__ __forceinline__ void
bulk_commit()
{
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// Until at most N of this thread's bulk groups still read their shared memory (it may be
// written again).
template <int N>
__device__ __forceinline__ void
bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

// Until at most N of this thread's bulk groups are incomplete (their writes done).
template <int N>
__device__ __forceinline__ void
bulk_wait()
{
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

// Makes this thread's earlier shared-memory writes visible to the async proxy (a TMA store).
__device__ __forceinline__ void
fence_async_shared()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Named barrier `id` (1..15; 0 is __syncthreads') for THREADS threads, whole warps.
template <int THREADS>
__device__ __forceinline__ void
named_sync(int id)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(THREADS) : "memory");
}

// Arrive at named barrier `id` of THREADS threads without waiting for it.
template <int THREADS>
__device__ __forceinline__ void
named_arrive(int id)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(THREADS) : "memory");
}

// Four 8×8 matrices of 16-bit elements from registers to shared memory: lane l gives the address
// of row l % 8 of matrix l / 8 (16 bytes); register q holds matrix q as an mma accumulator
// fragment pair (row lane / 4, columns 2·(lane % 4), +1).
__device__ __forceinline__ void
stmatrix_x4(uint32_t addr, const uint32_t (&r)[4])
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
                 "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}

// ---- register reallocation (per warpgroup; every warp of it executes the same one) -------------

template <int REGS>
__device__ __forceinline__ void
regs_release()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

template <int REGS>
__device__ __forceinline__ void
regs_claim()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

// ---- wgmma -----------------------------------------------------------------------------------

// Shared-memory matrix descriptor for a 128B-swizzled operand (PTX ISA, "Matrix Descriptor
// Format"): start address, leading and stride byte offsets (all in 16-byte units), swizzle mode 1
// (128B) in bits 62-63; base offset 0 because every atom is 1024-byte aligned.
//   K-major (Q and K for S = Q·Kᵀ): the leading offset is unused; stride = 1024 bytes between
//       8-row groups. Stepping 16 elements along K inside the 128-byte row adds 32 bytes to the
//       start address; the next 64 elements are the next column block.
//   MN-major (V for O += P·V, transposed B): leading = bytes between 64-column blocks (N);
//       stride = 1024 bytes between groups of 8 keys (K).
__device__ __forceinline__ uint64_t
desc_sw128(uint32_t addr, uint32_t leading_bytes, uint32_t stride_bytes)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | (uint64_t)((leading_bytes >> 4) & 0x3FFF) << 16 |
           (uint64_t)((stride_bytes >> 4) & 0x3FFF) << 32 | (uint64_t)1 << 62;
}

// Before the first wgmma of a batch: orders earlier register accesses before the async MMA.
__device__ __forceinline__ void
wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void
wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Waits until at most N committed batches of this warpgroup are still running.
template <int N>
__device__ __forceinline__ void
wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accesses of registers that an in-flight wgmma owns across this
// point (the asm claims to read and write each of them).
template <int R>
__device__ __forceinline__ void
pin(float (&r)[R])
{
#pragma unroll
    for (int i = 0; i < R; i++)
        asm volatile("" : "+f"(r[i])::"memory");
}

template <int R>
__device__ __forceinline__ void
pin(uint32_t (&r)[R][4])
{
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            asm volatile("" : "+r"(r[i][e])::"memory");
}

// The two products as wgmma.m64nNk16 with fp32 accumulators, N/2 per thread:
//   ss: d (+)= A·B with A (64×16) and B (N×16, i.e. Bᵀ K-major) both from shared memory;
//   rs: d += A·B with A (64×16) from registers (4 registers of 16-bit pairs, the mma.sync A
//       fragment layout per warp) and B (16×N) N-major from shared memory (imm-trans-b = 1).
// `accumulate` = 0 overwrites d (scale-d false).
#define GP_F8(i)                                                                                   \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),    \
        "+f"(d[i + 6]), "+f"(d[i + 7])
#define GP_F32 GP_F8(0), GP_F8(8), GP_F8(16), GP_F8(24)
#define GP_F64 GP_F32, GP_F8(32), GP_F8(40), GP_F8(48), GP_F8(56)
#define GP_R32                                                                                     \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "  \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define GP_R64                                                                                     \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "  \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "   \
    "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "   \
    "%56, %57, %58, %59, %60, %61, %62, %63}"

// SS_OPS: "a-desc, b-desc" and the predicate's source; RS_OPS: "{a0..a3}, b-desc" and the same.
#define GP_WGMMA(CT, TY, N, REGS, OUTS, SS_OPS, SS_P, RS_OPS, RS_P)                                \
    template <> struct Wgmma<CT, N> {                                                              \
        static __device__ __forceinline__ void ss(float (&d)[N / 2], uint64_t a, uint64_t b,       \
                                                  int accumulate)                                  \
        {                                                                                          \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SS_P ", 0;\n"                         \
                         "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " " REGS      \
                         ", " SS_OPS ", p, 1, 1, 0, 0;\n}\n"                                       \
                         : OUTS                                                                    \
                         : "l"(a), "l"(b), "r"(accumulate)                                         \
                         : "memory");                                                              \
        }                                                                                          \
        static __device__ __forceinline__ void rs(float (&d)[N / 2], const uint32_t (&a)[4],       \
                                                  uint64_t b, int accumulate)                      \
        {                                                                                          \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " RS_P ", 0;\n"                         \
                         "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " " REGS      \
                         ", " RS_OPS ", p, 1, 1, 1;\n}\n"                                          \
                         : OUTS                                                                    \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate)     \
                         : "memory");                                                              \
        }                                                                                          \
    };

template <typename T, int N> struct Wgmma;
GP_WGMMA(__half, "f16", 64, GP_R32, GP_F32, "%32, %33", "%34", "{%32, %33, %34, %35}, %36", "%37")
GP_WGMMA(__half, "f16", 128, GP_R64, GP_F64, "%64, %65", "%66", "{%64, %65, %66, %67}, %68", "%69")
GP_WGMMA(__nv_bfloat16, "bf16", 64, GP_R32, GP_F32, "%32, %33", "%34", "{%32, %33, %34, %35}, %36",
         "%37")
GP_WGMMA(__nv_bfloat16, "bf16", 128, GP_R64, GP_F64, "%64, %65", "%66", "{%64, %65, %66, %67}, %68",
         "%69")

#undef GP_WGMMA
#undef GP_R64
#undef GP_R32
#undef GP_F64
#undef GP_F32
#undef GP_F8

#endif // GP_SM90A

// ---- host: tensor maps for TMA, and whether the device runs sm_90a code ----------------------

constexpr int kBlockCols = 64; // 16-bit elements per 128-byte swizzle row: a TMA box's width

typedef CUresult (*EncodeTiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled through the runtime, so that the extension never links libcuda.
inline EncodeTiled
encoder()
{
    static const EncodeTiled fn = [] {
        void *f = nullptr;
        cudaDriverEntryPointQueryResult status;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                             &status) != cudaSuccess ||
            status != cudaDriverEntryPointSuccess) {
            (void)cudaGetLastError();
            return (EncodeTiled) nullptr;
        }
        return (EncodeTiled)f;
    }();
    return fn;
}

// A tensor [batch, heads, seq, head_dim] as a 4-D map, innermost first; boxes of 64 columns ×
// `rows` rows of one (batch, head), swizzled by 128 bytes; out-of-range elements read as zero.
inline bool
encode(CUtensorMap *map, const void *ptr, const int64_t stride[3], const gp_attn_params &p,
       int rows)
{
    const EncodeTiled fn = encoder();
    if (fn == nullptr)
        return false;
    const cuuint64_t dims[4] = {(cuuint64_t)p.head_dim, (cuuint64_t)p.seq, (cuuint64_t)p.heads,
                                (cuuint64_t)p.batch};
    // Byte strides of seq, heads, batch. gpuprofile gives dimensions of size 1 a zero stride;
    // the coordinate there is always 0, so any stride serves: a dense one, which the encoder
    // accepts whatever it checks.
    cuuint64_t strides[3] = {(cuuint64_t)stride[2] * 2, (cuuint64_t)stride[1] * 2,
                             (cuuint64_t)stride[0] * 2};
    for (int i = 0; i < 3; i++)
        if (dims[i + 1] == 1) {
            const cuuint64_t dense = i == 0 ? dims[0] * 2 : strides[i - 1] * dims[i];
            strides[i] = dense < ((cuuint64_t)1 << 40) ? dense : strides[i - 1];
        }
    const cuuint32_t box[4] = {(cuuint32_t)kBlockCols, (cuuint32_t)rows, 1, 1};
    const cuuint32_t unit[4] = {1, 1, 1, 1};
    const CUtensorMapDataType type =
        p.dtype == GP_ATTN_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    return fn(map, type, 4, const_cast<void *>(ptr), dims, strides, box, unit,
              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
              CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// An sm_90 device (wgmma and TMA as compiled here exist on 9.0 only) and sm_90a code in this
// build for the kernel.
template <typename Kernel>
bool
runnable_here(Kernel kernel)
{
    int device, major, minor;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess ||
        major != 9 || minor != 0) {
        (void)cudaGetLastError();
        return false;
    }
    cudaFuncAttributes attr;
    if (cudaFuncGetAttributes(&attr, kernel) != cudaSuccess || attr.binaryVersion != 90) {
        (void)cudaGetLastError();
        return false;
    }
    return true;
}

} // namespace sm90
} // namespace gp_attn
