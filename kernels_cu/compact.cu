/**
 * @file compact.cu
 * @brief Stream compaction and stable split of unsigned 32-bit items by nonzero flags (driver: core/device/primitives.cpp).
 *
 * The CUDA twin of kernels_cl/compact.cl (see there for the passes). Order is kept on both sides of a split: the
 * tree build relies on it.
 */
#include "core/device_shared.h"

#include "backend_cuda/kernel_registry.hpp"

namespace {

constexpr unsigned compact_tile = BANYAN_WG * BANYAN_SCAN_ITEMS;
constexpr unsigned compact_warps = BANYAN_WG / 32;
static_assert(BANYAN_WG % 32 == 0 && BANYAN_WG <= 1024, "whole warps, at most 32 of them");

// One padding word per 32: no bank conflicts, striped or blocked.
__device__ __forceinline__ unsigned compact_pad(unsigned i) { return i + (i >> 5); }
constexpr unsigned compact_local_words = compact_tile + compact_tile / 32;

constexpr unsigned full_mask = 0xffffffffu;

// Sum of v over the block, returned to every thread. sums: compact_warps words, not used before.
__device__ __forceinline__ bn_u32 compact_block_reduce(bn_u32 v, bn_u32* sums)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(full_mask, v, o);
    if ((threadIdx.x & 31) == 0) sums[threadIdx.x >> 5] = v;
    __syncthreads();
    bn_u32 total = 0;
    for (unsigned w = 0; w < compact_warps; ++w) total += sums[w];
    return total;
}

// Exclusive prefix sum of v over the block; total gets the block's sum. warp_sums: compact_warps words.
__device__ __forceinline__ bn_u32 compact_block_exclusive(bn_u32 v, bn_u32* warp_sums, bn_u32& total)
{
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    bn_u32 x = v;
    for (int o = 1; o < 32; o <<= 1) {
        const bn_u32 y = __shfl_up_sync(full_mask, x, o);
        if (lane >= static_cast<unsigned>(o)) x += y;
    }
    if (lane == 31) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        bn_u32 w = lane < compact_warps ? warp_sums[lane] : 0u;
        for (int o = 1; o < 32; o <<= 1) {
            const bn_u32 y = __shfl_up_sync(full_mask, w, o);
            if (lane >= static_cast<unsigned>(o)) w += y;
        }
        if (lane < compact_warps) warp_sums[lane] = w;
    }
    __syncthreads();
    total = warp_sums[compact_warps - 1];
    return (warp ? warp_sums[warp - 1] : 0u) + x - v;
}

} // namespace

/// Moves the block's tile of in[0..n): items with flags != 0 to out[offsets[block] + rank among the tile's flagged
/// items]; with BANYAN_COMPACT_SPLIT the others to out[count[0] + unflagged items before them]. count[0] (flagged
/// in all) was written by the scan of the tile counts, or, with BANYAN_COMPACT_SINGLE or BANYAN_COMPACT_LOOKUP, is
/// written here. The tile is reordered in shared memory first, so that global reads and writes are coalesced. Block
/// BANYAN_WG; shared memory: the padded tile and 3 * BANYAN_WG / 32 words. out must not alias in or flags.
__global__ void __launch_bounds__(BANYAN_WG) compactScatter(const bn_u32* in, const bn_u32* flags, bn_u32 n,
                                                            const bn_u32* offsets, bn_u32* out, bn_u32* count,
                                                            bn_u32 mode)
{
    __shared__ bn_u32 tile[compact_local_words];
    __shared__ bn_u32 warp_sums[compact_warps];
    __shared__ bn_u32 before_sums[compact_warps], all_sums[compact_warps];
    // Tiles in reverse order of the counting pass, so that the tiles it read last, likely still in L2, are read first.
    const unsigned tile_id = gridDim.x - 1 - blockIdx.x;
    const unsigned start = tile_id * compact_tile;
    const unsigned valid = min(compact_tile, n - start);

    // Flags, striped (coalesced), as 0/1 into the tile; the values are loaded now so their latency overlaps.
    bn_u32 v[BANYAN_SCAN_ITEMS];
#pragma unroll
    for (unsigned k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        const unsigned j = k * BANYAN_WG + threadIdx.x;
        const bool ok = j < valid;
        tile[compact_pad(j)] = ok && flags[start + j] != 0 ? 1u : 0u;
        v[k] = ok ? in[start + j] : 0u;
    }
    __syncthreads();

    // Blocked: each thread ranks its consecutive items, then the block scans the per-thread counts.
    bn_u32 f[BANYAN_SCAN_ITEMS];
    bn_u32 mine = 0;
#pragma unroll
    for (unsigned k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        f[k] = tile[compact_pad(threadIdx.x * BANYAN_SCAN_ITEMS + k)];
        mine += f[k];
    }
    bn_u32 flagged; // flagged items in this tile
    bn_u32 before = compact_block_exclusive(mine, warp_sums, flagged);
#pragma unroll
    for (unsigned k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        const unsigned j = threadIdx.x * BANYAN_SCAN_ITEMS + k;
        // Destination within the tile: flagged items first, then the others, order kept in both.
        tile[compact_pad(j)] = f[k] ? before : flagged + j - before;
        before += f[k];
    }
    __syncthreads();

    // Striped again: read each item's destination, then place the item there.
    unsigned dest[BANYAN_SCAN_ITEMS];
#pragma unroll
    for (unsigned k = 0; k < BANYAN_SCAN_ITEMS; ++k) dest[k] = tile[compact_pad(k * BANYAN_WG + threadIdx.x)];
    __syncthreads();
#pragma unroll
    for (unsigned k = 0; k < BANYAN_SCAN_ITEMS; ++k)
        if (k * BANYAN_WG + threadIdx.x < valid) tile[compact_pad(dest[k])] = v[k];
    __syncthreads();

    // Flagged items in earlier tiles, and in all tiles (needed by a split, and for count[0]).
    bn_u32 flagged_before, all_flagged;
    if (mode & BANYAN_COMPACT_SINGLE) {
        flagged_before = 0;
        all_flagged = flagged;
    } else if (mode & BANYAN_COMPACT_LOOKUP) { // uniform branch: the whole block takes it
        bn_u32 b = 0, a = 0;
        for (unsigned i = threadIdx.x; i < gridDim.x; i += BANYAN_WG) {
            const bn_u32 c = offsets[i];
            a += c;
            b += i < tile_id ? c : 0u;
        }
        flagged_before = compact_block_reduce(b, before_sums);
        all_flagged = compact_block_reduce(a, all_sums);
    } else {
        flagged_before = offsets[tile_id];
        all_flagged = (mode & BANYAN_COMPACT_SPLIT) ? count[0] : 0u;
    }
    const bn_u32 unflagged_at = all_flagged + (start - flagged_before);
    const unsigned limit = (mode & BANYAN_COMPACT_SPLIT) ? valid : flagged;
#pragma unroll
    for (unsigned k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        const unsigned j = k * BANYAN_WG + threadIdx.x;
        if (j < limit) out[j < flagged ? flagged_before + j : unflagged_at + (j - flagged)] = tile[compact_pad(j)];
    }
    if ((mode & (BANYAN_COMPACT_SINGLE | BANYAN_COMPACT_LOOKUP)) && tile_id == 0 && threadIdx.x == 0)
        count[0] = all_flagged;
}
BANYAN_CUDA_KERNEL(compactScatter);
