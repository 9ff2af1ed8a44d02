// flash_wgmma's rule: which schedule (schedules.h) a shape runs, how it stores O and how a
// persistent schedule hands out its work items. Pure host code, no device code and no device
// query (the SM count comes in as an argument), so the CPU tests check it
// (tests/kernels/test_attention_wgmma_schedule.py); FlashAttention-3's tile_size.h and
// heuristics.h are its counterpart. Each threshold says why in a line; the grids that set them
// (ratios to cuDNN per shape, H100 and H200) are in kernels/attention/NOTES.md and
// docs/benchmarks.md.
#include "attention/attention.h"
#include "attention/flash_wgmma/schedules.h"

#include <stdint.h>
#include <stdlib.h>

namespace {

constexpr int kKeyTile = GP_ATTN_WGMMA_KEY_TILE; // keys per tile (block.cuh kBN)

// Query rows of one block (or work item) of `schedule` at p's head_dim.
int
rows_of(const gp_attn_params *p, int schedule)
{
    const gp_attn_wgmma_config *c = gp_attn_wgmma_config_at(schedule, p->head_dim);
    return c != nullptr ? 64 * c->consumers : kKeyTile;
}

// The fixed kernel's run time with blocks of `rows` query rows on `sms` SMs, in units of one
// query row times one key tile (a 192-row block's tile is 1.5 times a 128-row block's): blocks
// go out in launch order (blockIdx.x fastest; causal: heaviest first within each (batch, head),
// flash_wgmma_kernel) to the SM that frees first, one block per SM. A causal block of query
// tile i computes the key tiles up to its last row (key_tiles), so block i of n has about
// (i + 1) / n of a full block's work; a row past the sequence's end costs as much as any.
// Without causal every block is equal: waves · block. With causal the blocks are handed out as
// the hardware would, in a min-heap of the SMs' finishing times, unless Graham's bounds of list
// scheduling (the average load, the heaviest block; at most their sum) already decide against
// `limit`: the 192-row run over the 128-row run, compared with `limit` by the caller. Returns
// the ratio of the two runs, or a negative number where the heap's memory was not there.
double
makespan_ratio(const gp_attn_params *p, int sms, double limit)
{
    const int n = p->seq, rows[2] = {192, 128};
    const double heads = (double)p->batch * p->heads;
    double work[2], heaviest[2];
    int64_t blocks[2];
    for (int r = 0; r < 2; r++) {
        const int tiles = (n + rows[r] - 1) / rows[r];
        blocks[r] = (int64_t)tiles * p->batch * p->heads;
        double per_head = 0.0;
        for (int i = 0; i < tiles; i++) {
            const int end = p->causal && (int64_t)(i + 1) * rows[r] < n ? (i + 1) * rows[r] : n;
            per_head += (double)rows[r] * ((end + kKeyTile - 1) / kKeyTile);
        }
        work[r] = heads * per_head;
        heaviest[r] = (double)rows[r] * ((n + kKeyTile - 1) / kKeyTile);
    }
    if (!p->causal) {
        const double waves192 = (double)((blocks[0] + sms - 1) / sms);
        const double waves128 = (double)((blocks[1] + sms - 1) / sms);
        return waves192 * heaviest[0] / (waves128 * heaviest[1]);
    }
    double lo[2], hi[2];
    for (int r = 0; r < 2; r++) {
        lo[r] = work[r] / sms > heaviest[r] ? work[r] / sms : heaviest[r];
        hi[r] = work[r] / sms + heaviest[r];
    }
    if (hi[0] <= limit * lo[1])
        return hi[0] / lo[1];
    if (lo[0] > limit * hi[1])
        return lo[0] / hi[1];
    double run[2];
    for (int r = 0; r < 2; r++) {
        const int tiles = (n + rows[r] - 1) / rows[r];
        const int64_t slots = blocks[r] < sms ? blocks[r] : sms;
        double *heap = (double *)calloc((size_t)slots, sizeof(double)); // finishing times
        if (heap == NULL)
            return -1.0;
        for (int64_t bh = 0; bh < (int64_t)p->batch * p->heads; bh++)
            for (int x = 0; x < tiles; x++) {
                const int i = tiles - 1 - x;
                const int end = (int64_t)(i + 1) * rows[r] < n ? (i + 1) * rows[r] : n;
                double t = heap[0] + (double)rows[r] * ((end + kKeyTile - 1) / kKeyTile);
                int64_t at = 0; // the earliest SM takes the block: sift its new time down
                for (;;) {
                    const int64_t c = 2 * at + 1;
                    if (c >= slots)
                        break;
                    const int64_t m = c + 1 < slots && heap[c + 1] < heap[c] ? c + 1 : c;
                    if (heap[m] >= t)
                        break;
                    heap[at] = heap[m];
                    at = m;
                }
                heap[at] = t;
            }
        run[r] = 0.0;
        for (int64_t s = 0; s < slots; s++)
            run[r] = heap[s] > run[r] ? heap[s] : run[r];
        free(heap);
    }
    return run[0] / run[1];
}

} // namespace

// Causal items go out in twos of equal work (a query tile with its complement, scheduler.cuh)
// where a (batch, head) has at most 16 query tiles and the twos fill the SMs' rounds to within
// 5 %: the order by L2 groups hands the blocks unequal items heaviest first, and its heaviest
// block's load came out 7-11 % over the mean at N = 512 to 2048 against 3 % for twos (modelled;
// measured, twos gained 6-13 % of cuDNN's speed there).
extern "C" int
gp_attn_flash_wgmma_paired(const gp_attn_params *p, int m_tiles, long long items, int sms)
{
    const int64_t twos = (items + 1) / 2, rounds = (twos + sms - 1) / sms;
    return p->causal && m_tiles <= 16 && twos >= sms && rounds * sms * 20 <= twos * 21;
}

// The schedule of variant 0 (what impl="auto" and impl="flash_wgmma" run) per shape.
// head_dim 64:
//   non-causal: persist_lookahead (two S tiles per consumer hide the exponentials best), unless
//     the 192-row block's items fill the SMs' waves better than 128-row items (makespan_ratio
//     below kPersistWaves): then persist.
//   causal: persist_bm128 up to N = 512 (items of 1 to 4 key tiles, whose starts and ends its
//     chaining hides); beyond, persist_lookahead, unless beyond N = 4096 the 192-row blocks
//     would take kBm128Speed times as long as 128-row blocks and 128-row items outnumber the
//     SMs: then bm128 (blocks handed out as SMs free balance unequal causal items better than
//     a static stride).
//   persist_lookahead chains its items up to kChainedSeq (causal kChainedCausalSeq), where an
//     item's start and end weigh more than its tile loop's schedule; beyond, chaining was
//     within the spread either way and the unchained tile loop stays.
// head_dim 128: persist up to N = 2048 (causal) or 8192 (not), else fixed, the persistent block
//   ahead where items are few and short, the fixed block on long causal sequences.
// sms: the device's SM count.
extern "C" int
gp_attn_flash_wgmma_schedule(const gp_attn_params *p, int sms)
{
    constexpr double kBm128Speed = 1.25, kPersistWaves = 1.0;
    constexpr int kChainedSeq = 2048, kChainedCausalSeq = 4096;
    const int n = p->seq;
    if (p->head_dim != 64)
        return n <= (p->causal ? 2048 : 8192) ? GP_ATTN_WGMMA_PERSIST : GP_ATTN_WGMMA_FIXED;
    const int lookahead = n <= (p->causal ? kChainedCausalSeq : kChainedSeq)
                              ? GP_ATTN_WGMMA_PERSIST_LOOKAHEAD_CHAINED
                              : GP_ATTN_WGMMA_PERSIST_LOOKAHEAD;
    if (!p->causal)
        return sms > 0 && makespan_ratio(p, sms, kPersistWaves) < kPersistWaves
                   ? GP_ATTN_WGMMA_PERSIST
                   : lookahead;
    if (n <= 512)
        return GP_ATTN_WGMMA_PERSIST_BM128;
    if (n > 4096 && sms > 0 && makespan_ratio(p, sms, kBm128Speed) > kBm128Speed) {
        const int64_t items128 = (int64_t)((n + kKeyTile - 1) / kKeyTile) * p->batch * p->heads;
        if (items128 > sms)
            return GP_ATTN_WGMMA_BM128;
    }
    return lookahead;
}

// How O leaves: through shared memory and TMA for the head_dim 128 blocks and where
// persist_lookahead's items have few key tiles (N <= 512, causal N <= 2048: the store overlaps
// the next item); from registers for the 192-row block and for persist_lookahead beyond, whose
// builds with the shared-memory store ran long items' tile loops 1-9 % slower.
extern "C" int
gp_attn_flash_wgmma_out_smem(const gp_attn_params *p, int schedule)
{
    const int n = p->seq;
    switch (schedule) {
    case GP_ATTN_WGMMA_PERSIST_LOOKAHEAD:
    case GP_ATTN_WGMMA_PERSIST_LOOKAHEAD_CHAINED:
        return n <= (p->causal ? 2048 : 512);
    case GP_ATTN_WGMMA_PERSIST:
        return p->head_dim == 128;
    default:
        return 1;
    }
}

// How a persistent schedule's blocks take their items for p's shape on `sms` SMs (scheduler.cuh).
extern "C" const char *
gp_attn_flash_wgmma_order(const gp_attn_params *p, int schedule, int sms)
{
    const gp_attn_wgmma_schedule_row *row = gp_attn_wgmma_row(schedule);
    if (row == nullptr || !row->at[0].persistent || sms < 1) // every schedule takes head_dim 64
        return NULL;
    if (!p->causal)
        return "in order";
    const int rows = rows_of(p, schedule);
    const int m_tiles = (p->seq + rows - 1) / rows;
    const int64_t items = (int64_t)m_tiles * p->batch * p->heads;
    return gp_attn_flash_wgmma_paired(p, m_tiles, items, sms) ? "twos" : "heaviest first";
}

extern "C" const char *
gp_attn_flash_wgmma_schedule_name(int schedule)
{
    if (schedule == GP_ATTN_WGMMA_PER_SHAPE)
        return "per_shape";
    const gp_attn_wgmma_schedule_row *row = gp_attn_wgmma_row(schedule);
    return row != nullptr ? row->name : "unknown";
}
