/**
 * @file tree_groups.cu
 * @brief Groups of particles that walk the tree together (paper section 2.2; driver: Octree::make_groups in
 *        core/tree/octree.cpp).
 *
 * The CUDA twin of kernels_cl/tree_groups.cl, which gives the rules.
 */
#include "core/device_shared.h"
#include "core/tree_shared.h"

#include "backend_cuda/kernel_registry.hpp"

/// flags[first particle of each group] = 1 (flags must be 0 beforehand). Block BANYAN_WG; no shared memory.
__global__ void __launch_bounds__(BANYAN_WG)
    treeGroupFlags(const bn_u32* __restrict__ cell_parent, const bn_u32* __restrict__ cell_first,
                   const bn_u32* __restrict__ cell_count, const bn_u32* __restrict__ cell_pbegin,
                   const bn_u32* __restrict__ cell_pcount, bn_u32 ncells, bn_u32* __restrict__ flags)
{
    const unsigned c = blockIdx.x * BANYAN_WG + threadIdx.x;
    if (c >= ncells) return;
    const bn_u32 count = cell_pcount[c];
    const bn_u32 first = cell_pbegin[c];
    if (count <= BANYAN_N_CRIT) {
        if (c == 0) {
            flags[first] = 1u;
        } else {
            const bn_u32 p = cell_parent[c];
            if (cell_pcount[p] > BANYAN_N_CRIT && bn_tree_group_begins(cell_first, cell_pcount, p, c))
                flags[first] = 1u;
        }
    } else if (bn_tree_is_leaf(cell_count[c])) {
        for (bn_u32 k = 0; k < count; k += BANYAN_N_CRIT)
            flags[first + k] = 1u;
    }
}
BANYAN_CUDA_KERNEL(treeGroupFlags);

/// For group g < ngroups: its particle count and the componentwise min and max of its positions.
/// Block BANYAN_WG; no shared memory.
__global__ void __launch_bounds__(BANYAN_WG)
    treeGroupBoxes(const bn_f4* __restrict__ pos, const bn_u32* __restrict__ group_first, bn_u32 ngroups, bn_u32 n,
                   bn_u32* __restrict__ group_count, bn_f4* __restrict__ group_lo, bn_f4* __restrict__ group_hi)
{
    const unsigned g = blockIdx.x * BANYAN_WG + threadIdx.x;
    if (g >= ngroups) return;
    const bn_u32 b = group_first[g];
    const bn_u32 e = g + 1 < ngroups ? group_first[g + 1] : n;
    bn_f4 p = pos[b];
    bn_f4 lo = make_float4(p.x, p.y, p.z, 0.0f), hi = lo;
    for (bn_u32 i = b + 1; i < e; ++i) {
        p = pos[i];
        lo.x = fminf(lo.x, p.x), lo.y = fminf(lo.y, p.y), lo.z = fminf(lo.z, p.z);
        hi.x = fmaxf(hi.x, p.x), hi.y = fmaxf(hi.y, p.y), hi.z = fmaxf(hi.z, p.z);
    }
    group_count[g] = e - b;
    group_lo[g] = lo;
    group_hi[g] = hi;
}
BANYAN_CUDA_KERNEL(treeGroupBoxes);
