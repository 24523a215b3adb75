/**
 * @file parallel.cl
 * @brief The kernels of runs over several ranks (drivers: core/parallel/): which particles stay in this rank's
 *        key range, and the local essential tree of this rank's octree for another rank. Same kernels as
 *        kernels_cu/parallel.cu.
 */

/* stay[i] = 1 when lo <= keys[i] < hi (this rank's range of the space-filling curve), else 0. Work-group
 * BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void domainStay(__global const bn_u64* keys,
                                                                               bn_u32 n, bn_u64 lo, bn_u64 hi,
                                                                               __global bn_u32* stay)
{
    const uint i = get_global_id(0);
    if (i < n) stay[i] = keys[i] >= lo && keys[i] < hi ? 1u : 0u;
}

/* The bounding boxes of nboxes runs of consecutive groups (groups [runs[2b], runs[2b + 1]) for work-group b):
 * boxes[2b] = componentwise min of group_lo, boxes[2b + 1] = max of group_hi. With with_acc != 0 (the relative
 * criterion) boxes[2b].w is the smallest previous |a| (acc_old[i].w, tree order) of the run's particles, which
 * bn_let_opens reads; else it is 0 and acc_old is not read. Launched with exactly nboxes work-groups of BANYAN_WG;
 * local memory 2 BANYAN_WG float4. An empty run gives lo > hi, which opens nothing. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void letGroupBoxes(
    __global const bn_f4* group_lo, __global const bn_f4* group_hi, __global const bn_u32* group_first,
    __global const bn_u32* group_count, __global const bn_u32* runs, bn_u32 nboxes, __global const bn_f4* acc_old,
    bn_u32 with_acc, __global bn_f4* boxes)
{
    __local bn_f4 smin[BANYAN_WG];
    __local bn_f4 smax[BANYAN_WG];
    const uint b = get_group_id(0), lid = get_local_id(0);
    const uint first = runs[2 * b], last = runs[2 * b + 1];
    bn_f4 lo = (bn_f4)(INFINITY), hi = (bn_f4)(-INFINITY); /* as reduceBounds */
    for (uint g = first + lid; g < last; g += BANYAN_WG) {
        lo = fmin(lo, group_lo[g]);
        hi = fmax(hi, group_hi[g]);
    }
    if (with_acc) {
        float a = INFINITY;
        const uint end = last > first ? group_first[last - 1] + group_count[last - 1] : 0u;
        for (uint i = (last > first ? group_first[first] : 0u) + lid; i < end; i += BANYAN_WG) a = fmin(a, acc_old[i].w);
        lo.w = a;
    }
    smin[lid] = lo;
    smax[lid] = hi;
    BN_BLOCK_TREE_BOUNDS(smin, smax, lid);
    if (lid == 0) {
        boxes[2 * b] = smin[0];
        boxes[2 * b + 1] = smax[0];
    }
}

/* The runs of groups of the chosen cells (let.hpp), in place: cell i, given as (first particle, particles) in
 * runs[2i], runs[2i + 1], becomes the groups it holds, [lower_bound(group_first, first), lower_bound(group_first,
 * first + particles)), found by bisection over the ngroups first particles (ascending). On the device, so that the
 * groups' first particles never come to the host. Work-group BANYAN_WG. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void letBoxRuns(__global const bn_u32* group_first,
                                                                               bn_u32 ngroups, bn_u32 ncells,
                                                                               __global bn_u32* runs)
{
    const uint i = get_global_id(0);
    if (i >= ncells) return;
    const bn_u32 first = runs[2 * i], end = first + runs[2 * i + 1];
    runs[2 * i] = bn_lower_bound_u32(group_first, ngroups, first);
    runs[2 * i + 1] = bn_lower_bound_u32(group_first, ngroups, end);
}

/* The boxes the other ranks see (let.hpp), chosen one level of cells at a time from the root: cell c is chosen when
 * no ancestor is and it holds at most `limit` particles or is a leaf; chosen cells are appended (first particle,
 * particles) to list at an atomic count (order arbitrary: the caller sorts), covered[c] = 1 when c or an ancestor is
 * chosen. Entries beyond list_cap are counted, not written. Work-group BANYAN_WG. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void letBoxCells(
    __global const bn_u32* cell_pbegin, __global const bn_u32* cell_pcount, __global const bn_u32* cell_count,
    __global const bn_u32* cell_parent, bn_u32 first_cell, bn_u32 end_cell, bn_u32 limit, __global bn_u32* covered,
    __global bn_u32* list_count, __global bn_u32* list, bn_u32 list_cap)
{
    const uint c = first_cell + get_global_id(0);
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

/* For the cells [first_cell, end_cell) of one level, launched level by level from the root: opened[c] = 1 when c's
 * parent is opened (the root has none) and some group inside one of the other rank's boxes may open c
 * (bn_let_opens); cells under a closed cell are not tested at all. Coarse box k (coarse[2k], coarse[2k + 1]) holds
 * the fine boxes [fine_begin[k], fine_begin[k + 1]), tested only when the coarse one fails (a fine box lies inside
 * its coarse box, so no test is skipped that could fail). Work-group BANYAN_WG. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void letOpened(
    __global const bn_f4* cell_com, __global const bn_f4* cell_quad1, __global const bn_u32* cell_parent,
    bn_u32 first_cell, bn_u32 end_cell, float inv_theta, float alpha, __global const bn_f4* coarse, bn_u32 ncoarse,
    __global const bn_f4* fine, __global const bn_u32* fine_begin, __global bn_u32* opened)
{
    const uint c = first_cell + get_global_id(0);
    if (c >= end_cell) return;
    const bn_u32 p = cell_parent[c];
    bn_u32 open = 0u;
    if (p == BANYAN_TREE_NO_PARENT || opened[p]) {
        const bn_f4 com = cell_com[c];
        const bn_f4 q1 = cell_quad1[c];
        const float rel = alpha > 0.0f ? bn_rel_cell(com.w, q1.w) : 0.0f;
        for (uint k = 0; k < ncoarse && !open; ++k) {
            if (!bn_let_opens(com, q1, inv_theta, rel, alpha, coarse[2 * k], coarse[2 * k + 1])) continue;
            const uint end = fine_begin[k + 1];
            for (uint f = fine_begin[k]; f < end && !open; ++f)
                open = bn_let_opens(com, q1, inv_theta, rel, alpha, fine[2 * f], fine[2 * f + 1]) ? 1u : 0u;
        }
    }
    opened[c] = open;
}

/* keep[c] = 1 when c's parent is opened (then every ancestor is; the root is always kept); send[c] = the particles
 * cell c sends: its count when it is an opened leaf, else 0. Work-group BANYAN_WG. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void letSelect(__global const bn_u32* cell_parent,
                                                                              __global const bn_u32* cell_count,
                                                                              __global const bn_u32* opened,
                                                                              bn_u32 ncells, __global bn_u32* keep,
                                                                              __global bn_u32* send)
{
    const uint c = get_global_id(0);
    if (c >= ncells) return;
    const bn_u32 p = cell_parent[c];
    const bn_u32 cnt = cell_count[c];
    keep[c] = p == BANYAN_TREE_NO_PARENT || opened[p] ? 1u : 0u;
    send[c] = opened[c] && bn_tree_is_leaf(cnt) ? bn_tree_count(cnt) : 0u;
}

/* The top tree this rank sends with its boxes (let.hpp), for the cells [first_cell, end_cell) of one level,
 * launched level by level from the root: opened[c] = 1 when c's parent is opened (the root has none) and c holds
 * more than `limit` particles or its opening radius (bn_open_radius, as bn_let_opens) exceeds r_max, for
 * letSelect and letGather. Work-group BANYAN_WG. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void letTopOpened(
    __global const bn_u32* cell_pcount, __global const bn_f4* cell_quad1, __global const bn_u32* cell_parent,
    bn_u32 first_cell, bn_u32 end_cell, bn_u32 limit, float inv_theta, float r_max, __global bn_u32* opened)
{
    const uint c = first_cell + get_global_id(0);
    if (c >= end_cell) return;
    const bn_u32 p = cell_parent[c];
    const bn_f4 q1 = cell_quad1[c];
    opened[c] =
        (p == BANYAN_TREE_NO_PARENT || opened[p]) && (cell_pcount[c] > limit || bn_open_radius(q1, inv_theta) > r_max)
            ? 1u
            : 0u;
}

/* Which groups may walk before the other ranks' trees arrive (let.hpp): box b in [first_box, end_box) of this
 * rank's boxes (boxes[2b], boxes[2b + 1], the lower corner's w the smallest previous |a|) is far when no group in
 * it may open (bn_let_opens, as letOpened tests) any cell in [top_begin, top_end) of the grafted arrays that was
 * sent as a leaf without particles (count == the leaf bit alone): the top trees' cells whose children stayed
 * home. Its groups [runs[2b], runs[2b + 1]) get far = 1 and near = 0 when it is far, else far = 0 and near = 1.
 * Work-group BANYAN_WG. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void letFarGroups(
    __global const bn_f4* boxes, __global const bn_u32* runs, bn_u32 first_box, bn_u32 end_box,
    __global const bn_f4* cell_com, __global const bn_f4* cell_quad1, __global const bn_u32* cell_count,
    bn_u32 top_begin, bn_u32 top_end, float inv_theta, float alpha, __global bn_u32* far, __global bn_u32* near)
{
    const uint b = first_box + get_global_id(0);
    if (b >= end_box) return;
    const bn_f4 lo = boxes[2 * b], hi = boxes[2 * b + 1];
    bn_u32 is_far = 1u;
    for (uint c = top_begin; c < top_end && is_far; ++c) {
        if (cell_count[c] != BANYAN_TREE_LEAF_BIT) continue;
        const bn_f4 com = cell_com[c];
        const bn_f4 q1 = cell_quad1[c];
        const float rel = alpha > 0.0f ? bn_rel_cell(com.w, q1.w) : 0.0f;
        if (bn_let_opens(com, q1, inv_theta, rel, alpha, lo, hi)) is_far = 0u;
    }
    for (uint g = runs[2 * b]; g < runs[2 * b + 1]; ++g) {
        far[g] = is_far;
        near[g] = 1u - is_far;
    }
}

/* The local essential tree: kept cell c goes to index cell_index[c] (exclusive scan of keep) with its multipoles;
 * its link becomes (cell_index[first child], children) for an opened node, (particle_index[c], LEAF | count) for
 * an opened leaf, whose particles go to out_pos from particle_index[c] on (exclusive scan of send), and
 * (0, LEAF | 0) for a cell that is not opened. Work-group BANYAN_WG. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void letGather(
    __global const bn_f4* cell_com, __global const bn_f4* cell_quad0, __global const bn_f4* cell_quad1,
    __global const bn_u32* cell_first, __global const bn_u32* cell_count, __global const bn_f4* pos,
    __global const bn_u32* opened, __global const bn_u32* keep, __global const bn_u32* cell_index,
    __global const bn_u32* particle_index, bn_u32 ncells, __global bn_f4* out_com, __global bn_f4* out_quad0,
    __global bn_f4* out_quad1, __global bn_u32* out_first, __global bn_u32* out_count, __global bn_f4* out_pos)
{
    const uint c = get_global_id(0);
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
        for (bn_u32 j = 0; j < bn_tree_count(cnt); ++j) out_pos[f + j] = pos[first + j];
    } else if (opened[c]) {
        f = cell_index[first];
        n = cnt;
    }
    out_first[k] = f;
    out_count[k] = n;
}

/* A received tree grafted at cells [first_cell, end_cell): the links it came with count from its own root and first
 * particle; first[c] moves by particle_shift for a leaf (a particle index) and by cell_shift for a node (its first
 * child's cell index). The host's loop in LetExchange::upload_tree does the same for trees that came through host
 * memory. Work-group BANYAN_WG. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void letShiftLinks(__global bn_u32* cell_first,
                                                                                  __global const bn_u32* cell_count,
                                                                                  bn_u32 first_cell, bn_u32 end_cell,
                                                                                  bn_u32 cell_shift,
                                                                                  bn_u32 particle_shift)
{
    const uint c = first_cell + get_global_id(0);
    if (c >= end_cell) return;
    cell_first[c] += bn_tree_is_leaf(cell_count[c]) ? particle_shift : cell_shift;
}
