/**
 * @file compact.cu
 * @brief Stream compaction and stable split of unsigned 32-bit items by nonzero flags (driver:
 * core/device/primitives.cpp).
 *
 * The CUDA twin of kernels_cl/compact.cl (see there for the passes). Order is kept on both sides of a split: the
 * tree build relies on it.
 */
#include "core/device_shared.h"

#include "backend_cuda/kernel_registry.hpp"
#include "kernels_cu/block.cuh"

/// Moves the block's tile of in[0..n): items with flags != 0 to out[offsets[block] + rank among the tile's flagged
/// items]; with BANYAN_COMPACT_SPLIT the others to out[count[0] + unflagged items before them]. count[0] (flagged
/// in all) was written by the scan of the tile counts, or, with BANYAN_COMPACT_SINGLE or BANYAN_COMPACT_LOOKUP, is
/// written here. The tile is reordered in shared memory first, so that global reads and writes are coalesced. Block
/// BANYAN_WG; shared memory: the padded tile and 3 * BANYAN_WG / 32 words. out must not alias in or flags.
__global__ void __launch_bounds__(BANYAN_WG)
    compactScatter(const bn_u32* in, const bn_u32* flags, bn_u32 n, const bn_u32* offsets, bn_u32* out, bn_u32* count,
                   bn_u32 mode)
{
    __shared__ bn_u32 tile[bn_scan_tile_words];
    __shared__ bn_u32 warp_sums[bn_block_warps];
    __shared__ bn_u32 before_sums[bn_block_warps], all_sums[bn_block_warps];
    // Tiles in reverse order of the counting pass, so that the tiles it read last, likely still in L2, are read first.
    const unsigned tile_id = gridDim.x - 1 - blockIdx.x;
    const unsigned start = tile_id * bn_scan_tile;
    const unsigned valid = min(bn_scan_tile, n - start);

    // Flags, striped (coalesced), as 0/1 into the tile; the values are loaded now so their latency overlaps.
    bn_u32 v[BANYAN_SCAN_ITEMS];
#pragma unroll
    for (unsigned k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        const unsigned j = k * BANYAN_WG + threadIdx.x;
        const bool ok = j < valid;
        tile[bn_tile_pad(j)] = ok && flags[start + j] != 0 ? 1u : 0u;
        v[k] = ok ? in[start + j] : 0u;
    }
    __syncthreads();

    // Blocked: each thread ranks its consecutive items, then the block scans the per-thread counts.
    bn_u32 f[BANYAN_SCAN_ITEMS];
    bn_u32 mine = 0;
#pragma unroll
    for (unsigned k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        f[k] = tile[bn_tile_pad(threadIdx.x * BANYAN_SCAN_ITEMS + k)];
        mine += f[k];
    }
    bn_u32 flagged; // flagged items in this tile
    bn_u32 before = bn_block_exclusive_u32(mine, warp_sums, flagged);
#pragma unroll
    for (unsigned k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        const unsigned j = threadIdx.x * BANYAN_SCAN_ITEMS + k;
        // Destination within the tile: flagged items first, then the others, order kept in both.
        tile[bn_tile_pad(j)] = f[k] ? before : flagged + j - before;
        before += f[k];
    }
    __syncthreads();

    // Striped again: read each item's destination, then place the item there.
    unsigned dest[BANYAN_SCAN_ITEMS];
#pragma unroll
    for (unsigned k = 0; k < BANYAN_SCAN_ITEMS; ++k)
        dest[k] = tile[bn_tile_pad(k * BANYAN_WG + threadIdx.x)];
    __syncthreads();
#pragma unroll
    for (unsigned k = 0; k < BANYAN_SCAN_ITEMS; ++k)
        if (k * BANYAN_WG + threadIdx.x < valid) tile[bn_tile_pad(dest[k])] = v[k];
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
        flagged_before = bn_block_sum_u32(b, before_sums);
        all_flagged = bn_block_sum_u32(a, all_sums);
    } else {
        flagged_before = offsets[tile_id];
        all_flagged = (mode & BANYAN_COMPACT_SPLIT) ? count[0] : 0u;
    }
    const bn_u32 unflagged_at = all_flagged + (start - flagged_before);
    const unsigned limit = (mode & BANYAN_COMPACT_SPLIT) ? valid : flagged;
#pragma unroll
    for (unsigned k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        const unsigned j = k * BANYAN_WG + threadIdx.x;
        if (j < limit) out[j < flagged ? flagged_before + j : unflagged_at + (j - flagged)] = tile[bn_tile_pad(j)];
    }
    if ((mode & (BANYAN_COMPACT_SINGLE | BANYAN_COMPACT_LOOKUP)) && tile_id == 0 && threadIdx.x == 0)
        count[0] = all_flagged;
}
BANYAN_CUDA_KERNEL(compactScatter);
