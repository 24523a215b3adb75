/**
 * @file tree_build.cu
 * @brief One level of the level-by-level tree construction (paper section 2.1, Fig. 1; driver:
 *        Octree::build_levels in core/tree/octree.cpp).
 *
 * The CUDA twin of kernels_cl/tree_build.cl, which describes the steps and the retired entries of the list.
 */
#include "core/device_shared.h"

#include "backend_cuda/kernel_registry.hpp"

namespace {

/// Whether list entry j is a live particle of the cell whose masked key is @p cell.
__device__ __forceinline__ bool tree_in_cell(const bn_u64* __restrict__ keys, const bn_u32* active, bn_u32 j,
                                             bn_u32 shift, bn_u64 cell)
{
    const bn_u32 a = active[j];
    return !(a & BANYAN_TREE_RETIRED_BIT) && (keys[a] >> shift) == cell;
}

/// Sum of v over the block; every thread must call it; the result is valid in thread 0.
/// warp_sums: BANYAN_WG / 32 words of shared memory.
__device__ __forceinline__ bn_u32 tree_block_sum(bn_u32 v, bn_u32* warp_sums)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
    __syncthreads();
    bn_u32 sum = 0;
    if (threadIdx.x == 0)
        for (int w = 0; w < BANYAN_WG / 32; ++w) sum += warp_sums[w];
    __syncthreads();
    return sum;
}

} // namespace

/// flags[j] = 1 where live entry j starts a cell (its key >> shift differs from entry j - 1's, or entry j - 1 is
/// retired, or j = 0); retired entries get 0. Thread 0 zeroes counters[1] and counters[2].
/// Block BANYAN_WG; no shared memory.
__global__ void __launch_bounds__(BANYAN_WG) treeLevelFlags(const bn_u64* __restrict__ keys,
                                                            const bn_u32* __restrict__ active, bn_u32 n,
                                                            bn_u32 shift, bn_u32* __restrict__ flags,
                                                            bn_u32* __restrict__ counters)
{
    const unsigned j = blockIdx.x * BANYAN_WG + threadIdx.x;
    if (j == 0) {
        counters[1] = 0;
        counters[2] = 0;
    }
    if (j >= n) return;
    const bn_u32 a = active[j];
    bn_u32 start = 0;
    if (!(a & BANYAN_TREE_RETIRED_BIT)) {
        start = 1;
        if (j > 0) {
            const bn_u32 b = active[j - 1];
            start = (b & BANYAN_TREE_RETIRED_BIT) || (keys[b] >> shift) != (keys[a] >> shift) ? 1u : 0u;
        }
    }
    flags[j] = start;
}
BANYAN_CUDA_KERNEL(treeLevelFlags);

/// Writes nothing when offset + counters[0] > capacity (every thread returns: the host grows the arrays and runs
/// the level again). Otherwise writes cell c < counters[0] of the level at offset + c, its end found by a galloping search when the list
/// holds retired entries; a leaf above the deepest level marks its entries retired; counters[1] += particles
/// taken by leaves, counters[2] += leaves, one atomic each per block (see tree_build.cl).
/// Block BANYAN_WG; shared memory: BANYAN_WG / 32 words.
__global__ void __launch_bounds__(BANYAN_WG) treeLevelCells(
    const bn_u64* __restrict__ keys, bn_u32* active, const bn_u32* __restrict__ starts, bn_u32 n, bn_u32 clean,
    bn_u32* counters, bn_u32 level, bn_u32 offset, bn_u64* __restrict__ cell_key, bn_u32* __restrict__ cell_level,
    bn_u32* __restrict__ cell_first, bn_u32* __restrict__ cell_count, bn_u32* __restrict__ cell_pbegin,
    bn_u32* __restrict__ cell_pcount, bn_u32 capacity)
{
    __shared__ bn_u32 warp_sums[BANYAN_WG / 32];
    const unsigned c = blockIdx.x * BANYAN_WG + threadIdx.x;
    const bn_u32 cells = counters[0];
    // The level does not fit the cell arrays: write nothing (the host grows them and runs the level again).
    if (cells > capacity - offset) return;
    bn_u32 retired = 0, leaves = 0;
    if (c < cells) {
        const bn_u32 j0 = starts[c];
        const bn_u32 upper = c + 1 < cells ? starts[c + 1] : n;
        const bn_u32 first = active[j0];
        const bn_u32 shift = 3u * (BANYAN_MAX_DEPTH - level);
        bn_u32 end = upper;
        if (!clean) {
            const bn_u64 cell = keys[first] >> shift;
            bn_u32 lo = j0 + 1, hi = upper, step = 1;
            while (lo < hi) {
                const bn_u32 probe = min(lo + step - 1, hi - 1);
                if (!tree_in_cell(keys, active, probe, shift, cell)) {
                    hi = probe;
                    break;
                }
                lo = probe + 1;
                step <<= 1;
            }
            while (lo < hi) {
                const bn_u32 mid = lo + (hi - lo) / 2;
                if (tree_in_cell(keys, active, mid, shift, cell)) lo = mid + 1;
                else hi = mid;
            }
            end = lo;
        }
        const bn_u32 count = end - j0;
        const bool leaf = count <= BANYAN_N_LEAF || level == BANYAN_MAX_DEPTH;
        const unsigned o = offset + c;
        cell_key[o] = bn_tree_cell_key(keys[first], static_cast<int>(level));
        cell_level[o] = level;
        cell_pbegin[o] = first;
        cell_pcount[o] = count;
        cell_first[o] = leaf ? first : 0u;
        cell_count[o] = leaf ? (count | BANYAN_TREE_LEAF_BIT) : 0u;
        if (leaf) {
            retired = count;
            leaves = 1;
            if (level < BANYAN_MAX_DEPTH)
                for (bn_u32 k = 0; k < count; ++k) active[j0 + k] = (first + k) | BANYAN_TREE_RETIRED_BIT;
        }
    }
    const bn_u32 sum = tree_block_sum(retired, warp_sums);
    const bn_u32 nleaves = tree_block_sum(leaves, warp_sums);
    if (threadIdx.x == 0 && sum != 0) {
        bn_atomic_add_u32(&counters[1], sum);
        bn_atomic_add_u32(&counters[2], nleaves);
    }
}
BANYAN_CUDA_KERNEL(treeLevelCells);

/// live[j] = 1 for a live entry, 0 for a retired one. Block BANYAN_WG; no shared memory.
__global__ void __launch_bounds__(BANYAN_WG) treeLevelLive(const bn_u32* __restrict__ active, bn_u32 n,
                                                           bn_u32* __restrict__ live)
{
    const unsigned j = blockIdx.x * BANYAN_WG + threadIdx.x;
    if (j < n) live[j] = (active[j] & BANYAN_TREE_RETIRED_BIT) ? 0u : 1u;
}
BANYAN_CUDA_KERNEL(treeLevelLive);
