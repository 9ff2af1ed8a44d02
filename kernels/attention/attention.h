/* Attention forward kernels: O = softmax(scale * Q Kᵀ [+ causal mask]) V, per (batch, head).
 *
 * A plain C ABI: the launchers take a POD params struct and a stream, return the launch's
 * cudaError_t and know nothing of Python. Tensors are [batch, heads, seq, head_dim] with head_dim
 * contiguous; the other three strides are free (in elements, int64). Q, K, V and O share one
 * shape and dtype. Four families, one file each:
 *   attention_naive.cu     three kernels, the N×N score matrix materialized in fp32 (memory-bound)
 *   attention_flash.cu     fused online softmax on CUDA cores, fp32 arithmetic
 *   attention_flash_tc.cu  fused, fp16/bf16 on tensor cores (mma.sync), fp32 accumulation
 *   attention_flash_wgmma.cu  fused, sm_90a only: TMA, wgmma, warp specialization
 * One configuration per family and head_dim, the fastest measured (docs/benchmarks.md), but
 * flash_wgmma, whose rule picks one of the configurations of its table of schedules per shape
 * (attention/flash_wgmma/schedules.h); the table of implementations that Python sees is
 * csrc/workloads/attention_impls.c. The *_supports
 * functions say which shapes a launcher takes, so callers validate before any GPU work; a
 * launcher given an unsupported shape returns cudaErrorInvalidValue (flash_wgmma:
 * cudaErrorNotSupported). */
#ifndef GP_KERNELS_ATTENTION_H
#define GP_KERNELS_ATTENTION_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { GP_ATTN_F32 = 0, GP_ATTN_F16 = 1, GP_ATTN_BF16 = 2 } gp_attn_dtype;

/* Grid dimensions y and z carry heads and batch, hence the 65535 limit. */
#define GP_ATTN_MAX_BATCH 65535
#define GP_ATTN_MAX_HEADS 65535
/* The naive family's CUDA-core path takes any head_dim up to this. */
#define GP_ATTN_NAIVE_MAX_HEAD_DIM 256

typedef struct {
    const void *q, *k, *v;
    void *o;
    /* Element strides of batch, head and seq; head_dim has stride 1. */
    int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];
    int batch, heads, seq, head_dim;
    float scale; /* > 0: scores are scale * q·k */
    int causal;  /* key j is visible to query i when j <= i */
    gp_attn_dtype dtype;
    /* flash_wgmma's schedule (GP_ATTN_WGMMA_*): 0, per shape, everywhere but the tests and
     * benchmarks. Only flash_wgmma reads it; the others take 0 only. */
    int variant;
} gp_attn_params;

/* flash_wgmma's schedules by number, chosen by gp_attn_params.variant: 0 per shape, what every
 * caller but the tests and benchmarks (_C._testing.attention) runs (gp_attn_flash_wgmma_schedule
 * picks one of the others); 1 to 6 the rows of the table of schedules,
 * kernels/attention/flash_wgmma/schedules.h, which says what each one is. */
enum {
    GP_ATTN_WGMMA_PER_SHAPE = 0,
    GP_ATTN_WGMMA_PERSIST = 1,
    GP_ATTN_WGMMA_BM128 = 2,
    GP_ATTN_WGMMA_PERSIST_BM128 = 3,
    GP_ATTN_WGMMA_FIXED = 4,
    GP_ATTN_WGMMA_PERSIST_LOOKAHEAD = 5,
    GP_ATTN_WGMMA_PERSIST_LOOKAHEAD_CHAINED = 6
};
#define GP_ATTN_WGMMA_VARIANTS 7
/* Bits added to a variant (0 included) to force how O leaves: through shared memory and TMA, or
 * from registers (gp_attn_flash_wgmma_out_smem picks per shape). */
enum { GP_ATTN_WGMMA_OUT_SMEM = 8, GP_ATTN_WGMMA_OUT_REGS = 16 };

/* Nonzero when every row of every tensor starts on a 16-byte boundary (cp.async, vector I/O). */
static inline int
gp_attn_rows_aligned16(const gp_attn_params *p)
{
    const int64_t elem = p->dtype == GP_ATTN_F32 ? 4 : 2;
    const void *ptrs[4] = {p->q, p->k, p->v, p->o};
    const int64_t *strides[4] = {p->q_stride, p->k_stride, p->v_stride, p->o_stride};
    for (int t = 0; t < 4; t++) {
        if ((uintptr_t)ptrs[t] % 16 != 0)
            return 0;
        for (int i = 0; i < 3; i++)
            if ((strides[t][i] * elem) % 16 != 0)
                return 0;
    }
    return 1;
}

/* naive: scores = scale·QKᵀ into an fp32 workspace, row softmax in place, O = P·V. fp16/bf16 with
 * head_dim 64 or 128 and aligned rows use tensor cores for the two products; everything else
 * (fp32, other head_dims up to 256) runs on CUDA cores. */
int gp_attn_naive_supports(const gp_attn_params *p);
size_t gp_attn_naive_workspace_bytes(const gp_attn_params *p);
cudaError_t gp_attn_naive(const gp_attn_params *p, void *workspace, cudaStream_t stream);

/* flash: fp32 arithmetic on CUDA cores for any dtype; head_dim 64 or 128. */
int gp_attn_flash_supports(const gp_attn_params *p);
cudaError_t gp_attn_flash(const gp_attn_params *p, cudaStream_t stream);

/* flash_tc: fp16/bf16, head_dim 64 or 128, rows aligned to 16 bytes. Needs sm_80 or newer. */
int gp_attn_flash_tc_supports(const gp_attn_params *p);
cudaError_t gp_attn_flash_tc(const gp_attn_params *p, cudaStream_t stream);

/* flash_wgmma (Hopper; impl="auto" picks it where it runs): fp16/bf16, head_dim 64 or 128, rows
 * aligned to 16 bytes, non-negative strides. _supports checks the shape only; the launcher also
 * needs an sm_90 device, sm_90a code in the build (GPUPROFILE_CUDA_ARCHS listing 90) and the
 * driver's tensor-map encoder, and returns cudaErrorNotSupported without them, or for a shape it
 * does not take. _runnable says whether those hold for the current device (asked once per
 * device). */
int gp_attn_flash_wgmma_supports(const gp_attn_params *p);
int gp_attn_flash_wgmma_runnable(void);
/* Nonzero in a build with GPUPROFILE_ATTN_LAB=1: every configuration of the table of schedules
 * (flash_wgmma/schedules.h) both ways; zero in the shipped build, which has what the rule reaches.
 */
int gp_attn_flash_wgmma_lab(void);
cudaError_t gp_attn_flash_wgmma_launch(const gp_attn_params *p, cudaStream_t stream);
/* The schedule (GP_ATTN_WGMMA_*, never PER_SHAPE) that variant 0 runs for p's shape and causal
 * on a device of `sms` SMs; pure, no device needed (the rule and its measurements: the
 * definition, kernels/attention/NOTES.md). _schedule_name: "persist", "bm128", "persist_bm128",
 * "fixed", "persist_lookahead", "persist_lookahead_chained" (0: "per_shape"; out of range:
 * "unknown"). */
int gp_attn_flash_wgmma_schedule(const gp_attn_params *p, int sms);
const char *gp_attn_flash_wgmma_schedule_name(int schedule);
/* Nonzero where `schedule` (never PER_SHAPE) stores O through shared memory and TMA for p's
 * shape, zero where from registers; pure. */
int gp_attn_flash_wgmma_out_smem(const gp_attn_params *p, int schedule);
/* How a persistent schedule (PERSIST, PERSIST_BM128, PERSIST_LOOKAHEAD and its _CHAINED form)
 * hands its work items (query tile, head, batch) to its blocks for p's shape on `sms` SMs: "in
 * order" (not causal: a (batch, head)'s tiles on consecutive blocks), "twos" (causal: each block
 * takes a tile and its complement, of equal work together) or "heaviest first" (causal, in groups
 * of heads sized for the L2); NULL for the other schedules or sms < 1. Pure. */
const char *gp_attn_flash_wgmma_order(const gp_attn_params *p, int schedule, int sms);
/* Whether causal work items go out in twos of equal work (m_tiles query tiles per (batch, head),
 * `items` in all, on `sms` SMs); pure, the launcher's and _order's. */
int gp_attn_flash_wgmma_paired(const gp_attn_params *p, int m_tiles, long long items, int sms);
/* n / d as the persistent kernels divide (a multiply-high and a shift with constants made on the
 * host, attention_sm90.cuh FastDiv), for d from 1 to 2^32 - 1 and n from 0 to 2^31 - 1; -1
 * outside those ranges. For tests. */
long long gp_attn_fast_div(long long d, long long n);

#ifdef __cplusplus
}
#endif

#endif
