/**
 * @file parallel.cu
 * @brief The kernels of runs over several ranks (drivers: core/parallel/): which particles stay in this rank's
 *        key range, and the local essential tree of this rank's octree for another rank. Same kernels as
 *        kernels_cl/parallel.cl.
 */
#include "backend_cuda/kernel_registry.hpp"
#include "core/device_shared.h"
#include "core/tree_shared.h"

/* stay[i] = 1 when lo <= keys[i] < hi (this rank's range of the space-filling curve), else 0. Block BANYAN_WG. */
__global__ void __launch_bounds__(BANYAN_WG)
    domainStay(const bn_u64* keys, bn_u32 n, bn_u64 lo, bn_u64 hi, bn_u32* stay)
{
    const bn_u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) stay[i] = keys[i] >= lo && keys[i] < hi ? 1u : 0u;
}
BANYAN_CUDA_KERNEL(domainStay);

/* The bounding boxes of nboxes runs of consecutive groups (groups [runs[2b], runs[2b + 1]) for block b):
 * boxes[2b] = componentwise min of group_lo, boxes[2b + 1] = max of group_hi. Launched with exactly nboxes
 * blocks of BANYAN_WG; shared memory 2 BANYAN_WG float4. An empty run gives lo > hi, which opens nothing. */
__global__ void __launch_bounds__(BANYAN_WG)
    letGroupBoxes(const bn_f4* group_lo, const bn_f4* group_hi, const bn_u32* group_first, const bn_u32* group_count,
                  const bn_u32* runs, bn_u32 nboxes, const bn_f4* acc_old, bn_u32 with_acc, bn_f4* boxes)
{
    __shared__ bn_f4 smin[BANYAN_WG];
    __shared__ bn_f4 smax[BANYAN_WG];
    const bn_u32 b = blockIdx.x, lid = threadIdx.x;
    const bn_u32 first = runs[2 * b], last = runs[2 * b + 1];
    const float inf = __int_as_float(0x7f800000);
    bn_f4 lo = make_float4(inf, inf, inf, inf), hi = make_float4(-inf, -inf, -inf, -inf); /* as reduceBounds */
    for (bn_u32 g = first + lid; g < last; g += BANYAN_WG) {
        const bn_f4 l = group_lo[g], h = group_hi[g];
        lo = make_float4(fminf(lo.x, l.x), fminf(lo.y, l.y), fminf(lo.z, l.z), fminf(lo.w, l.w));
        hi = make_float4(fmaxf(hi.x, h.x), fmaxf(hi.y, h.y), fmaxf(hi.z, h.z), fmaxf(hi.w, h.w));
    }
    if (with_acc) { /* the relative criterion: the run's smallest previous |a| (see parallel.cl) */
        float a = inf;
        const bn_u32 end = last > first ? group_first[last - 1] + group_count[last - 1] : 0u;
        for (bn_u32 i = (last > first ? group_first[first] : 0u) + lid; i < end; i += BANYAN_WG)
            a = fminf(a, acc_old[i].w);
        lo.w = a;
    }
    smin[lid] = lo;
    smax[lid] = hi;
    /* The tree of BN_BLOCK_TREE_BOUNDS (kernels_cu/block.cuh) written out, since this one loads both pairs before
     * it stores and the helper, in reduce.cu's order, does not: sharing it would change this kernel's code. */
    __syncthreads();
    for (bn_u32 stride = BANYAN_WG / 2; stride > 0; stride >>= 1) {
        if (lid < stride) {
            const bn_f4 a = smin[lid], c = smin[lid + stride], d = smax[lid], e = smax[lid + stride];
            smin[lid] = make_float4(fminf(a.x, c.x), fminf(a.y, c.y), fminf(a.z, c.z), fminf(a.w, c.w));
            smax[lid] = make_float4(fmaxf(d.x, e.x), fmaxf(d.y, e.y), fmaxf(d.z, e.z), fmaxf(d.w, e.w));
        }
        __syncthreads();
    }
    if (lid == 0) {
        boxes[2 * b] = smin[0];
        boxes[2 * b + 1] = smax[0];
    }
}
BANYAN_CUDA_KERNEL(letGroupBoxes);

/* The runs of groups of the chosen cells (let.hpp), in place: cell i, given as (first particle, particles) in
 * runs[2i], runs[2i + 1], becomes the groups it holds, [lower_bound(group_first, first), lower_bound(group_first,
 * first + particles)), found by bisection over the ngroups first particles (ascending). On the device, so that the
 * groups' first particles never come to the host. Block BANYAN_WG. */
__global__ void __launch_bounds__(BANYAN_WG)
    letBoxRuns(const bn_u32* group_first, bn_u32 ngroups, bn_u32 ncells, bn_u32* runs)
{
    const bn_u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= ncells) return;
    const bn_u32 first = runs[2 * i], end = first + runs[2 * i + 1];
    runs[2 * i] = bn_lower_bound_u32(group_first, ngroups, first);
    runs[2 * i + 1] = bn_lower_bound_u32(group_first, ngroups, end);
}
BANYAN_CUDA_KERNEL(letBoxRuns);

/* The boxes the other ranks see (let.hpp), chosen one level of cells at a time from the root: cell c is chosen when
 * no ancestor is and it holds at most `limit` particles or is a leaf; chosen cells are appended (first particle,
 * particles) to list at an atomic count (order arbitrary: the caller sorts), covered[c] = 1 when c or an ancestor is
 * chosen. Entries beyond list_cap are counted, not written. Block BANYAN_WG. */
__global__ void __launch_bounds__(BANYAN_WG)
    letBoxCells(const bn_u32* cell_pbegin, const bn_u32* cell_pcount, const bn_u32* cell_count,
                const bn_u32* cell_parent, bn_u32 first_cell, bn_u32 end_cell, bn_u32 limit, bn_u32* covered,
                bn_u32* list_count, bn_u32* list, bn_u32 list_cap)
{
    const bn_u32 c = first_cell + blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= end_cell) return;
    const bn_u32 p = cell_parent[c];
    bn_u32 cov = 1u;
    if (p == BANYAN_TREE_NO_PARENT || !covered[p]) {
        const bn_u32 n = cell_pcount[c];
        if (n <= limit || bn_tree_is_leaf(cell_count[c])) {
            const bn_u32 slot = bn_atomic_add_u32(list_count, 1u);
            if (slot < list_cap) {
                list[2 * slot] = cell_pbegin[c];
                list[2 * slot + 1] = n;
            }
        } else {
            cov = 0u;
        }
    }
    covered[c] = cov;
}
BANYAN_CUDA_KERNEL(letBoxCells);

/* For the cells [first_cell, end_cell) of one level, launched level by level from the root: opened[c] = 1 when c's
 * parent is opened (the root has none) and some group inside one of the other rank's boxes may open c
 * (bn_let_opens); cells under a closed cell are not tested at all. Coarse box k (coarse[2k], coarse[2k + 1]) holds
 * the fine boxes [fine_begin[k], fine_begin[k + 1]), tested only when the coarse one fails (a fine box lies inside
 * its coarse box, so no test is skipped that could fail). Block BANYAN_WG. */
__global__ void __launch_bounds__(BANYAN_WG)
    letOpened(const bn_f4* cell_com, const bn_f4* cell_quad1, const bn_u32* cell_parent, bn_u32 first_cell,
              bn_u32 end_cell, float inv_theta, float alpha, const bn_f4* coarse, bn_u32 ncoarse, const bn_f4* fine,
              const bn_u32* fine_begin, bn_u32* opened)
{
    const bn_u32 c = first_cell + blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= end_cell) return;
    const bn_u32 p = cell_parent[c];
    bn_u32 open = 0u;
    if (p == BANYAN_TREE_NO_PARENT || opened[p]) {
        const bn_f4 com = cell_com[c];
        const bn_f4 q1 = cell_quad1[c];
        const float rel = alpha > 0.0f ? bn_rel_cell(com.w, q1.w) : 0.0f;
        for (bn_u32 k = 0; k < ncoarse && !open; ++k) {
            if (!bn_let_opens(com, q1, inv_theta, rel, alpha, coarse[2 * k], coarse[2 * k + 1])) continue;
            const bn_u32 end = fine_begin[k + 1];
            for (bn_u32 f = fine_begin[k]; f < end && !open; ++f)
                open = bn_let_opens(com, q1, inv_theta, rel, alpha, fine[2 * f], fine[2 * f + 1]) ? 1u : 0u;
        }
    }
    opened[c] = open;
}
BANYAN_CUDA_KERNEL(letOpened);

/* keep[c] = 1 when c's parent is opened (then every ancestor is; the root is always kept); send[c] = the particles
 * cell c sends: its count when it is an opened leaf, else 0. Block BANYAN_WG. */
__global__ void __launch_bounds__(BANYAN_WG) letSelect(const bn_u32* cell_parent, const bn_u32* cell_count,
                                                       const bn_u32* opened, bn_u32 ncells, bn_u32* keep, bn_u32* send)
{
    const bn_u32 c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= ncells) return;
    const bn_u32 p = cell_parent[c];
    const bn_u32 cnt = cell_count[c];
    keep[c] = p == BANYAN_TREE_NO_PARENT || opened[p] ? 1u : 0u;
    send[c] = opened[c] && bn_tree_is_leaf(cnt) ? bn_tree_count(cnt) : 0u;
}
BANYAN_CUDA_KERNEL(letSelect);

/* The top tree this rank sends with its boxes (let.hpp), for the cells [first_cell, end_cell) of one level,
 * launched level by level from the root: opened[c] = 1 when c's parent is opened (the root has none) and c holds
 * more than `limit` particles or its opening radius (bn_open_radius, as bn_let_opens) exceeds r_max, for
 * letSelect and letGather. Block BANYAN_WG. */
__global__ void __launch_bounds__(BANYAN_WG)
    letTopOpened(const bn_u32* cell_pcount, const bn_f4* cell_quad1, const bn_u32* cell_parent, bn_u32 first_cell,
                 bn_u32 end_cell, bn_u32 limit, float inv_theta, float r_max, bn_u32* opened)
{
    const bn_u32 c = first_cell + blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= end_cell) return;
    const bn_u32 p = cell_parent[c];
    const bn_f4 q1 = cell_quad1[c];
    // Both tests evaluated (|, not ||): the code nvcc made of the radius spelt out here; with || it branches.
    opened[c] = (p == BANYAN_TREE_NO_PARENT || opened[p]) &&
                        ((cell_pcount[c] > limit) | (bn_open_radius(q1, inv_theta) > r_max))
                    ? 1u
                    : 0u;
}
BANYAN_CUDA_KERNEL(letTopOpened);

/* Which groups may walk before the other ranks' trees arrive (let.hpp): box b in [first_box, end_box) of this
 * rank's boxes (boxes[2b], boxes[2b + 1], the lower corner's w the smallest previous |a|) is far when no group in
 * it may open (bn_let_opens, as letOpened tests) any cell in [top_begin, top_end) of the grafted arrays that was
 * sent as a leaf without particles (count == the leaf bit alone): the top trees' cells whose children stayed
 * home. Its groups [runs[2b], runs[2b + 1]) get far = 1 and near = 0 when it is far, else far = 0 and near = 1.
 * Block BANYAN_WG. */
__global__ void __launch_bounds__(BANYAN_WG)
    letFarGroups(const bn_f4* boxes, const bn_u32* runs, bn_u32 first_box, bn_u32 end_box, const bn_f4* cell_com,
                 const bn_f4* cell_quad1, const bn_u32* cell_count, bn_u32 top_begin, bn_u32 top_end, float inv_theta,
                 float alpha, bn_u32* far, bn_u32* near)
{
    const bn_u32 b = first_box + blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= end_box) return;
    const bn_f4 lo = boxes[2 * b], hi = boxes[2 * b + 1];
    bn_u32 is_far = 1u;
    for (bn_u32 c = top_begin; c < top_end && is_far; ++c) {
        if (cell_count[c] != BANYAN_TREE_LEAF_BIT) continue;
        const bn_f4 com = cell_com[c];
        const bn_f4 q1 = cell_quad1[c];
        const float rel = alpha > 0.0f ? bn_rel_cell(com.w, q1.w) : 0.0f;
        if (bn_let_opens(com, q1, inv_theta, rel, alpha, lo, hi)) is_far = 0u;
    }
    for (bn_u32 g = runs[2 * b]; g < runs[2 * b + 1]; ++g) {
        far[g] = is_far;
        near[g] = 1u - is_far;
    }
}
BANYAN_CUDA_KERNEL(letFarGroups);

/* The local essential tree: kept cell c goes to index cell_index[c] (exclusive scan of keep) with its multipoles;
 * its link becomes (cell_index[first child], children) for an opened node, (particle_index[c], LEAF | count) for
 * an opened leaf, whose particles go to out_pos from particle_index[c] on (exclusive scan of send), and
 * (0, LEAF | 0) for a cell that is not opened. Block BANYAN_WG. */
__global__ void __launch_bounds__(BANYAN_WG)
    letGather(const bn_f4* cell_com, const bn_f4* cell_quad0, const bn_f4* cell_quad1, const bn_u32* cell_first,
              const bn_u32* cell_count, const bn_f4* pos, const bn_u32* opened, const bn_u32* keep,
              const bn_u32* cell_index, const bn_u32* particle_index, bn_u32 ncells, bn_f4* out_com, bn_f4* out_quad0,
              bn_f4* out_quad1, bn_u32* out_first, bn_u32* out_count, bn_f4* out_pos)
{
    const bn_u32 c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= ncells || !keep[c]) return;
    const bn_u32 k = cell_index[c];
    out_com[k] = cell_com[c];
    out_quad0[k] = cell_quad0[c];
    out_quad1[k] = cell_quad1[c];
    const bn_u32 cnt = cell_count[c], first = cell_first[c];
    bn_u32 f = 0u, n = BANYAN_TREE_LEAF_BIT;
    if (opened[c] && bn_tree_is_leaf(cnt)) {
        f = particle_index[c];
        n = cnt;
        for (bn_u32 j = 0; j < bn_tree_count(cnt); ++j)
            out_pos[f + j] = pos[first + j];
    } else if (opened[c]) {
        f = cell_index[first];
        n = cnt;
    }
    out_first[k] = f;
    out_count[k] = n;
}
BANYAN_CUDA_KERNEL(letGather);

/* A received tree grafted at cells [first_cell, end_cell): the links it came with count from its own root and first
 * particle; first[c] moves by particle_shift for a leaf (a particle index) and by cell_shift for a node (its first
 * child's cell index). The host's loop in LetExchange::upload_tree does the same for trees that came through host
 * memory. Block BANYAN_WG. */
__global__ void __launch_bounds__(BANYAN_WG)
    letShiftLinks(bn_u32* cell_first, const bn_u32* cell_count, bn_u32 first_cell, bn_u32 end_cell, bn_u32 cell_shift,
                  bn_u32 particle_shift)
{
    const bn_u32 c = first_cell + blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= end_cell) return;
    cell_first[c] += bn_tree_is_leaf(cell_count[c]) ? particle_shift : cell_shift;
}
BANYAN_CUDA_KERNEL(letShiftLinks);
