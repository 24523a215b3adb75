/**
 * @file scan.cu
 * @brief Prefix sums of unsigned 32-bit integers, reduce-then-scan (driver: core/device/primitives.cpp).
 *
 * The CUDA twin of kernels_cl/scan.cl (see there for the passes): same names, arguments, tiles and results. No
 * block waits for another. Block-wide scans use warp shuffles here (local memory in OpenCL); sums wrap modulo 2^32,
 * so the results are identical.
 */
#include "core/device_shared.h"

#include "backend_cuda/kernel_registry.hpp"
#include "kernels_cu/block.cuh"

/// partials[block] = sum (with BANYAN_SCAN_NONZERO: count of nonzero items) of the block's tile of in[0..n).
/// Block BANYAN_WG; striped (coalesced) loads; shared memory BANYAN_WG / 32 words.
__global__ void __launch_bounds__(BANYAN_WG) scanReduce(const bn_u32* in, bn_u32 n, bn_u32* partials, bn_u32 mode)
{
    __shared__ bn_u32 warp_sums[bn_block_warps];
    const unsigned start = blockIdx.x * bn_scan_tile;
    bn_u32 sum = 0;
#pragma unroll
    for (unsigned k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        const unsigned i = start + k * BANYAN_WG + threadIdx.x;
        if (i < n) {
            const bn_u32 x = in[i];
            sum += (mode & BANYAN_SCAN_NONZERO) ? (x != 0 ? 1u : 0u) : x;
        }
    }
    sum = bn_block_sum_u32(sum, warp_sums);
    if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}
BANYAN_CUDA_KERNEL(scanReduce);

/// out = exclusive or inclusive scan of in[0..n) tile by tile, plus offsets[tile] with BANYAN_SCAN_OFFSETS; with
/// BANYAN_SCAN_LOOKUP the tile's offset is the sum of offsets[0..tile) instead, which the block adds up itself (two
/// launches in all while the tile sums fit one tile); with BANYAN_SCAN_TOTAL the last tile's block writes the grand
/// total to total[0]. out may be in (a block reads its whole tile before writing it and touches no other). Each
/// thread scans BANYAN_SCAN_ITEMS consecutive items serially, then the block scans the per-thread totals. Block
/// BANYAN_WG; shared memory: the padded tile and 2 * BANYAN_WG / 32 words.
__global__ void __launch_bounds__(BANYAN_WG)
    scanDownsweep(const bn_u32* in, bn_u32* out, bn_u32 n, const bn_u32* offsets, bn_u32* total, bn_u32 mode)
{
    __shared__ bn_u32 tile[bn_scan_tile_words];
    __shared__ bn_u32 warp_sums[bn_block_warps];
    __shared__ bn_u32 lookup_sums[bn_block_warps];
    // Tiles in reverse order of the first pass, so that the tiles it read last, likely still in L2, are read first.
    const unsigned tile_id = gridDim.x - 1 - blockIdx.x;
    const unsigned start = tile_id * bn_scan_tile;

#pragma unroll
    for (unsigned k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        const unsigned j = k * BANYAN_WG + threadIdx.x;
        tile[bn_tile_pad(j)] = start + j < n ? in[start + j] : 0u;
    }
    __syncthreads();

    bn_u32 x[BANYAN_SCAN_ITEMS];
    bn_u32 mine = 0;
#pragma unroll
    for (unsigned k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        x[k] = tile[bn_tile_pad(threadIdx.x * BANYAN_SCAN_ITEMS + k)];
        mine += x[k];
    }
    bn_u32 tile_total;
    bn_u32 run = bn_block_exclusive_u32(mine, warp_sums, tile_total);
    bn_u32 base = (mode & BANYAN_SCAN_OFFSETS) ? offsets[tile_id] : 0u;
    if (mode & BANYAN_SCAN_LOOKUP) {
        bn_u32 before = 0;
        for (unsigned i = threadIdx.x; i < tile_id; i += BANYAN_WG)
            before += offsets[i];
        base = bn_block_sum_u32(before, lookup_sums); // uniform branch: the whole block takes it
    }
    run += base;
    const bool incl = (mode & BANYAN_SCAN_INCLUSIVE) != 0;
#pragma unroll
    for (unsigned k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        const bn_u32 next = run + x[k];
        tile[bn_tile_pad(threadIdx.x * BANYAN_SCAN_ITEMS + k)] = incl ? next : run; // only this thread's own slots
        run = next;
    }
    __syncthreads();

#pragma unroll
    for (unsigned k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        const unsigned j = k * BANYAN_WG + threadIdx.x;
        if (start + j < n) out[start + j] = tile[bn_tile_pad(j)];
    }
    if ((mode & BANYAN_SCAN_TOTAL) && threadIdx.x == 0 && tile_id == gridDim.x - 1) total[0] = base + tile_total;
}
BANYAN_CUDA_KERNEL(scanDownsweep);
