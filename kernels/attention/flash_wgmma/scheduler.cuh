// flash_wgmma's tile scheduler: the order in which a persistent block's work items (query tile,
// head, batch) go out (the fixed kernel has one item per block, its query tile from blockIdx).
// Part of attention_flash_wgmma.cu (block.cuh says how the parts fit).
#pragma once

#include "attention/flash_wgmma/block.cuh"

namespace gp_attn {
// An anonymous namespace in a header: these headers are parts of one translation unit,
// attention_flash_wgmma.cu, and its kernels stay internal to it (as they were in one file).
namespace {

#if GP_SM90A

struct Item {
    int m0, h, b;
};

// Work item i, the k-th item of block x = i mod grid (i = x + k · grid, the grid's stride).
// Causal and paired (v9): a (batch, head)'s query tiles go in twos of equal work, a tile with its
// complement (m_tiles - 1 with 0, m_tiles - 2 with 1, ...; with an odd m_tiles the middle tile of
// an even (batch, head) goes with that of the next, whose order starts with it), and the twos
// in the order of the (batch, head) pairs. Block x takes two x + j · grid in its rounds 2j and
// 2j + 1 for the first a.two_rounds rounds, so every block gets the same work there; what is
// left (a round and a partial one, or the partial one) goes out in the same order, a two to each
// block of the partial round and one item to the others (or one item each). Every block keeps
// the stride's item count: the consumers count their items as in the other orders, and ptxas
// builds the same tile loop (a count of their own changed persist_lookahead's schedule and ran it
// up to 17 % slower on an H100). A (batch, head)'s twos go to neighbouring blocks, which share
// its K and V in L2.
// Causal otherwise: the (batch, head) pairs go in groups of a.group, and within a group the
// query tiles heaviest first (m_tiles - 1 first, for every pair of the group, then m_tiles - 2,
// ...), so blocks that run together share a few heads' K and V in L2, and the snake below hands
// each block a mix of heavy and light items. Not causal: the query tiles of one (batch, head)
// are consecutive items, so blocks running together share its K and V in L2.
template <int BM>
__device__ __forceinline__ Item
work_item(const Args &a, int64_t item)
{
    const gp_attn_params &p = a.p;
    const uint32_t bh = (uint32_t)p.batch * p.heads, items = (uint32_t)a.items;
    uint32_t i = (uint32_t)item, mt, r;
    if (p.causal && a.paired) {
        // i becomes the item's place in the order of twos
        const uint32_t grid = gridDim.x, k = a.by_grid.div(i), x = i - k * grid;
        const uint32_t rest = (uint32_t)a.rest, last = (uint32_t)a.last_round;
        if (k < (uint32_t)a.two_rounds)
            i = 2 * ((k >> 1) * grid + x) + (k & 1);
        else if (a.rest_twos && x < last) // a two: this round's item and the next one's
            i = rest + 2 * x + (k - (uint32_t)a.two_rounds);
        else if (a.rest_twos)
            i = rest + 2 * last + (x - last);
        else
            i = rest + x;
        const uint32_t m_tiles = (uint32_t)a.m_tiles;
        r = a.by_m_tiles.div(i);
        uint32_t at = i - r * m_tiles; // the tile's place in its (batch, head)'s order
        if ((m_tiles & 1) && (r & 1) && at-- == 0)
            mt = m_tiles >> 1; // an odd (batch, head)'s first: the middle tile
        else
            mt = (at & 1) ? at >> 1 : m_tiles - 1 - (at >> 1);
    } else if (p.causal) {
        // Odd rounds of the grid's stride run backwards (a snake), so the block that takes the
        // heaviest item of one round takes the lightest of the next: over two rounds every block
        // gets about the same work, where in-order strides gave block 0 the heaviest item of
        // every round (the last round, when partial, stays in order: its items are the fewest).
        const uint32_t grid = gridDim.x, round = a.by_grid.div(i);
        if ((round & 1) && (round + 1) * grid <= items)
            i = round * grid + (grid - 1 - (i - round * grid));
        const uint32_t per_group = (uint32_t)a.group * a.m_tiles, g = a.by_group_tiles.div(i);
        const uint32_t first = g * a.group, within = i - g * per_group;
        // the last group may have fewer pairs: a plain division there
        const uint32_t pairs = bh - first < (uint32_t)a.group ? bh - first : a.group;
        const uint32_t q = pairs == (uint32_t)a.group ? a.by_group.div(within) : within / pairs;
        mt = a.m_tiles - 1 - q;
        r = first + (within - q * pairs);
    } else {
        r = a.by_m_tiles.div(i);
        mt = i - r * a.m_tiles;
    }
    const uint32_t b = a.by_heads.div(r);
    return Item{(int)mt * BM, (int)(r - b * p.heads), (int)b};
}

#endif // GP_SM90A

} // namespace
} // namespace gp_attn
