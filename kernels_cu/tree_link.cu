/**
 * @file tree_link.cu
 * @brief Links the cells (paper section 2.1, Fig. 2; driver: Octree::link_cells in core/tree/octree.cpp).
 *
 * The CUDA twin of kernels_cl/tree_link.cl: parent and first child by binary search within the neighbouring
 * levels, child counts by atomic adds (whose sum does not depend on their order).
 */
#include "core/device_shared.h"
#include "core/tree_shared.h"

#include "backend_cuda/kernel_registry.hpp"

namespace {

/// Index of the first cell in [lo, hi) whose key is >= key (hi when none).
__device__ __forceinline__ bn_u32 tree_lower_bound(const bn_u64* __restrict__ cell_key, bn_u32 lo, bn_u32 hi,
                                                   bn_u64 key)
{
    while (lo < hi) {
        const bn_u32 mid = lo + (hi - lo) / 2;
        if (cell_key[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

} // namespace

/// For cell c < ncells: cell_parent[c], cell_count[parent] += 1 (atomic), and for a node cell_first[c] = its
/// first child. Block BANYAN_WG; no shared memory.
__global__ void __launch_bounds__(BANYAN_WG)
    treeLink(const bn_u64* __restrict__ cell_key, const bn_u32* __restrict__ cell_level,
             const bn_u32* __restrict__ cell_pcount, const bn_u32* __restrict__ level_count, bn_u32 ncells,
             bn_u32* __restrict__ cell_first, bn_u32* cell_count, bn_u32* __restrict__ cell_parent)
{
    const unsigned c = blockIdx.x * BANYAN_WG + threadIdx.x;
    if (c >= ncells) return;
    const int level = static_cast<int>(cell_level[c]);
    const bn_u64 key = cell_key[c];
    bn_u32 begin[4]; /* levels level - 1 .. level + 2 */
    bn_tree_level_begins(level_count, level, begin);
    if (level == 0) {
        cell_parent[c] = BANYAN_TREE_NO_PARENT;
    } else {
        const bn_u32 p = tree_lower_bound(cell_key, begin[0], begin[1], bn_tree_cell_key(key, level - 1));
        cell_parent[c] = p;
        bn_atomic_add_u32(&cell_count[p], 1u);
    }
    const bool leaf = cell_pcount[c] <= BANYAN_N_LEAF || level == BANYAN_MAX_DEPTH;
    if (!leaf) cell_first[c] = tree_lower_bound(cell_key, begin[2], begin[3], key);
}
BANYAN_CUDA_KERNEL(treeLink);
