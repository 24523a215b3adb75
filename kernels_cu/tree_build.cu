/**
 * @file tree_build.cu
 * @brief The cells of the octree from the sorted keys, all levels at once (paper section 2.1, Fig. 1; driver:
 *        Octree::build_cells in core/tree/octree.cpp).
 *
 * The CUDA twin of kernels_cl/tree_build.cl, which describes the steps.
 */
#include "core/device_shared.h"
#include "core/tree_shared.h"

#include "backend_cuda/kernel_registry.hpp"

/// begins[j] = the number of cells that begin at sorted particle j, first_level[j] = the level of the first of
/// them (0 when none); level_count[L] += the cells of level L (zeroed by the host), one atomic per level and block.
/// Block BANYAN_WG; shared memory: BANYAN_TREE_LEVELS words.
__global__ void __launch_bounds__(BANYAN_WG)
    treeCellStarts(const bn_u64* __restrict__ keys, bn_u32 n, bn_u32* __restrict__ begins,
                   bn_u32* __restrict__ first_level, bn_u32* level_count)
{
    __shared__ bn_u32 per_level[BANYAN_TREE_LEVELS];
    const unsigned lid = threadIdx.x, j = blockIdx.x * BANYAN_WG + threadIdx.x;
    if (lid < BANYAN_TREE_LEVELS) per_level[lid] = 0u;
    __syncthreads();
    if (j < n) {
        bn_u32 first = 0u;
        const bn_u32 count = bn_tree_cells_beginning(keys, n, j, &first);
        begins[j] = count;
        first_level[j] = count ? first : 0u;
        for (bn_u32 t = 0; t < count; ++t)
            atomicAdd(&per_level[first + t], 1u);
    }
    __syncthreads();
    if (lid < BANYAN_TREE_LEVELS && per_level[lid] != 0u) bn_atomic_add_u32(&level_count[lid], per_level[lid]);
}
BANYAN_CUDA_KERNEL(treeCellStarts);

/// The cells as (level, first particle) pairs in particle order (see tree_build.cl). Block BANYAN_WG; no shared
/// memory.
__global__ void __launch_bounds__(BANYAN_WG)
    treeCellList(const bn_u32* __restrict__ offsets, const bn_u32* __restrict__ first_level, bn_u32 n, bn_u32 total,
                 bn_u64* __restrict__ cell_levels, bn_u32* __restrict__ cell_starts)
{
    const unsigned j = blockIdx.x * BANYAN_WG + threadIdx.x;
    if (j >= n) return;
    const bn_u32 o = offsets[j];
    const bn_u32 count = (j + 1 < n ? offsets[j + 1] : total) - o;
    for (bn_u32 t = 0; t < count; ++t) {
        cell_levels[o + t] = first_level[j] + t;
        cell_starts[o + t] = j;
    }
}
BANYAN_CUDA_KERNEL(treeCellList);

/// Cell c < total from its (level, first particle), stored level by level (see tree_build.cl). Block BANYAN_WG;
/// no shared memory.
__global__ void __launch_bounds__(BANYAN_WG)
    treeCellWrite(const bn_u64* __restrict__ keys, bn_u32 n, const bn_u64* __restrict__ cell_levels,
                  const bn_u32* __restrict__ cell_starts, bn_u32 total, bn_u64* __restrict__ cell_key,
                  bn_u32* __restrict__ cell_level, bn_u32* __restrict__ cell_first, bn_u32* __restrict__ cell_count,
                  bn_u32* __restrict__ cell_pbegin, bn_u32* __restrict__ cell_pcount)
{
    const unsigned c = blockIdx.x * BANYAN_WG + threadIdx.x;
    if (c >= total) return;
    const int level = static_cast<int>(cell_levels[c]);
    const bn_u32 j = cell_starts[c];
    const bn_u32 count = bn_tree_run_end(keys, j, n, level) - j;
    const bool leaf = count <= BANYAN_N_LEAF || level == BANYAN_MAX_DEPTH;
    cell_key[c] = bn_tree_cell_key(keys[j], level);
    cell_level[c] = static_cast<bn_u32>(level);
    cell_pbegin[c] = j;
    cell_pcount[c] = count;
    cell_first[c] = leaf ? j : 0u;
    cell_count[c] = leaf ? (count | BANYAN_TREE_LEAF_BIT) : 0u;
}
BANYAN_CUDA_KERNEL(treeCellWrite);
